/* The ZO step's element-wise passes at a model's size beside this machine's memory
 * bandwidth (distzo/bench.h's dz_bench_zo_passes_run), and their report. */
#ifndef DZ_BENCH_PASSES_H
#define DZ_BENCH_PASSES_H

#include <stdio.h>

#include "distzo/bench.h"
#include "distzo/model.h"

/* The passes over every parameter of m (the working copy of its largest layer block),
 * with the threads in force and the steps' z (Gaussian, or Rademacher): where the step's
 * time beyond its two forwards goes. */
dz_status dz_bench_model_passes(const dz_model *m, int rounds, int rademacher, dz_bench_zo_passes *out, dz_error *err);
/* ", \"passes\": {...}" for a JSON object, or the text lines; step and two_fwd (seconds)
 * put the fused pass beside what the step adds to its two forwards; step_v2: the step was
 * timed under ZO_RNG v2 (the other version's step is this one with the other's pass). */
void dz_bench_print_passes(FILE *out, const dz_bench_zo_passes *p, double step, double two_fwd, int step_v2, int json);

#endif
