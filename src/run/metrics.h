/* RUN_DIR/metrics.jsonl: one JSON object per training step, for plots and monitoring;
 * "step" counts the steps done (1-based, as checkpoint-N), and step 0 is the evaluation
 * before training (no loss, g or lr):
 *
 *   {"step": 0, "loss": null, "g": null, "lr": null, "seconds": 1.5, "dev_accuracy": 0.5, ...}
 *   {"step": 12, "loss": 0.693147, "g": -0.0123, "lr": 1e-06, "seconds": 4.125}
 *   {"step": 500, ..., "dev_accuracy": 0.812, "test_accuracy": 0.41, "best_dev_accuracy": 0.82}
 *
 * Values are float32 quantities, printed with the fewest digits that read back as the
 * same float; a non-finite value is written as null. "seconds" (wall time since the run
 * started, %.3f) is the only field that differs between a resumed run and an
 * uninterrupted one. Each line is flushed to the kernel when written (a killed process
 * loses nothing) and fsync'd every sync_every lines.
 *
 * The same writer keeps two views of the rows beside it: RUN_DIR/metrics.csv (a header
 * line, then step,loss,g,lr,seconds,steps_per_s,bytes_per_step,dev_accuracy,test_accuracy,
 * best_dev_accuracy,dev_loss,test_loss; an empty cell: not measured), trimmed on resume as
 * metrics.jsonl is, and a TensorBoard event file (src/run/tensorboard.h), a new one per
 * process start that logs a row (made at its first), with the scalars train/loss, train/g, train/lr, train/steps_per_s,
 * train/bytes_per_step (MPI) and eval/dev_accuracy, eval/test_accuracy,
 * eval/best_dev_accuracy (or eval/dev_loss, eval/test_loss). */
#ifndef DZ_RUN_METRICS_H
#define DZ_RUN_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "distzo/error.h"
#include "distzo/metrics.h" /* dz_metrics_row, dz_metrics_read */

#define DZ_METRICS_SYNC_EVERY_DEFAULT 64

typedef struct dz_metrics dz_metrics;

/* Opens path (and metrics.csv and a new event file beside it) for appending (creating it). Lines with step > keep_through are dropped
 * first, as is a torn tail (lines cut short by a crash), by an atomic rewrite: on resume
 * pass the last step the run has state for (the seed log's last step), so the file then
 * continues exactly as an uninterrupted run's would. Rows of path that metrics.csv lacks
 * (resume rebuilt them, or the CSV was removed) are added to it and to the new event file. A new run passes its first step - 1.
 * A malformed line before the last good one is an error naming the file and line.
 * sync_every: fsync every that many lines; 0 = only in dz_metrics_sync / close. */
dz_status dz_metrics_open(const char *path, int64_t keep_through, int sync_every, dz_metrics **out, dz_error *err);
/* Appends one line; steps must not decrease. */
dz_status dz_metrics_append(dz_metrics *m, const dz_metrics_row *row, dz_error *err);
dz_status dz_metrics_sync(dz_metrics *m, dz_error *err);
/* A torn tail of metrics.jsonl (lines cut short by a crash): its bytes (0: none) and first line. */
typedef struct dz_metrics_torn {
    size_t bytes, line;
} dz_metrics_torn;
/* dz_metrics_read, but a torn tail is returned in *torn, not said: for a reader that
 * rewrites the file (and says so once) or only needs the steps. */
dz_status dz_metrics_read_quiet(const char *path, dz_metrics_row **rows, size_t *n, dz_metrics_torn *torn,
                                dz_error *err);
/* The warning for a torn tail dropped from path (nothing when t->bytes is 0). */
void dz_metrics_say_torn(const char *path, const dz_metrics_torn *t);
/* metrics.csv's whole lines as rows (the header and lines that are not rows skipped):
 * resume restores rows metrics.jsonl lost from it (its values have jsonl's digits). */
dz_status dz_metrics_csv_read(const char *path, dz_metrics_row **rows, size_t *n, dz_error *err);
/* Writes rows (in the order given) as path's whole content, atomically: resume's
 * rebuild of rows lost from metrics.jsonl. */
dz_status dz_metrics_write_rows(const char *path, const dz_metrics_row *rows, size_t n, dz_error *err);
/* v as metrics.jsonl holds it: rounded to float32 (non-finite values unchanged). The
 * best-so-far is kept so, because resume can rebuild it only from metrics.jsonl's rows. */
double dz_metrics_value(double v);
/* f with the fewest digits (%.Ng, N up to 9) that read back as the same float: 4e-05,
 * not 3.9999998989515e-05 (run.json writes its floats so too). Returns the length. */
int dz_float_shortest(char *out, size_t cap, float f);
/* Syncs and closes; NULL is fine. */
dz_status dz_metrics_close(dz_metrics *m, dz_error *err);

#endif
