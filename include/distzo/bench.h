/* What `distzo bench` measures distzo against: OpenBLAS's sgemm, loaded at run time
 * (src/backend/blas.h; the model never calls it), on the GEMM shapes distzo runs. */
#ifndef DISTZO_BENCH_H
#define DISTZO_BENCH_H

#include <stddef.h>
#include <stdint.h>

#include "distzo/error.h"

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

/* n pseudo-random tokens in [lo, hi) from seed: a benchmark's batch. */
void dz_bench_random_tokens(int *tokens, size_t n, int lo, int hi, uint64_t seed);

#endif
