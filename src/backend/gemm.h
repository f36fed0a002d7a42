/* distzo's own GEMM for the Linear layer, with an arithmetic order distzo fixes.
 *
 * Every output element is one fused multiply-add chain over k = 0, 1, ..., K-1 in order,
 * starting from +0, then one add of the bias: y[i][n] = fma(x[i][K-1], w[n][K-1], ...
 * fma(x[i][0], w[n][0], 0)) + bias[n]. Nothing else touches it, so its bits depend only
 * on its own row of x and column of w: not on M, the row's place in the call, the thread
 * count or the split of the work, nor on the vector unit (AVX-512, AVX2 and the portable
 * path run the same chain, 16, 8 or 1 lanes at a time). */
#ifndef DZ_BACKEND_GEMM_H
#define DZ_BACKEND_GEMM_H

#include <stddef.h>

#include "core/isa.h"

/* y[M,N] = x[M,K] . w[N,K]^T (+ bias[N] if non-NULL), all row-major and contiguous (the
 * Linear layout: w's row n holds output n's K weights). Runs on the threads set by
 * dz_set_num_threads, with the kernels of dz_isa_active(). Allocates nothing after the
 * first call on a thread (each thread keeps fixed-size packing buffers). */
void dz_gemm_linear(float *y, const float *x, const float *w, const float *bias, int M, int N, int K);

/* The same on the calling thread alone, with the kernels of the given level (which this
 * machine must be able to run): for tests and benchmarks. */
void dz_gemm_linear_serial(dz_isa isa, float *y, const float *x, const float *w, const float *bias, int M, int N,
                           int K);

/* A line for `info` and `bench`: the micro-kernel in use and its order, e.g.
 * "distzo avx512 12x32 micro-kernel, one FMA chain per output in k order (fixed order)". */
const char *dz_gemm_describe(void);

#endif
