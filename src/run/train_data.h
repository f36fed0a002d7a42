/* The data of a run (floor 2 of src/run; see trainer.h): the task, its examples as
 * sequences of the compute's tokenizer, the step's batch and the epochs' order, and the
 * buffers a step's loss and an evaluation fill. It knows nothing of the run folder. */
#ifndef DZ_RUN_TRAIN_DATA_H
#define DZ_RUN_TRAIN_DATA_H

#include "run/compute.h"

enum { DZ_OBJ_CE, DZ_OBJ_ACCURACY, DZ_OBJ_F1 };

/* --objective f1: each sign's sequences, decoders and answers of this rank's examples. */
typedef struct dz_train_decode {
    int *tokens[2], *lengths[2];
    unsigned char *done[2];
    dz_qa_decoder *dec[2];
    char *text[2];
    float *logits;
} dz_train_decode;

typedef struct dz_run_data {
    const dz_train_config *cfg;       /* the settings (the compute's) */
    const dz_compute *comp;           /* the model and tokenizer the sequences are made for */
    int lm;                           /* causal-LM fine-tuning, else prompt classification */
    const dz_task_preset *preset;     /* --task is one of MeZO's presets (NULL: sst2, classify, lm) */
    int gen;                          /* a generation preset: trained as prompt/completion, scored by F1 */
    int objective;                    /* DZ_OBJ_* */
    dz_prompt_spec spec;
    dz_dataset pool, test;
    dz_class_set train, dev, testset; /* dev = model selection, test = reported */
    dz_qa_set dev_qa, test_qa;        /* generation: the sets scored by F1 / EM */
    dz_qa_set train_qa;               /* --objective f1: the training examples' prompts and answers */
    dz_class_batch bb;
    int *order, order_epoch;          /* the current epoch's shuffle of the training examples */
    int *batch_ex, *batch_labels;
    int lo, hi;                       /* this rank's examples of the step's global batch */
    float *scores;
    dz_train_decode dec;
    double *eval_pairs;               /* per-example (score, weight) of an evaluation */
    int *eval_preds;
    char fingerprints[2][17];         /* rows held in memory (train, test: cfg's *_set): their hash, for run.json */
} dz_run_data;

/* train_data.c: the task of cfg (its kind, objective and prompt), checked. */
dz_status dz_run_data_task(dz_run_data *d, const dz_compute *comp, dz_error *err);
/* The training pool's train/dev draw and the test set, as sequences: from the files, or
 * from rows the caller holds (cfg's train_set, test_set), whose fingerprints go to
 * d->fingerprints (on resume they must be the cfg's, run.json's). */
dz_status dz_run_data_load(dz_run_data *d, dz_error *err);
/* A fingerprint of a dataset's examples: every row's text, completion, label, candidates and
 * answers, in order (the ranks' agreement, run.json's *_data_fingerprint). */
uint64_t dz_run_data_hash(const dz_dataset *ds);
/* The step's buffers: `local` examples of K candidates, sequences up to max_len tokens
 * (share: candidates continue their example's prompt). */
dz_status dz_run_data_buffers(dz_run_data *d, int local, int K, int max_len, int share, dz_error *err);
void dz_run_data_free(dz_run_data *d);
/* The examples (and labels) of step's global batch into d->batch_ex / batch_labels. */
void dz_run_data_draw_batch(dz_run_data *d, int step);
/* Generation: the most answer tokens of a greedy answer (--gen-tokens, at most half the model's positions). */
int dz_run_data_gen_tokens(const dz_run_data *d);
/* The engine's loss callback (dz_zo_loss_fn; user = the data). */
void dz_run_data_loss(const float *logprobs, const float *p_logprobs, void *user, double *out);

/* train_decode.c: --objective f1's buffers for a share of `local` examples, and the
 * engine's decoding batch of the step drawn (d->batch_ex, lo, hi). */
dz_status dz_train_decode_init(dz_run_data *d, int local, dz_error *err);
void dz_train_decode_free(dz_run_data *d);
dz_zo_decode dz_train_decode_batch(dz_run_data *d);

#endif
