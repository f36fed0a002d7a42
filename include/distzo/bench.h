/* What `distzo bench` measures distzo against: OpenBLAS's sgemm, loaded at run time
 * (src/backend/blas.h; the model never calls it), on the GEMM shapes distzo runs. */
#ifndef DISTZO_BENCH_H
#define DISTZO_BENCH_H

#include <stddef.h>
#include <stdint.h>

#include "distzo/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum dz_bench_gemm { DZ_BENCH_GEMM_OPENBLAS, DZ_BENCH_GEMM_DISTZO } dz_bench_gemm;

/* Loads OpenBLAS with distzo's thread count (dz_runtime_init first); DZ_ERR_NOT_FOUND
 * naming every library tried when it is not installed. */
dz_status dz_bench_reference_load(dz_error *err);
/* The core OpenBLAS runs, e.g. "SkylakeX"; "unavailable" if not loaded. */
const char *dz_bench_reference_core(void);

/* GFLOP/s of y[M,N] = x[M,K] w[N,K]^T on fixed pseudo-random inputs with the current
 * thread count, timed for at least min_seconds after a warm-up call; negative if memory
 * runs out. */
double dz_bench_gemm_gflops(dz_bench_gemm which, int M, int N, int K, double min_seconds);

/* The element-wise work of a ZO step over n f32 parameters, timed with the CPU backend's
 * ZO kernels on buffers of its own (lr 0 keeps them) and spread over the threads as the
 * pipeline spreads it (32768-element spans handed out dynamically), beside this machine's
 * memory bandwidth measured with the same threads. Seconds are the best of `rounds`; z is
 * Gaussian, or Rademacher +-1 where `rademacher` is given (--perturbation rademacher). */
typedef struct dz_bench_zo_passes {
    double elements;      /* n */
    int rademacher;       /* the passes drew Rademacher z; 0: Gaussian */
    double zgen_s;        /* z alone, twice per parameter (a step draws the update's and the perturbation's) */
    double perturb_s;     /* w+ and w- of every parameter from theta into a working copy of `block` floats
                           * reused block by block, as the layers' fills write them */
    double update_s;      /* the update alone (theta read and written, one z per parameter) */
    double fused_s;       /* the step's pass: the update, then w+ and w- from the new theta (two z) */
    double perturb_bytes; /* bytes each pass reads and writes: theta 4 + w+- 8 per parameter */
    double update_bytes;  /* theta 4 + 4 */
    double fused_bytes;   /* theta 4 + 4, w+- 8 */
    double read_gbs;      /* memory bandwidth: summing a buffer of max(n, 2^26) floats, GB/s */
    double copy_gbs;      /* copying 2^26 floats (256 MiB), read + written bytes, GB/s */
    double zgen_v2_s;     /* zgen_s and fused_s with ZO_RNG v2's z (--rng v2, docs/ZO_RNG.md) */
    double fused_v2_s;
} dz_bench_zo_passes;
dz_status dz_bench_zo_passes_run(size_t n, size_t block, int rounds, int rademacher, dz_bench_zo_passes *out,
                                 dz_error *err);

/* n pseudo-random tokens in [lo, hi) from seed: a benchmark's batch. */
void dz_bench_random_tokens(int *tokens, size_t n, int lo, int hi, uint64_t seed);

#ifdef __cplusplus
}
#endif

#endif
