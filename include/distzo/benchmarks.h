/* The benchmarks `distzo bench` runs (src/bench): each measures side by side, in one run,
 * what it compares, and writes its report (text lines, or one JSON object) to a stream.
 * The caller sets up the runtime first (and, for forward and eval, loads the OpenBLAS
 * reference: distzo/bench.h) and loads the model. */
#ifndef DISTZO_BENCHMARKS_H
#define DISTZO_BENCHMARKS_H

#include <stdio.h>

#include "distzo/distzo.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dz_bench_report {
    FILE *out;
    int json;          /* one JSON object instead of text lines */
    const char *model; /* the model as the user named it */
} dz_bench_report;

/* Whole forward passes (head on every position, as LM training does) and, in the same
 * run, OpenBLAS sgemm on the model's own GEMM shapes; the ratio. */
typedef struct dz_bench_forward_spec {
    int batch, seq;
    float seconds; /* the least time to measure the forward */
    const char *backend; /* --backend (dz_backend_create; NULL: cpu), in each spec */
} dz_bench_forward_spec;
dz_status dz_bench_forward(dz_model *m, const dz_bench_forward_spec *s, const dz_bench_report *r, dz_error *err);

/* A plain forward (as eval runs it), then full ZO steps, with the peak RSS after each
 * phase; in memory with f32 masters the step's element-wise passes too; with a store,
 * its I/O per step and how much of it compute hid. Loads the model itself (the masters
 * as the step keeps them). */
typedef struct dz_bench_step_spec {
    const char *model, *store; /* store: NULL (in memory), disk:PATH or disk-nocache:PATH */
    dz_dtype master;
    int batch, seq, steps, fuse, max_resident_mb, stream_globals;
    const char *backend;
    int max_device_mb; /* a device backend's cap (0: none): above it the layer masters stream through it */
    /* method "lora" or "prefix": the step trains that adapter over the read-only base (its
     * settings as train's, lora_init unused), and the forward phase also times the base's
     * forward with the adapter attached; NULL or "none": every parameter */
    dz_train_peft peft;
    int interleave; /* the forwards timed round by round between the steps, not in a phase of their own */
    int rng_v2;     /* the steps draw ZO_RNG v2's z (--rng v2, docs/ZO_RNG.md section 10); 0: v1 */
    int rademacher; /* the steps' z is Rademacher +-1 (--perturbation rademacher); 0: Gaussian */
} dz_bench_step_spec;
dz_status dz_bench_step(const dz_bench_step_spec *s, const dz_bench_report *r, dz_error *err);

/* ZO steps on SST-2 classification with every candidate a full sequence (MeZO) and with
 * candidates continuing their example's shared prompt; whether g is the same in both. */
typedef struct dz_bench_classify_spec {
    const char *data, *label_words;
    int batch, steps;
    const char *backend;
} dz_bench_classify_spec;
dz_status dz_bench_classify(dz_model *m, const dz_tokenizer *tok, const dz_bench_classify_spec *s,
                            const dz_bench_report *r, dz_error *err);

/* Eval forwards and ZO steps on the first SST-2 batches against the GEMMs of exactly
 * their Linear shapes (the faster of OpenBLAS and distzo's per shape): ideal / measured. */
typedef struct dz_bench_eval_spec {
    const char *data, *label_words; /* label_words NULL: MeZO's */
    int batch, batches, repeat, flat;
    const char *backend;
    int rng_v2;     /* the steps draw ZO_RNG v2's z (--rng v2); 0: v1 */
    int rademacher; /* the steps' z is Rademacher +-1 (--perturbation rademacher); 0: Gaussian */
    /* method "lora" or "prefix": the steps train that adapter over the read-only base m (as
     * loaded: kept quantized if it was) and the eval forwards run with it attached, as an
     * adapter's eval does; NULL or "none": every parameter. model: m's path (the adapter's
     * adapter_config.json names it). */
    dz_train_peft peft;
    const char *model;
} dz_bench_eval_spec;
dz_status dz_bench_eval(dz_model *m, const dz_tokenizer *tok, const dz_bench_eval_spec *s, const dz_bench_report *r,
                        dz_error *err);

#ifdef __cplusplus
}
#endif

#endif
