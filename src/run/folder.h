/* The run folder of a training run (floor 2 of src/run; see trainer.h): its lock, run.json,
 * the seed log, metrics.jsonl and the checkpoints with the best-so-far they carry. It
 * writes the compute's weights but knows nothing of the examples. */
#ifndef DZ_RUN_FOLDER_H
#define DZ_RUN_FOLDER_H

#include "run/compute.h"
#include "run/metrics.h"
#include "run/seedlog.h"

/* The best model so far by the dev score (accuracy, or minus the mean NLL for LM). */
typedef struct dz_best {
    double dev, test;
    int step;
} dz_best;

typedef struct dz_run_folder {
    char dir[4096];
    dz_seedlog *log;                  /* rank 0 */
    dz_metrics *metrics;              /* rank 0 */
    int ckpt_steps;                   /* resume: the steps in the weights loaded */
    dz_best best;                     /* the best-so-far carried over a resume */
    double before_dev, before_test;   /* resume: the scores before training (metrics.jsonl's row 0) */
    int lock_fd;                      /* rank 0: the run folder's lock (-1: none) */
    int made_run_dir;                 /* this start created the run folder */
    int lock_was_there;               /* the folder had a .lock before this start (from an earlier run) */
    int settings_changed;             /* a resume raised steps or changed housekeeping: run.json rewritten */
    int failed_before_write;          /* a fresh start failed before run.json: leave the folder as it was */
} dz_run_folder;

/* folder.c: the folder at dir (no lock yet). */
void dz_run_folder_init(dz_run_folder *rf, const char *dir);
/* The settings of this run into *cfg: a new run's (cfg_in, checked; rank0 makes and locks
 * the folder), or on resume run.json's with what the command line may change (strings:
 * what the read settings point into, the caller's to free). */
dz_status dz_run_folder_settings(dz_run_folder *rf, dz_train_config *cfg, const dz_train_config *cfg_in,
                                 int resume, int rank0, char **strings, dz_error *err);
/* Closes the logs and drops the lock (a fresh start that failed leaves the folder as it was). */
void dz_run_folder_close(dz_run_folder *rf);

/* checkpoint.c: dir/checkpoint-N/ (name "checkpoint") or best/ with the compute's weights
 * after steps_done steps and the best-so-far. Collective (every rank flushes). */
dz_status dz_run_folder_checkpoint(dz_run_folder *rf, const dz_compute *c, const char *name, int steps_done,
                                   const dz_best *best, dz_error *err);
/* Divergence: a checkpoint is never written from weights whose loss is not finite (it
 * would rotate a good one away): skipped says so (DZ_OK). diverged is the stop after
 * --max-bad-steps such steps: DZ_ERR_INVALID saying how to go on (--resume-from). */
dz_status dz_run_folder_checkpoint_skipped(const dz_compute *c, int done);
dz_status dz_run_folder_diverged(const dz_run_folder *rf, const dz_compute *c, int done, int bad, dz_error *err);
/* Resume, rank 0: rf->best as the uninterrupted run had it at the last logged step (lm:
 * the scores are losses); steps logged without their metrics row are dropped from the
 * seed log, to be recomputed. base_dev / base_test: the base model's scores (used when no
 * checkpoint exists). */
dz_status dz_run_folder_restore_best(dz_run_folder *rf, int lm, double base_dev, double base_test, dz_error *err);
/* Resume from the base model, rank 0: the base model's scores as metrics.jsonl's row 0
 * holds them (the evaluation before training), so that the resume need not evaluate them
 * again. *found 0 when there is no file or no such row (killed before it was written); a
 * file that cannot be read is an error, before any evaluation. */
dz_status dz_run_folder_base_scores(const dz_run_folder *rf, int lm, double *base_dev, double *base_test, int *found,
                                    dz_error *err);

#endif
