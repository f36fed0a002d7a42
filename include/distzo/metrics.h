/* A run's metrics.jsonl, read back (distzo plot, monitoring): one row per training step,
 * numbered as the checkpoints (step N: after N steps), and a step-0 row with the scores
 * before training. The format, and how the trainer writes it: src/run/metrics.h. */
#ifndef DISTZO_METRICS_H
#define DISTZO_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "distzo/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dz_metrics_row {
    int64_t step;   /* steps done: 1 for the first step's row; 0: the evaluation before training */
    double loss;    /* training loss of the step (the unperturbed or mean of +/- losses: the trainer's choice) */
    double g;       /* projected gradient (the mean over the step's samples when q > 1) */
    double lr;
    double seconds; /* wall time since the run started */
    int has_eval;   /* 1: the dev_* fields below are written */
    double dev_accuracy, test_accuracy, best_dev_accuracy; /* classification; NaN: not written */
    double dev_loss, test_loss;                            /* causal LM (mean NLL); NaN: not written */
    double steps_per_s;  /* training steps per second so far (evaluations excluded); 0: unknown. Only in
                          * metrics.csv and the TensorBoard events, never in metrics.jsonl (timing) */
    double step_bytes;   /* bytes this rank exchanged in the step (MPI); 0: none. Likewise */
} dz_metrics_row;

/* Reads every row of path (null or missing values as NaN; has_eval when dev_accuracy is
 * present). A torn tail is skipped with a warning, a malformed line before it is an error. */
dz_status dz_metrics_read(const char *path, dz_metrics_row **rows, size_t *n, dz_error *err);

#ifdef __cplusplus
}
#endif

#endif
