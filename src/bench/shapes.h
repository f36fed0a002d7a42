/* The GEMMs a forward runs (src/model/forward.c), timed with OpenBLAS sgemm and distzo's
 * GEMM: what the benchmarks measure a forward against. */
#ifndef DZ_BENCH_SHAPES_H
#define DZ_BENCH_SHAPES_H

#include "distzo/model.h"

typedef struct dz_gemm_shape {
    int M, N, K;
    double count; /* calls per forward */
} dz_gemm_shape;

enum { DZ_BENCH_MAX_SHAPES = 8 };

/* A forward's GEMMs on B x T tokens, the head over the vocabulary in 4096-column chunks
 * of at most 512 rows (as LM training runs it). Returns the count written. */
int dz_bench_model_shapes(const dz_config *c, int B, int T, dz_gemm_shape *s);
/* A forward's Linear GEMMs on M token rows and H head rows, the head in one GEMM. */
int dz_bench_batch_shapes(const dz_config *c, int M, int H, dz_gemm_shape *s);
/* Raises best[impl][i] to the GFLOP/s measured now for shape i, OpenBLAS and distzo's
 * GEMM interleaved shape by shape so that both see the same moment of a shared machine. */
void dz_bench_measure_shapes(const dz_gemm_shape *shapes, int n, double best[2][DZ_BENCH_MAX_SHAPES]);
/* Time-weighted GFLOP/s over a forward's GEMMs. */
double dz_bench_shapes_gflops(const dz_gemm_shape *shapes, int n, const double *gf);

#endif
