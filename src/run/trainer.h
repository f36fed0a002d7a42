/* The trainer's state, shared by the files of src/run that make up dz_train: trainer.c
 * (setup and the step loop), train_data.c (examples and batches), evaluate.c,
 * checkpoint.c (checkpoints, the best-so-far), resume.c (where the weights come from,
 * replay) and replicas.c (the replica check). */
#ifndef DZ_RUN_TRAINER_H
#define DZ_RUN_TRAINER_H

#include "distzo/distzo.h"
#include "distzo/setup.h"
#include "distzo/train.h"
#include "parallel/layout.h"
#include "run/metrics.h"
#include "run/seedlog.h"

enum { DZ_OBJ_CE, DZ_OBJ_ACCURACY, DZ_OBJ_F1 };

/* --objective f1: each sign's sequences, decoders and answers of this rank's examples. */
typedef struct dz_trainer_decode {
    int *tokens[2], *lengths[2];
    unsigned char *done[2];
    dz_qa_decoder *dec[2];
    char *text[2];
    float *logits;
} dz_trainer_decode;

/* The best model so far by the dev score (accuracy, or minus the mean NLL for LM). */
typedef struct dz_best {
    double dev, test;
    int step;
} dz_best;

typedef struct dz_trainer {
    dz_train_config cfg;
    char run_dir[4096];
    dz_zo_setup *setup;               /* owns the four below */
    dz_model *m;
    dz_store *store;                  /* --store disk:PATH: the layer masters */
    dz_forward *f;
    dz_zo_engine *e;
    dz_tokenizer *tok;
    int lm;                           /* causal-LM fine-tuning, else prompt classification */
    const dz_task_preset *preset;     /* --task is one of MeZO's presets (NULL: sst2, classify, lm) */
    int gen;                          /* a generation preset: trained as prompt/completion, scored by F1 */
    int objective;                    /* DZ_OBJ_* */
    dz_qa_set dev_qa, test_qa;        /* generation: the sets scored by F1 / EM */
    dz_qa_set train_qa;               /* --objective f1: the training examples' prompts and answers */
    dz_trainer_decode dec;
    double last_em;                   /* generation: the exact match of the last evaluation */
    dz_prompt_spec spec;
    dz_dataset pool, test;
    dz_class_set train, dev, testset; /* dev = model selection, test = reported */
    dz_seedlog *log;
    dz_metrics *metrics;
    dz_class_batch bb;
    int *order, order_epoch;          /* the current epoch's shuffle of the training examples */
    int *batch_ex, *batch_labels;
    float *scores;
    double t0;
    int ckpt_steps;                   /* resume: the steps in the weights loaded */
    dz_best best;                     /* the best-so-far carried over a resume */
    double before_dev, before_test;   /* resume: the scores before training (metrics.jsonl's row 0) */
    dz_comm *comm, *own_comm;         /* own_comm: a one-process group made here */
    dz_layout lay;
    int rank0;                        /* world rank 0 owns the run folder */
    int node_shared;                  /* the node's ranks share one copy of the masters */
    int verify_warned;                /* --verify-every said once that there is one copy only */
    int lo, hi;                       /* this rank's examples of the step's global batch */
    double *eval_pairs;               /* per-example (score, weight) of an evaluation */
    int *eval_preds;
    int lock_fd;                      /* rank 0: the run folder's lock (-1: none) */
    int made_run_dir;                 /* this start created the run folder */
    int lock_was_there;               /* the folder had a .lock before this start (from an earlier run) */
    int settings_changed;             /* a resume raised steps or changed housekeeping: run.json rewritten */
    int failed_before_write;          /* a fresh start failed before run.json: leave the folder as it was */
    char fingerprints[2][17];         /* data held in memory (train, test): run.json's *_data_fingerprint */
} dz_trainer;

/* trainer.c: everything a step needs, without the run folder: the layout, the weights
 * (from `weights`; from_checkpoint: its own tokenizer comes first), the tokenizer, the
 * data, the engine and the batch buffers (a federated worker is this and no run folder). */
dz_status dz_trainer_setup_compute(dz_trainer *tr, const char *weights, int from_checkpoint, dz_error *err);
/* A zeroed trainer's start: its clock, no run-folder lock yet, and its communicator (comm,
 * or NULL: a one-process group of its own). dz_train, a federated worker's replica and a
 * coordinator's evaluator all begin here. */
dz_status dz_trainer_begin(dz_trainer *tr, dz_comm *comm, dz_error *err);
/* Frees what dz_train or dz_trainer_setup_compute made (lock_fd -1: no lock to drop). */
void dz_trainer_teardown(dz_trainer *tr);

/* train_data.c: the training pool's train/dev draw and the test set, as sequences. */
/* agreement.c: every rank has the same settings, model and data (a no-op in one process). */
/* A fingerprint of a tensor table: its names and shapes (federated workers use it too). */
uint64_t dz_trainer_table_hash(const dz_param_table *t);
dz_status dz_trainer_check_agreement(dz_trainer *tr, dz_error *err);
/* A fingerprint of a dataset's examples: every row's text, completion, label, candidates and
 * answers, in order (the ranks' agreement and run.json's *_data_fingerprint of data held in memory). */
uint64_t dz_trainer_data_hash(const dz_dataset *ds);
dz_status dz_trainer_load_data(dz_trainer *tr, dz_error *err);
/* The examples (and labels) of step's global batch into tr->batch_ex / batch_labels. */
void dz_trainer_draw_batch(dz_trainer *tr, int step);
/* Generation: the most answer tokens of a greedy answer (--gen-tokens, at most half the model's positions). */
int dz_trainer_gen_tokens(const dz_trainer *tr);
/* The engine's loss callback (dz_zo_loss_fn; user = the trainer). */
void dz_trainer_loss(const float *logprobs, const float *p_logprobs, void *user, double *out);

/* train_decode.c: --objective f1's buffers for a share of `local` examples, and the
 * engine's decoding batch of the step drawn (tr->batch_ex, lo, hi). */
dz_status dz_trainer_decode_init(dz_trainer *tr, int local, dz_error *err);
void dz_trainer_decode_free(dz_trainer *tr);
dz_zo_decode dz_trainer_decode_batch(dz_trainer *tr);

/* evaluate.c: the selection score of a set (NaN for an empty one), the same for any
 * number of ranks. */
dz_status dz_trainer_evaluate(dz_trainer *tr, const dz_class_set *cs, double *score, dz_error *err);
/* Generation: the mean F1 and exact match of the greedy answers (NaN for an empty set). */
dz_status dz_trainer_evaluate_qa(dz_trainer *tr, const dz_qa_set *s, double *f1, double *em, dz_error *err);
/* The dev and test scores of the current weights (accuracy, minus the LM loss, or F1). */
dz_status dz_trainer_evaluate_sets(dz_trainer *tr, double *dev, double *test, dz_error *err);
/* An evaluation's scores into a metrics row as the user reads them (LM: the losses). */
void dz_trainer_eval_row(const dz_trainer *tr, double dev, double test, double best_dev, dz_metrics_row *row);

/* checkpoint.c: run_dir/checkpoint-N/ (name "checkpoint") or best/ with the weights
 * after steps_done steps and the best-so-far. Collective (every rank flushes). */
dz_status dz_trainer_checkpoint(dz_trainer *tr, const char *name, int steps_done, const dz_best *best,
                                dz_error *err);
/* Divergence: a checkpoint is never written from weights whose loss is not finite (it
 * would rotate a good one away): skipped says so (DZ_OK). diverged is the stop after
 * --max-bad-steps such steps: DZ_ERR_INVALID saying how to go on (--resume-from). */
dz_status dz_trainer_checkpoint_skipped(const dz_trainer *tr, int done);
dz_status dz_trainer_diverged(dz_trainer *tr, int done, int bad, dz_error *err);
/* The weights' checksum (--verify-every's, written with each checkpoint): the masters
 * flushed and hashed, a node's slices summed. Collective over the node with shared masters. */
dz_status dz_trainer_weights_checksum(dz_trainer *tr, uint64_t *sum, dz_error *err);
/* Resume, rank 0: tr->best as the uninterrupted run had it at the last logged step; steps
 * logged without their metrics row are dropped from the seed log, to be recomputed.
 * base_dev / base_test: the base model's scores (used when no checkpoint exists). */
dz_status dz_trainer_restore_best(dz_trainer *tr, double base_dev, double base_test, dz_error *err);

/* resume.c: the weights to load, the newest checkpoint (resume) or the base model, the
 * same on every rank. */
dz_status dz_trainer_weights_path(dz_trainer *tr, int resume, char *path, size_t cap, int *ckpt_steps,
                                  dz_error *err);
/* Resume: opens the seed log (h: what it must match), restores the best-so-far and
 * replays the logged steps after the checkpoint on every rank; *start_step is the next. */
dz_status dz_trainer_resume(dz_trainer *tr, const dz_seedlog_header *h, const char *log_path, int ckpt_steps,
                            int *start_step, dz_error *err);

/* replicas.c: --verify-every: the nodes' masters compared by checksum after step done. */
dz_status dz_trainer_verify_replicas(dz_trainer *tr, int done, dz_error *err);

#endif
