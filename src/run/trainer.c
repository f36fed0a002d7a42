/* distzo train: the loop around the ZO engine for prompt classification.
 *
 * Data: train_examples + dev_examples are drawn (without replacement, data_seed) from the
 * training pool: the first part trains, the second selects the best model (MeZO's
 * setup); the test set (GLUE dev for SST-2) is what accuracy is reported on. Step t uses
 * examples t*batch .. t*batch+batch-1 of an endless sequence of epochs, each a seeded
 * shuffle of the training examples, so the data of a step depends on nothing but t. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/rng.h"
#include "core/util.h"
#include "parallel/comm.h"
#include "parallel/layout.h"
#include "distzo/distzo.h"
#include "distzo/log.h"
#include "distzo/train.h"
#include "run/metrics.h"
#include "run/run_files.h"
#include "run/seedlog.h"
#include "store/store.h"

void dz_train_config_default(dz_train_config *c) {
    memset(c, 0, sizeof *c);
    c->task = "sst2";
    c->master_dtype = DZ_F32;
    c->train_examples = 1000;
    c->dev_examples = 500;
    c->data_seed = 42;
    c->lr = 1e-5f;
    c->eps = 1e-3f;
    c->batch = 16;
    c->steps = 4000;
    c->q = 1;
    c->fuse = 1;
    c->schedule = DZ_LR_CONSTANT;
    c->seed = 0;
    c->eval_every = 500;
    c->checkpoint_every = 1000;
    c->log_sync_every = DZ_SEEDLOG_SYNC_EVERY_DEFAULT;
    c->max_bad_steps = 5;
    c->keep_checkpoints = 1;
    c->eval_batch = 64;
    c->share_prompts = 1;
}

typedef struct trainer {
    dz_train_config cfg;
    char run_dir[4096];
    dz_model *m;
    dz_tokenizer *tok;
    int lm;                           /* causal-LM fine-tuning, else prompt classification */
    dz_prompt_spec spec;
    dz_dataset pool, test;
    dz_class_set train, dev, testset; /* dev = model selection, test = reported */
    dz_forward *f;
    dz_zo_engine *e;
    dz_seedlog *log;
    dz_metrics *metrics;
    dz_class_batch bb;
    int *order, order_epoch;          /* the current epoch's shuffle of the training examples */
    int *batch_ex, *batch_labels;
    float *scores;
    double t0;
    int ckpt_steps;                   /* resume: the steps in the weights loaded */
    dz_store *store;                  /* --store disk:PATH: the layer masters */
    double best_dev, best_test;       /* the best-so-far carried over a resume */
    int best_step;
    dz_comm *comm, *own_comm;         /* own_comm: a one-process group made here */
    dz_layout lay;
    int rank0;                        /* world rank 0 owns the run folder */
    int node_shared;                  /* the node's ranks share one copy of the masters */
    int lo, hi;                       /* this rank's examples of the step's global batch */
    double *eval_pairs;               /* per-example (score, weight) of an evaluation */
    int *eval_preds;
} trainer;

/* ---- data ------------------------------------------------------------------------- */

static dz_status load_examples(const trainer *tr, const char *path, dz_dataset *ds, dz_error *err) {
    const dz_train_config *c = &tr->cfg;
    if (tr->lm) return dz_dataset_load_text(path, ds, err);
    if (!strcmp(c->task, "sst2")) return dz_dataset_load_sst2(path, ds, err);
    return dz_dataset_load_jsonl(path, c->text_key ? c->text_key : "text", c->label_key ? c->label_key : "label", ds,
                                 err);
}

/* Sequences of a dataset for this run's task. */
static dz_status build_set(const trainer *tr, const dz_dataset *ds, dz_class_set *out, dz_error *err) {
    const int max_len = tr->cfg.lm_seq > 0 ? tr->cfg.lm_seq : dz_model_config(tr->m)->max_seq_len;
    if (tr->lm) return dz_lm_set_build(ds, tr->tok, max_len, out, err);
    return dz_class_set_build(ds, &tr->spec, tr->tok, dz_model_config(tr->m)->max_seq_len, out, err);
}

static dz_status load_split(trainer *tr, dz_error *err) {
    const dz_train_config *c = &tr->cfg;
    dz_status st = load_examples(tr, c->train_data, &tr->pool, err);
    if (st == DZ_OK && !tr->lm) st = dz_dataset_require_labels(&tr->pool, err); /* train and dev rows */
    if (st == DZ_OK && c->test_data) st = load_examples(tr, c->test_data, &tr->test, err);
    if (st != DZ_OK) return st;
    dz_dataset drawn;
    const int want = c->train_examples + c->dev_examples;
    if (c->train_examples < 1) return dz_fail(err, DZ_ERR_INVALID, "--train-examples must be at least 1");
    st = dz_dataset_sample(&tr->pool, want, c->data_seed, &drawn, err);
    if (st != DZ_OK) return st;
    if (drawn.count < want)
        dz_log(DZ_LOG_WARN, "%s has %d examples, fewer than the %d train + %d dev asked for", c->train_data, drawn.count,
               c->train_examples, c->dev_examples);
    const int ntrain = drawn.count < c->train_examples ? drawn.count : c->train_examples;
    dz_dataset train = drawn, dev = drawn;
    train.count = ntrain;
    dev.items = drawn.items + ntrain;
    dev.count = drawn.count - ntrain;
    st = build_set(tr, &train, &tr->train, err);
    if (st == DZ_OK && dev.count > 0) st = build_set(tr, &dev, &tr->dev, err);
    if (st == DZ_OK && c->test_data) st = build_set(tr, &tr->test, &tr->testset, err);
    dz_dataset_free(&drawn);
    return st;
}

/* Example index of slot b of step t: epoch e = k / n is a seeded shuffle of 0..n-1. */
static void batch_examples(trainer *tr, int step) {
    const int n = tr->train.n_examples, B = tr->cfg.batch;
    for (int b = 0; b < B; b++) {
        const int64_t k = (int64_t)step * B + b;
        const int epoch = (int)(k / n), pos = (int)(k % n);
        if (epoch != tr->order_epoch) {
            uint64_t s = tr->cfg.data_seed ^ (0xd1b54a32d192ed03ULL * (uint64_t)(epoch + 1));
            for (int i = 0; i < n; i++) tr->order[i] = i;
            for (int i = n - 1; i > 0; i--) {
                const int j = (int)dz_uniform_below(&s, (uint64_t)i + 1), x = tr->order[i];
                tr->order[i] = tr->order[j];
                tr->order[j] = x;
            }
            tr->order_epoch = epoch;
        }
        tr->batch_ex[b] = tr->order[pos];
        tr->batch_labels[b] = tr->train.labels[tr->order[pos]];
    }
}

/* (loss, weight) of each of this rank's examples: cross-entropy and 1, or an LM window's
 * summed NLL and its token count. */
static void loss_cb(const float *logprobs, const float *p_logprobs, void *user, double *out) {
    trainer *tr = user;
    if (tr->lm) {
        dz_lm_example_losses(&tr->bb, logprobs, out);
        return;
    }
    const int K = tr->train.n_labels;
    dz_class_batch_scores(&tr->bb, logprobs, p_logprobs, tr->scores);
    for (int e = 0; e < tr->hi - tr->lo; e++) {
        dz_class_example_losses(tr->scores + (size_t)e * K, tr->batch_labels + tr->lo + e, 1, K, &out[2 * e]);
        out[2 * e + 1] = 1.0;
    }
}

/* ---- evaluation and state ---------------------------------------------------------- */

/* Examples [lo, hi) of a set, sharing its sequences. */
static dz_class_set class_view(const dz_class_set *cs, int lo, int hi) {
    dz_class_set v = *cs;
    v.n_examples = hi - lo;
    v.seqs = cs->seqs + (size_t)lo * cs->n_labels;
    v.labels = cs->labels + lo;
    return v;
}

/* The selection score of a set: accuracy (classification) or minus the mean NLL (LM),
 * so higher is better either way. NaN for an empty set. Each rank scores a share of the
 * examples; per-example (score, weight) pairs are summed over ranks (one non-zero
 * contributor each) and combined in example order, so the result is the same for any
 * number of ranks. */
static dz_status evaluate(trainer *tr, const dz_class_set *cs, double *score, dz_error *err) {
    *score = NAN;
    const int n = cs->n_examples;
    if (n == 0) return DZ_OK;
    dz_status st = dz_zo_flush(tr->e, err); /* evaluation never sees stale weights */
    if (st != DZ_OK) return st;
    const dz_weight_source w = dz_zo_master_source(tr->e);
    int lo, hi;
    dz_layout_share(n, tr->lay.n, tr->lay.rank, &lo, &hi);
    double *pairs = tr->eval_pairs;
    memset(pairs, 0, sizeof(double) * 2 * (size_t)n);
    const dz_class_set v = class_view(cs, lo, hi);
    if (hi > lo && tr->lm) {
        double nll;
        st = dz_lm_evaluate(tr->f, &w, &v, tr->cfg.eval_batch, pairs + 2 * (size_t)lo, &nll, err);
    } else if (hi > lo) {
        st = dz_class_evaluate(tr->f, &w, &v, tr->cfg.eval_batch, tr->eval_preds, NULL, NULL, err);
        for (int i = 0; st == DZ_OK && i < hi - lo; i++) {
            pairs[2 * (size_t)(lo + i)] = v.labels[i] >= 0 && tr->eval_preds[i] == v.labels[i];
            pairs[2 * (size_t)(lo + i) + 1] = v.labels[i] >= 0;
        }
    }
    if (st == DZ_OK) st = dz_zo_source_status(tr->e, err); /* a store read that failed inside the forward */
    if (st == DZ_OK) st = dz_comm_sum_f64(tr->comm, pairs, 2 * (size_t)n, err);
    if (st != DZ_OK) return st;
    double a = 0.0, b = 0.0;
    for (int i = 0; i < n; i++) a += pairs[2 * i], b += pairs[2 * i + 1];
    if (tr->lm) *score = b > 0 ? -(a / b) : NAN;
    else *score = b > 0 ? a / b : 0.0;
    return DZ_OK;
}

/* trainer_state.json: what a resume needs beyond the weights and the log. Scores are the
 * selection scores (accuracy, or minus the mean NLL for LM); %.17g round-trips doubles. */
static void state_json(char *buf, size_t cap, int steps_done, double best_dev, int best_step, double best_test) {
    snprintf(buf, cap, "{\"steps_done\": %d, \"best_dev\": %.17g, \"best_step\": %d, \"best_test\": %.17g}\n",
             steps_done, isfinite(best_dev) ? best_dev : -1e300, best_step, isfinite(best_test) ? best_test : -1e300);
}

static dz_status checkpoint(trainer *tr, const char *name, int steps_done, double best_dev, int best_step,
                            double best_test, dz_error *err) {
    dz_status st = dz_zo_flush(tr->e, err); /* every rank: with shared masters the flush is collective */
    if (st != DZ_OK || !tr->rank0) return st;
    st = dz_seedlog_sync(tr->log, err); /* the log must reach the checkpoint */
    if (st != DZ_OK) return st;
    char js[256];
    state_json(js, sizeof js, steps_done, best_dev, best_step, best_test);
    if (!tr->store) return dz_checkpoint_write(tr->run_dir, name, steps_done, tr->m, tr->tok, js, NULL, tr->cfg.keep_checkpoints, err);
    st = dz_store_save_resident(tr->store, tr->m, err);
    if (st == DZ_OK)
        st = dz_checkpoint_write(tr->run_dir, name, steps_done, tr->m, tr->tok, js, dz_store_path(tr->store),
                                 tr->cfg.keep_checkpoints, err);
    return st;
}

/* The selection score an evaluation row of metrics.jsonl carries (NaN if none). */
static double row_score(const trainer *tr, const dz_metrics_row *r) {
    if (!r->has_eval) return NAN;
    return tr->lm ? -r->dev_loss : r->dev_accuracy;
}

/* Resume: the best-so-far as the uninterrupted run had it at the last logged step: the
 * checkpoint's trainer_state.json (or the base model's score, before any replay), then
 * evaluations logged after the checkpoint. Steps logged without their metrics row (killed
 * while evaluating or writing best/) are dropped from the log, to be recomputed. */
static dz_status restore_best(trainer *tr, double base_dev, double base_test, dz_error *err) {
    tr->best_dev = -INFINITY, tr->best_test = NAN, tr->best_step = 0;
    dz_status st = DZ_OK;
    if (tr->ckpt_steps > 0) {
        char sp[4400], *text = NULL;
        snprintf(sp, sizeof sp, "%s/checkpoint-%d/trainer_state.json", tr->run_dir, tr->ckpt_steps);
        if ((st = dz_read_file(sp, &text, NULL, err)) != DZ_OK) return st;
        cJSON *o = cJSON_Parse(text);
        free(text);
        const cJSON *bd = cJSON_GetObjectItemCaseSensitive(o, "best_dev"), *bt = cJSON_GetObjectItemCaseSensitive(o, "best_test");
        const cJSON *bs = cJSON_GetObjectItemCaseSensitive(o, "best_step");
        if (!cJSON_IsNumber(bd) || !cJSON_IsNumber(bs)) st = dz_fail(err, DZ_ERR_FORMAT, "%s: best_dev/best_step missing", sp);
        else {
            tr->best_dev = bd->valuedouble, tr->best_step = bs->valueint;
            tr->best_test = cJSON_IsNumber(bt) ? bt->valuedouble : NAN;
        }
        cJSON_Delete(o);
    } else {
        tr->best_dev = isfinite(base_dev) ? base_dev : -INFINITY, tr->best_test = base_test;
    }
    char mp[4400];
    snprintf(mp, sizeof mp, "%s/metrics.jsonl", tr->run_dir);
    dz_metrics_row *rows = NULL;
    size_t n = 0;
    int64_t last = -1;
    if (st == DZ_OK && dz_file_exists(mp)) st = dz_metrics_read(mp, &rows, &n, err);
    for (size_t i = 0; st == DZ_OK && i < n; i++) {
        last = rows[i].step > last ? rows[i].step : last;
        const double score = row_score(tr, &rows[i]);
        if (rows[i].step + 1 > tr->ckpt_steps && score > tr->best_dev) {
            tr->best_dev = score, tr->best_step = (int)rows[i].step + 1;
            tr->best_test = tr->lm ? -rows[i].test_loss : rows[i].test_accuracy;
        }
    }
    free(rows);
    const int64_t keep = last > (int64_t)tr->ckpt_steps - 1 ? last : (int64_t)tr->ckpt_steps - 1;
    if (st == DZ_OK && (int64_t)dz_seedlog_next_step(tr->log) - 1 > keep) st = dz_seedlog_truncate_after(tr->log, keep, err);
    return st;
}

/* The node's ranks share one copy of the masters: node rank 0 copies its loaded weights
 * into node-shared memory, the others point their tensors at it. */
static dz_status share_masters(trainer *tr, dz_error *err) {
    void *arena = NULL;
    dz_status st = dz_comm_node_alloc(tr->comm, dz_model_arena_bytes(tr->m), &arena, err);
    const int leader = dz_comm_node_rank(tr->comm) == 0;
    if (st == DZ_OK && leader) st = dz_model_move_to(tr->m, arena, 1, err);
    if (st == DZ_OK) st = dz_comm_node_barrier(tr->comm, err);
    if (st == DZ_OK && !leader) st = dz_model_move_to(tr->m, arena, 0, err);
    return st;
}

/* --store disk:PATH: the masters go to a file (rebuilt from the loaded weights, so a
 * resume never trusts a store a crash may have torn); what stays in memory is decided
 * once the forward exists (dz_zo_store_residency). --store ram with several ranks on a
 * node: one copy in node-shared memory. */
static dz_status open_store(trainer *tr, dz_error *err) {
    const char *path;
    unsigned flags;
    dz_status st = dz_store_parse_spec(tr->cfg.store, &path, &flags, err);
    if (st != DZ_OK) return st;
    if (!path) return tr->node_shared ? share_masters(tr, err) : dz_model_make_owned(tr->m, err);
    if (dz_comm_size(tr->comm) > 1)
        return dz_fail(err, DZ_ERR_UNSUPPORTED, "--store %s: a disk store runs in one process; with mpirun use --store ram "
                       "(the ranks of a node share one copy of the weights)", tr->cfg.store);
    return dz_store_create_as(path, tr->m, tr->cfg.master_dtype, flags, &tr->store, err);
}

/* The tokenizer beside a model, found from its config without loading its weights. */
static dz_status base_tokenizer(const char *model, char *out, size_t cap, dz_error *err) {
    dz_config cfg;
    dz_status st = dz_config_load(model, &cfg, err);
    if (st == DZ_OK && !dz_model_find_tokenizer(model, &cfg, out, cap))
        st = dz_fail(err, DZ_ERR_NOT_FOUND, "%s: no tokenizer found beside the model; pass --tokenizer", model);
    return st;
}

/* Where the weights come from: the newest checkpoint (resume) or the base model. World
 * rank 0 decides and tells the others, so every rank loads the same state. */
static dz_status weights_path(trainer *tr, int resume, char *path, size_t cap, int *ckpt_steps, dz_error *err) {
    dz_status st = DZ_OK;
    *ckpt_steps = 0;
    snprintf(path, cap, "%s", tr->cfg.model);
    if (resume && tr->rank0) {
        st = dz_checkpoint_latest(tr->run_dir, path, cap, ckpt_steps, err);
        if (st == DZ_ERR_NOT_FOUND) {
            snprintf(path, cap, "%s", tr->cfg.model);
            *ckpt_steps = 0;
            st = DZ_OK;
        }
    }
    if (st == DZ_OK) st = dz_comm_bcast(tr->comm, ckpt_steps, sizeof *ckpt_steps, 0, err);
    if (st == DZ_OK) st = dz_comm_bcast(tr->comm, path, cap, 0, err);
    return st;
}

/* The parallel layout: this rank's forwards and examples, and how it updates masters it
 * shares with its node. */
static dz_status setup_layout(trainer *tr, dz_error *err) {
    const dz_train_config *c = &tr->cfg;
    dz_status st = dz_layout_make(dz_comm_size(tr->comm), dz_comm_rank(tr->comm), c->pertp, c->dp, &tr->lay, err);
    if (st != DZ_OK) return st;
    if (c->batch < tr->lay.d)
        return dz_fail(err, DZ_ERR_INVALID, "--batch %d is smaller than the %d data-parallel groups (--dp)", c->batch,
                       tr->lay.d);
    tr->rank0 = tr->lay.rank == 0;
    tr->node_shared = dz_comm_node_size(tr->comm) > 1;
    return DZ_OK;
}

static dz_status engine_parallel(void *ctx, double *buf, size_t n, dz_error *err) {
    return dz_comm_sum_f64(ctx, buf, n, err);
}

static dz_status engine_barrier(void *ctx, dz_error *err) { return dz_comm_node_barrier(ctx, err); }

/* A replay record as rank 0 sends it to the others. */
typedef struct replay_rec {
    uint32_t step;
    float lr, g[DZ_ZO_MAX_Q];
} replay_rec;

/* Resume: rank 0 reads the run folder (seed log, metrics, best-so-far) and sends every
 * rank the steps to replay and the state to continue from; all ranks replay them. */
static dz_status resume_state(trainer *tr, const dz_seedlog_header *h, const char *log_path, int ckpt_steps,
                              int *start_step, dz_error *err) {
    const dz_train_config *c = &tr->cfg;
    double base_dev = NAN, base_test = NAN;
    dz_status st = DZ_OK;
    if (ckpt_steps == 0) { /* the base model's scores start the best-so-far: every rank evaluates */
        st = evaluate(tr, &tr->dev, &base_dev, err);
        if (st == DZ_OK) st = evaluate(tr, &tr->testset, &base_test, err);
    }
    uint64_t count = 0;
    size_t first = 0, n = 0;
    replay_rec *recs = NULL;
    if (st == DZ_OK && tr->rank0) {
        st = dz_seedlog_open(log_path, h, c->log_sync_every, &tr->log, err);
        if (st == DZ_ERR_NOT_FOUND || (st == DZ_ERR_IO && !dz_file_exists(log_path) && ckpt_steps == 0))
            st = dz_seedlog_create(log_path, h, c->log_sync_every, &tr->log, err); /* killed before the log existed */
        tr->ckpt_steps = ckpt_steps;
        if (st == DZ_OK) st = restore_best(tr, base_dev, base_test, err);
        if (st == DZ_OK) st = dz_seedlog_replay_range(tr->log, (int64_t)ckpt_steps - 1, &first, &n, err);
        if (st == DZ_OK) *start_step = (int)dz_seedlog_next_step(tr->log);
        count = n;
    }
    tr->ckpt_steps = ckpt_steps;
    double best[3] = {tr->best_dev, tr->best_test, tr->best_step};
    if (st == DZ_OK) st = dz_comm_bcast(tr->comm, &count, sizeof count, 0, err);
    if (st == DZ_OK) st = dz_comm_bcast(tr->comm, start_step, sizeof *start_step, 0, err);
    if (st == DZ_OK) st = dz_comm_bcast(tr->comm, best, sizeof best, 0, err);
    if (st == DZ_OK && !(recs = malloc(sizeof *recs * (count ? count : 1))))
        st = dz_fail(err, DZ_ERR_NOMEM, "resume: out of memory");
    for (size_t i = 0; st == DZ_OK && tr->rank0 && i < count; i++) {
        const dz_seedlog_record r = dz_seedlog_get(tr->log, first + i);
        recs[i].step = r.step, recs[i].lr = r.lr;
        memcpy(recs[i].g, r.g, sizeof(float) * (size_t)c->q);
    }
    if (st == DZ_OK) st = dz_comm_bcast(tr->comm, recs, sizeof *recs * count, 0, err);
    tr->best_dev = best[0], tr->best_test = best[1], tr->best_step = (int)best[2];
    for (size_t i = 0; st == DZ_OK && i < count; i++)
        if (isfinite(recs[i].g[0])) /* NaN: a skipped step */
            st = dz_zo_apply(tr->e, recs[i].step, recs[i].lr, recs[i].g, err);
    free(recs);
    if (st == DZ_OK && tr->rank0)
        dz_log(DZ_LOG_INFO, "resumed %s: checkpoint after %d steps, %llu steps replayed from the seed log", tr->run_dir,
               ckpt_steps, (unsigned long long)count);
    return st;
}

static dz_status setup(trainer *tr, int resume, int *start_step, dz_error *err) {
    const dz_train_config *c = &tr->cfg;
    char path[4200];
    int ckpt_steps = 0;
    dz_status st = setup_layout(tr, err);
    if (st == DZ_OK) st = weights_path(tr, resume, path, sizeof path, &ckpt_steps, err);
    const int on_disk = c->store && strcmp(c->store, "ram") != 0;
    if (st == DZ_OK) st = on_disk ? dz_store_load_model(path, c->master_dtype, &tr->m, err)
                                  : dz_model_load(path, c->master_dtype, &tr->m, err);
    if (st == DZ_OK) st = open_store(tr, err);
    if (st != DZ_OK) return st;
    /* the tokenizer of the base model (checkpoints of llama2.c models carry tokenizer.bin) */
    char base_tok[4200];
    const char *tp = c->tokenizer;
    if (!tp && resume && ckpt_steps > 0) tp = dz_model_tokenizer_path(tr->m);
    if (!tp && (st = base_tokenizer(c->model, base_tok, sizeof base_tok, err)) != DZ_OK) return st;
    if ((st = dz_tokenizer_load(tp ? tp : base_tok, dz_model_config(tr->m)->vocab_size, &tr->tok, err)) != DZ_OK)
        return st;

    tr->lm = !strcmp(c->task, "lm");
    dz_prompt_spec_default_sst2(&tr->spec);
    if (c->template_ && (st = dz_prompt_spec_set_template(&tr->spec, c->template_, err)) != DZ_OK) return st;
    if (c->label_words && (st = dz_prompt_spec_set_labels(&tr->spec, c->label_words, err)) != DZ_OK) return st;
    if ((st = load_split(tr, err)) != DZ_OK) return st;

    const int K = tr->train.n_labels, local = (c->batch + tr->lay.d - 1) / tr->lay.d; /* the largest share */
    int max_len = tr->train.max_len;
    if (tr->dev.max_len > max_len) max_len = tr->dev.max_len;
    if (tr->testset.max_len > max_len) max_len = tr->testset.max_len;
    int max_batch = local * K > c->eval_batch ? local * K : c->eval_batch;
    const int share = !tr->lm && c->share_prompts; /* candidates continue their example's prompt */
    st = dz_forward_create_streams(tr->m, max_batch, max_len, 0, share ? 4 : 2, &tr->f, err);
    const dz_zo_params zp = {c->seed, c->eps, c->q, c->rademacher, c->wd, c->fuse};
    if (st == DZ_OK && tr->store)
        st = dz_zo_store_residency(tr->m, tr->f, tr->store, c->max_resident_mb, c->stream_globals, err);
    if (st == DZ_OK) st = dz_zo_engine_create(tr->m, tr->f, &zp, &tr->e, err);
    void *work = NULL; /* the node's one pair of working copies */
    if (st == DZ_OK && tr->node_shared)
        st = dz_comm_node_alloc(tr->comm, 2 * dz_zo_block_floats(tr->e) * sizeof(float), &work, err);
    const dz_zo_parallel par = {.signs = tr->lay.signs,
                                .shared_work = work,
                                .sum = dz_comm_size(tr->comm) > 1 ? engine_parallel : NULL,
                                .slice = dz_comm_node_rank(tr->comm),
                                .n_slices = tr->node_shared ? dz_comm_node_size(tr->comm) : 1,
                                .barrier = engine_barrier,
                                .ctx = tr->comm};
    if (st == DZ_OK) st = dz_zo_engine_set_parallel(tr->e, &par, err);
    if (st == DZ_OK && tr->store) st = dz_zo_engine_use_store(tr->e, tr->store, err);
    if (st == DZ_OK) st = dz_class_batch_init(&tr->bb, local * K, tr->train.max_len, share, err);
    const int n_eval = tr->dev.n_examples > tr->testset.n_examples ? tr->dev.n_examples : tr->testset.n_examples;
    tr->order = malloc(sizeof(int) * (size_t)tr->train.n_examples);
    tr->batch_ex = malloc(sizeof(int) * (size_t)c->batch);
    tr->batch_labels = malloc(sizeof(int) * (size_t)c->batch);
    tr->scores = malloc(sizeof(float) * (size_t)local * K);
    tr->eval_pairs = malloc(sizeof(double) * 2 * (size_t)(n_eval > 0 ? n_eval : 1));
    tr->eval_preds = malloc(sizeof(int) * (size_t)(n_eval > 0 ? n_eval : 1));
    tr->order_epoch = -1;
    if (st == DZ_OK && (!tr->order || !tr->batch_ex || !tr->batch_labels || !tr->scores || !tr->eval_pairs ||
                        !tr->eval_preds))
        st = dz_fail(err, DZ_ERR_NOMEM, "train: out of memory");
    if (st != DZ_OK) return st;

    /* the seed log: new, or the source of truth past the checkpoint */
    dz_seedlog_header h = {.run_seed = c->seed, .q = (uint32_t)c->q,
                           .dist = c->rademacher ? DZ_SEEDLOG_RADEMACHER : DZ_SEEDLOG_GAUSSIAN, .eps = c->eps,
                           .start_step = 0};
    snprintf((char *)h.fingerprint, sizeof h.fingerprint, "%s", c->model);
    snprintf(path, sizeof path, "%s/seeds.log", tr->run_dir);
    *start_step = 0;
    if (!resume && tr->rank0) st = dz_seedlog_create(path, &h, c->log_sync_every, &tr->log, err);
    if (resume) st = resume_state(tr, &h, path, ckpt_steps, start_step, err);
    snprintf(path, sizeof path, "%s/metrics.jsonl", tr->run_dir);
    if (st == DZ_OK && tr->rank0)
        st = dz_metrics_open(path, (int64_t)*start_step - 1, c->log_sync_every, &tr->metrics, err);
    return st;
}

static void teardown(trainer *tr) {
    dz_metrics_close(tr->metrics, NULL);
    dz_seedlog_close(tr->log, NULL);
    dz_zo_engine_free(tr->e);
    dz_store_close(tr->store);
    dz_forward_free(tr->f);
    dz_class_batch_free(&tr->bb);
    dz_class_set_free(&tr->train);
    dz_class_set_free(&tr->dev);
    dz_class_set_free(&tr->testset);
    dz_dataset_free(&tr->pool);
    dz_dataset_free(&tr->test);
    dz_tokenizer_free(tr->tok);
    dz_model_free(tr->m);
    free(tr->order);
    free(tr->batch_ex);
    free(tr->batch_labels);
    free(tr->scores);
    free(tr->eval_pairs);
    free(tr->eval_preds);
    dz_comm_finalize(tr->own_comm);
}

/* --verify-every: replicas are identical only because every rank applies the same
 * updates; a checksum of each node's masters, compared across nodes (and across ranks
 * that hold their own copy), catches divergence or corruption. */
static dz_status verify_replicas(trainer *tr, int done, dz_error *err) {
    const dz_train_config *c = &tr->cfg;
    dz_status st = dz_zo_flush(tr->e, err);
    if (st != DZ_OK) return st;
    const int node_rank = dz_comm_node_rank(tr->comm), node = dz_comm_node(tr->comm);
    if (c->test_corrupt_step == done && node == c->test_corrupt_node && (node_rank == 0 || !tr->node_shared) &&
        !tr->store)
        ((unsigned char *)dz_model_tensor(tr->m, 0))[0] ^= 1; /* tests: one flipped bit on one node */
    const int slices = tr->node_shared ? dz_comm_node_size(tr->comm) : 1;
    uint64_t sum = 0, lo, hi;
    st = dz_zo_checksum_slice(tr->e, tr->node_shared ? node_rank : 0, slices, &sum, err);
    if (st == DZ_OK && tr->node_shared) st = dz_comm_node_sum_u64(tr->comm, &sum, 1, err);
    if (st == DZ_OK) st = dz_comm_minmax_u64(tr->comm, sum, &lo, &hi, err);
    if (st != DZ_OK) return st;
    if (lo != hi)
        return dz_fail(err, DZ_ERR_INVALID,
                       "replica check after step %d: the weights differ between nodes (checksums %016llx to %016llx; "
                       "this node %d: %016llx): a node diverged or its memory was corrupted; --resume from the last "
                       "checkpoint", done, (unsigned long long)lo, (unsigned long long)hi, node, (unsigned long long)sum);
    if (tr->rank0) dz_log(DZ_LOG_INFO, "replica check after step %d: %d node(s) agree, checksum %016llx", done,
                          dz_comm_n_nodes(tr->comm), (unsigned long long)sum);
    return DZ_OK;
}

static dz_status run(trainer *tr, int start, int resume, dz_train_progress_cb cb, void *user, dz_train_result *res,
                     dz_error *err) {
    const dz_train_config *c = &tr->cfg;
    double best_dev = -INFINITY, best_test = NAN;
    int best_step = 0, bad = 0, steps_run = 0;
    uint64_t step_bytes = 0;
    dz_status st = DZ_OK;
    res->zero_shot_dev = res->zero_shot_test = NAN;
    if (start == 0 && !resume) {
        st = evaluate(tr, &tr->dev, &res->zero_shot_dev, err);
        if (st == DZ_OK) st = evaluate(tr, &tr->testset, &res->zero_shot_test, err);
        if (st != DZ_OK) return st;
        best_dev = isfinite(res->zero_shot_dev) ? res->zero_shot_dev : -INFINITY, best_test = res->zero_shot_test;
    } else { /* resume: as the uninterrupted run had it */
        best_dev = tr->best_dev, best_test = tr->best_test, best_step = tr->best_step;
    }
    res->steps_done = start;
    for (int step = start; step < c->steps && st == DZ_OK; step++) {
        batch_examples(tr, step);
        dz_layout_share(c->batch, tr->lay.d, tr->lay.group, &tr->lo, &tr->hi); /* this group's share */
        st = dz_class_batch_fill(&tr->bb, &tr->train, tr->batch_ex + tr->lo, tr->hi - tr->lo, err);
        if (st != DZ_OK) break;
        const dz_class_batch *bb = &tr->bb;
        const dz_zo_batch zb = {bb->tokens, bb->lengths, bb->n_seqs, bb->T, bb->rows, bb->targets, bb->n_rows, loss_cb, tr,
                                tr->hi - tr->lo, tr->lo, c->batch, bb->p_tokens, bb->p_lengths,
                                bb->tree ? bb->n_prompts : 0, bb->PT, bb->p_rows, bb->p_targets, bb->n_p_rows, bb->start,
                                bb->parent};
        const float lr = dz_lr_at(c->schedule, c->lr, c->warmup, c->steps, step);
        dz_zo_step_result r;
        const uint64_t sent = dz_comm_bytes_sent(tr->comm);
        if ((st = dz_zo_step(tr->e, (uint32_t)step, lr, &zb, &r, err)) != DZ_OK) break;
        step_bytes += dz_comm_bytes_sent(tr->comm) - sent, steps_run++;
        float g_log[DZ_ZO_MAX_Q];
        double loss = 0.0, gmean = 0.0;
        for (int j = 0; j < c->q; j++) {
            g_log[j] = r.finite ? r.g[j] : NAN; /* NaN in the log marks a skipped step */
            loss += 0.5 * (r.loss_plus[j] + r.loss_minus[j]) / c->q;
            gmean += (double)r.g[j] / c->q;
        }
        if (tr->rank0 && (st = dz_seedlog_append(tr->log, (uint32_t)step, lr, g_log, err)) != DZ_OK) break;
        if (!r.finite) {
            bad++;
            dz_log(DZ_LOG_WARN, "step %d: non-finite loss (L+ %g, L- %g): step skipped (%d in a row)", step,
                   r.loss_plus[0], r.loss_minus[0], bad);
            if (bad >= c->max_bad_steps) {
                checkpoint(tr, "checkpoint", step + 1, best_dev, best_step, best_test, NULL);
                return dz_fail(err, DZ_ERR_INVALID,
                               "training stopped: %d non-finite losses in a row (--max-bad-steps %d); lower --lr or "
                               "--eps; the run is resumable with --resume", bad, c->max_bad_steps);
            }
        } else {
            bad = 0;
        }
        dz_metrics_row row = {.step = step, .loss = loss, .g = gmean, .lr = lr, .seconds = dz_now() - tr->t0,
                              .dev_accuracy = NAN, .test_accuracy = NAN, .best_dev_accuracy = NAN, .dev_loss = NAN,
                              .test_loss = NAN};
        dz_train_progress p = {.step = step + 1, .steps = c->steps, .loss = loss, .g = gmean, .lr = lr,
                               .seconds = row.seconds, .lm = tr->lm};
        const int done = step + 1;
        if (c->eval_every > 0 && (done % c->eval_every == 0 || done == c->steps)) {
            double dev, test;
            st = evaluate(tr, &tr->dev, &dev, err);
            if (st == DZ_OK) st = evaluate(tr, &tr->testset, &test, err);
            if (st != DZ_OK) break;
            if (dev > best_dev) {
                best_dev = dev, best_test = test, best_step = done;
                st = checkpoint(tr, "best", done, best_dev, best_step, best_test, err);
            }
            row.has_eval = 1;
            if (tr->lm) {
                row.dev_loss = -dev, row.test_loss = -test;
            } else {
                row.dev_accuracy = dev, row.test_accuracy = test, row.best_dev_accuracy = best_dev;
            }
            p.has_eval = 1, p.dev_accuracy = dev, p.test_accuracy = test, p.best_dev_accuracy = best_dev;
            res->final_dev = dev, res->final_test = test;
        }
        if (st == DZ_OK && tr->rank0) st = dz_metrics_append(tr->metrics, &row, err);
        if (st == DZ_OK && c->checkpoint_every > 0 && (done % c->checkpoint_every == 0 || done == c->steps))
            st = checkpoint(tr, "checkpoint", done, best_dev, best_step, best_test, err);
        if (st == DZ_OK && c->verify_every > 0 && done % c->verify_every == 0) st = verify_replicas(tr, done, err);
        if (cb) cb(&p, user);
        res->steps_done = done;
    }
    if (st == DZ_OK) st = dz_zo_flush(tr->e, err);
    if (st == DZ_OK && start >= c->steps && tr->ckpt_steps < c->steps && c->checkpoint_every > 0)
        st = checkpoint(tr, "checkpoint", c->steps, best_dev, best_step, best_test, err); /* killed before the last one */
    if (st == DZ_OK && res->steps_done > 0 && c->eval_every <= 0) { /* no periodic evaluation: one at the end */
        st = evaluate(tr, &tr->dev, &res->final_dev, err);
        if (st == DZ_OK) st = evaluate(tr, &tr->testset, &res->final_test, err);
    }
    res->best_dev = best_dev, res->best_test = best_test, res->best_step = best_step, res->lm = tr->lm;
    res->step_bytes = steps_run ? (double)step_bytes / steps_run : 0.0;
    return st;
}

dz_status dz_train(const dz_train_config *cfg_in, int resume, dz_train_progress_cb cb, void *user,
                   dz_train_result *res, dz_error *err) {
    trainer tr;
    memset(&tr, 0, sizeof tr);
    memset(res, 0, sizeof *res);
    tr.t0 = dz_now();
    snprintf(tr.run_dir, sizeof tr.run_dir, "%s", cfg_in->out_dir);
    char *strings = NULL;
    dz_status st = DZ_OK;
    tr.comm = cfg_in->comm;
    if (!tr.comm && (st = dz_comm_init(NULL, NULL, 0, 0, &tr.own_comm, err)) != DZ_OK) return st;
    if (!tr.comm) tr.comm = tr.own_comm;
    const int rank0 = dz_comm_rank(tr.comm) == 0;
    if (resume) {
        st = dz_run_config_read(tr.run_dir, &tr.cfg, &strings, err);
        if (st == DZ_OK && cfg_in->steps > tr.cfg.steps) tr.cfg.steps = cfg_in->steps;
        tr.cfg.out_dir = cfg_in->out_dir;
        /* the layout is the command line's: a run resumes under any layout */
        tr.cfg.comm = cfg_in->comm, tr.cfg.pertp = cfg_in->pertp, tr.cfg.dp = cfg_in->dp;
        tr.cfg.verify_every = cfg_in->verify_every;
        tr.cfg.test_corrupt_step = cfg_in->test_corrupt_step, tr.cfg.test_corrupt_node = cfg_in->test_corrupt_node;
    } else if (rank0) { /* rank 0 owns the run folder */
        tr.cfg = *cfg_in;
        if (dz_mkdirs(tr.run_dir) != 0 || !dz_is_dir(tr.run_dir))
            st = dz_fail(err, DZ_ERR_IO, "%s: cannot create the run folder: %s", tr.run_dir, strerror(errno));
        char probe[4200];
        snprintf(probe, sizeof probe, "%s/seeds.log", tr.run_dir);
        if (st == DZ_OK && dz_file_exists(probe))
            st = dz_fail(err, DZ_ERR_INVALID, "%s already holds a run: use --resume, or another --out", tr.run_dir);
        if (st == DZ_OK && tr.cfg.batch < 1) st = dz_fail(err, DZ_ERR_INVALID, "--batch must be at least 1");
        if (st == DZ_OK) st = dz_run_config_write(tr.run_dir, &tr.cfg, err);
    } else {
        tr.cfg = *cfg_in;
    }
    int ok = st == DZ_OK; /* every rank stops if rank 0 could not set up the run folder */
    if (dz_comm_bcast(tr.comm, &ok, sizeof ok, 0, err) == DZ_OK && !ok && st == DZ_OK)
        st = dz_fail(err, DZ_ERR_INVALID, "%s: rank 0 could not set up the run folder (its error is above)", tr.run_dir);
    int start = 0;
    if (st == DZ_OK) st = setup(&tr, resume, &start, err);
    if (st == DZ_OK && cb) {
        dz_train_progress p = {.step = start, .steps = tr.cfg.steps, .replayed = start};
        cb(&p, user);
    }
    if (st == DZ_OK) st = run(&tr, start, resume, cb, user, res, err);
    res->seconds = dz_now() - tr.t0;
    teardown(&tr);
    free(strings);
    return st;
}

dz_status dz_export(const char *run_dir, const char *base, const char *out_dir, const char *store_spec,
                    dz_error *err) {
    dz_train_config c;
    char *strings = NULL, path[4200];
    dz_status st = dz_run_config_read(run_dir, &c, &strings, err);
    dz_model *m = NULL;
    dz_forward *f = NULL;
    dz_zo_engine *e = NULL;
    dz_seedlog *log = NULL;
    dz_store *store = NULL;
    const char *store_path = NULL;
    unsigned flags = 0;
    if (st == DZ_OK) st = dz_store_parse_spec(store_spec, &store_path, &flags, err);
    if (st == DZ_OK) st = store_path ? dz_store_load_model(base ? base : c.model, c.master_dtype, &m, err)
                                     : dz_model_load(base ? base : c.model, c.master_dtype, &m, err);
    if (st == DZ_OK && !store_path) st = dz_model_make_owned(m, err);
    if (st == DZ_OK && store_path) st = dz_store_create_as(store_path, m, c.master_dtype, flags, &store, err);
    if (st == DZ_OK) st = dz_forward_create_streams(m, 1, 2, 0, 2, &f, err);
    if (st == DZ_OK && store) st = dz_zo_store_residency(m, f, store, c.max_resident_mb, c.stream_globals, err);
    const dz_zo_params zp = {c.seed, c.eps, c.q, c.rademacher, c.wd, 1};
    if (st == DZ_OK) st = dz_zo_engine_create(m, f, &zp, &e, err);
    if (st == DZ_OK && store) st = dz_zo_engine_use_store(e, store, err);
    snprintf(path, sizeof path, "%s/seeds.log", run_dir);
    if (st == DZ_OK) st = dz_seedlog_open_read(path, NULL, &log, err);
    for (size_t i = 0; st == DZ_OK && i < dz_seedlog_count(log); i++) {
        const dz_seedlog_record r = dz_seedlog_get(log, i);
        if (isfinite(r.g[0])) st = dz_zo_apply(e, r.step, r.lr, r.g, err);
    }
    if (st == DZ_OK && !store) st = dz_model_save_hf(m, out_dir, err);
    if (st == DZ_OK && store) { /* the store holds the layers; the global block joins it, then it is copied */
        st = dz_store_save_resident(store, m, err);
        if (st == DZ_OK && dz_mkdirs(out_dir) != 0)
            st = dz_fail(err, DZ_ERR_IO, "%s: cannot create folder: %s", out_dir, strerror(errno));
        snprintf(path, sizeof path, "%s/config.json", out_dir);
        if (st == DZ_OK) st = dz_config_write_hf_json(dz_model_config(m), path, dz_model_dtype(m), err);
        snprintf(path, sizeof path, "%s/model.safetensors", out_dir);
        if (st == DZ_OK) st = dz_copy_file(dz_store_path(store), path, err);
    }
    if (st == DZ_OK) { /* the tokenizer travels with the weights */
        dz_tokenizer *tok = NULL;
        char base_tok[4200];
        const char *tp = c.tokenizer;
        if (!tp && base_tokenizer(base ? base : c.model, base_tok, sizeof base_tok, NULL) == DZ_OK) tp = base_tok;
        if (tp && dz_tokenizer_load(tp, 0, &tok, NULL) == DZ_OK) st = dz_tokenizer_save_hf(tok, out_dir, err);
        dz_tokenizer_free(tok);
    }
    dz_seedlog_close(log, NULL);
    dz_zo_engine_free(e);
    dz_store_close(store);
    dz_forward_free(f);
    dz_model_free(m);
    free(strings);
    return st;
}
