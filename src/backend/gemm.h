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
#include <stdint.h>

#include "core/isa.h"
#include "backend/zo_ops.h"

/* y[M,N] = x[M,K] . w[N,K]^T (+ bias[N] if non-NULL), all row-major and contiguous (the
 * Linear layout: w's row n holds output n's K weights). Runs on the threads set by
 * dz_set_num_threads, with the kernels of dz_isa_active(). Allocates nothing after the
 * first call on a thread (each thread keeps fixed-size packing buffers). */
void dz_gemm_linear(float *y, const float *x, const float *w, const float *bias, int M, int N, int K);

/* The same on the calling thread alone, with the kernels of the given level (which this
 * machine must be able to run): for tests and benchmarks. */
void dz_gemm_linear_serial(dz_isa isa, float *y, const float *x, const float *w, const float *bias, int M, int N,
                           int K);

/* The perturbation a pair GEMM packs into its weight panels: element e of w (row-major, e =
 * n K + k) is theta[e] + eps z and theta[e] - eps z, z = the contract's z(seed, tensor, draw,
 * i0 + e) (docs/ZO_RNG.md), rounded as the backend's perturb_pair rounds them. With upd,
 * theta first gets that pending update in place, as update_then_perturb_f32 applies it. */
typedef struct dz_gemm_perturb {
    float eps;
    uint64_t seed;
    uint32_t tensor, draw;
    uint64_t i0; /* theta[0]'s index in its tensor */
    dz_zdist dist;
    const dz_zo_update *upd; /* NULL: theta as it is */
} dz_gemm_perturb;

/* Both signs' Linear GEMMs of one weight matrix from theta: y[s][M[s], N] = x[s] . w_s^T
 * (+ bias[s]) with w_0 = theta + eps z and w_1 = theta - eps z. Each K block of theta's
 * panels is updated (pt->upd), perturbed and packed once into both signs' panels, which the
 * two signs' tiles then read: w+ and w- are never written to memory. The same bits, in y
 * and in theta, as update_then_perturb_f32 into two buffers followed by dz_gemm_linear on
 * each (the packed values are the same floats, the micro-kernel's chain is unchanged).
 * x[s], y[s] may be NULL when M[s] is 0. */
void dz_gemm_linear_pair(float *const y[2], const float *const x[2], const int M[2], float *theta,
                         const float *const bias[2], int N, int K, const dz_gemm_perturb *pt);

/* The same on the calling thread alone, with the micro-kernel of the given level (z and the
 * pair use dz_isa_active()'s: the same bits at every level). */
void dz_gemm_linear_pair_serial(dz_isa isa, float *const y[2], const float *const x[2], const int M[2], float *theta,
                                const float *const bias[2], int N, int K, const dz_gemm_perturb *pt);

/* A line for `info` and `bench`: the micro-kernel in use and its order, e.g.
 * "distzo avx512 12x32 micro-kernel, one FMA chain per output in k order (fixed order)". */
const char *dz_gemm_describe(void);

#endif
