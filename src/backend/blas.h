/* OpenBLAS's sgemm, loaded at run time with a core type chosen for this CPU: the
 * reference that benchmarks measure distzo's own GEMM (gemm.h) against. The model never
 * calls it: OpenBLAS's rounding depends on M, the row's place in its tiling, the thread
 * split and the core type, and distzo promises bitwise results whatever those are.
 *
 * Why run-time loading: Debian's OpenBLAS is a DYNAMIC_ARCH build whose own detection
 * can pick a slow core (e.g. "Prescott" on some AVX-512 Intel parts, ~6x slower), and it
 * reads OPENBLAS_CORETYPE only once, in its library constructor. Linking it at build
 * time would run that constructor before main(), so distzo dlopen()s it after setting
 * OPENBLAS_CORETYPE from cpuid (unless the user already set it). Its libgomp keeps its
 * default spin: the benchmarks measure OpenBLAS as a user runs it.
 *
 * Every function here calls dz_blas_init() itself; call it early (before starting
 * threads) because it may setenv(). */
#ifndef DZ_BACKEND_BLAS_H
#define DZ_BACKEND_BLAS_H

#include <stdbool.h>

#include "core/cpu_features.h"
#include "distzo/error.h"

/* Loads OpenBLAS once (pthread_once); later calls return the first call's result and
 * copy its error. Fails with DZ_ERR_NOT_FOUND naming every library name tried, or with
 * DZ_ERR_UNSUPPORTED if the library lacks cblas_sgemm. DISTZO_OPENBLAS=path makes it
 * load that file and nothing else. */
dz_status dz_blas_init(dz_error *err);

/* The core distzo asks for on this CPU: "Cooperlake" (AVX-512 F/BW/DQ/VL/CD + BF16,
 * OS saves ZMM), "SkylakeX" (same without BF16), "Haswell" (AVX2+FMA, OS saves YMM), or
 * NULL (leave OpenBLAS's own detection alone). Pure; exposed for tests. */
const char *dz_blas_choose_core(const dz_cpu_features *f);

/* C[M,N] = alpha * op(A)[M,K] . op(B)[K,N] + beta * C, row-major (a thin wrapper over
 * cblas_sgemm). op(X) is X, or X^T when trans_x. lda/ldb/ldc are row strides as
 * stored. A Linear layer y = x w^T is dz_sgemm(false, true, M, N, K, 1, x, K, w, K, 0,
 * y, N). Does nothing unless dz_blas_init() succeeded: check it first. */
void dz_sgemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float *A,
              int lda, const float *B, int ldb, float beta, float *C, int ldc);

/* The core OpenBLAS actually runs, e.g. "Cooperlake", "SkylakeX", "Haswell",
 * "Prescott"; "unknown" if the library does not say; "unavailable" if not loaded. */
const char *dz_blas_core_name(void);

/* A sentence: which core, which library file, and who chose the core (distzo from the
 * CPU features, the user via OPENBLAS_CORETYPE, or OpenBLAS's own detection; and
 * whether the library was already loaded before distzo could choose). */
const char *dz_blas_selection(void);

/* OpenBLAS's build string (openblas_get_config), or "" if unavailable. */
const char *dz_blas_config(void);

/* BLAS threads; n <= 0 means all cores. With the OpenMP build of OpenBLAS this also
 * sets the calling thread's omp_set_num_threads (inside libgomp, which distzo itself does
 * not link). No-op if not loaded. */
void dz_blas_set_threads(int n);

/* Measured sgemm speed for C[M,N] = A[M,K] . B[N,K]^T (the Linear layout) with the
 * current thread count: allocates, warms up, then times repeated calls for at least
 * min_seconds. Returns GFLOP/s (2MNK per call), or a negative value if OpenBLAS could
 * not be loaded, the sizes are not positive, or memory ran out. */
double dz_blas_sgemm_gflops(int M, int N, int K, double min_seconds);

#endif
