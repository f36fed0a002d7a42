/* distzo train: the trainer composed of its three parts, each with its own header.
 *
 * The floors of src/run (a file includes headers of its own floor or below, never above):
 *   0  the run folder's files and helpers, knowing nothing of a trainer: seedlog.h,
 *      metrics.h (tensorboard.h), run_files.h, seed_pool.h, setup.h, faults.h, stop.h
 *   1  compute.h    dz_compute: the layout, weights, forward, engine, tokenizer
 *   2  train_data.h dz_run_data: the task, examples, batches, their order (made for a compute)
 *      folder.h     dz_run_folder: lock, run.json, seed log, metrics, checkpoints, best-so-far
 *   3  prepare.h    compute + data made together (what a federated worker or evaluator needs)
 *      evaluate.h   the data's sets scored by its compute
 *   4  trainer.h    dz_trainer = settings + compute + data + folder: the step loop
 *      (trainer.c) and resume (resume.c)
 * src/federated uses floors 0-3, never this header. */
#ifndef DZ_RUN_TRAINER_H
#define DZ_RUN_TRAINER_H

#include "run/evaluate.h"
#include "run/folder.h"
#include "run/prepare.h"

typedef struct dz_trainer {
    dz_train_config cfg;   /* the run's settings (the parts point at them) */
    dz_compute comp;
    dz_run_data data;
    dz_run_folder folder;
    double t0;             /* the start, for the metrics' seconds */
    int base_known;        /* a resume without a checkpoint has the base model's scores: */
    double base_dev, base_test; /* a resume from step 0 logs them as row 0, not evaluating again */
} dz_trainer;

/* resume.c: the weights to load, the newest checkpoint (resume) or the base model, the
 * same on every rank. */
dz_status dz_trainer_weights_path(dz_trainer *tr, int resume, char *path, size_t cap, int *ckpt_steps,
                                  dz_error *err);
/* Resume: opens the seed log (h: what it must match), restores the best-so-far and
 * replays the logged steps after the checkpoint on every rank; *start_step is the next. */
dz_status dz_trainer_resume(dz_trainer *tr, const dz_seedlog_header *h, const char *log_path, int ckpt_steps,
                            int *start_step, dz_error *err);

#endif
