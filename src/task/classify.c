/* MeZO-style prompt classification: one sequence per (example, candidate); the score
 * of a candidate is the mean log-prob of its tokens given everything before them. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "distzo/task.h"

enum { PROMPT_CAP = 16384 };

static int common_prefix(const int *a, int na, const int *b, int nb) {
    int i = 0;
    while (i < na && i < nb && a[i] == b[i]) i++;
    return i;
}

/* Encodes text into a freshly allocated array; *n = its length. */
static dz_status encode_alloc(const dz_tokenizer *tok, const char *text, int **ids, int *n, dz_error *err) {
    int need = dz_tokenizer_encode(tok, text, 1, NULL, 0, err);
    if (need < 0) return err ? err->code : DZ_ERR_FORMAT;
    *ids = malloc(sizeof(int) * (size_t)(need > 0 ? need : 1));
    if (!*ids) return dz_fail(err, DZ_ERR_NOMEM, "out of memory tokenizing");
    *n = dz_tokenizer_encode(tok, text, 1, *ids, need, err);
    return *n < 0 ? (err ? err->code : DZ_ERR_FORMAT) : DZ_OK;
}

/* Drops context tokens after the first so the sequence fits max_len. */
static int truncate_left(dz_cand_seq *s, int max_len) {
    if (s->len <= max_len) return 0;
    int drop = s->len - max_len;
    memmove(s->tokens + 1, s->tokens + 1 + drop, sizeof(int) * (size_t)(s->len - 1 - drop));
    s->len = max_len;
    return 1;
}

static dz_status build_example(const dz_example *ex, const dz_prompt_spec *spec, const dz_tokenizer *tok,
                               int max_len, dz_cand_seq *seqs, int *truncated, dz_error *err) {
    char prompt[PROMPT_CAP], full[PROMPT_CAP + 64];
    if (dz_prompt_render(spec, ex->text, prompt, sizeof prompt) < 0)
        return dz_fail(err, DZ_ERR_INVALID, "example text of %zu bytes is too long for a prompt", strlen(ex->text));
    int *ctx = NULL, nctx = 0;
    dz_status st = encode_alloc(tok, prompt, &ctx, &nctx, err);
    for (int k = 0; k < spec->n_labels && st == DZ_OK; k++) {
        snprintf(full, sizeof full, "%s%s", prompt, spec->label_words[k]);
        dz_cand_seq *s = &seqs[k];
        st = encode_alloc(tok, full, &s->tokens, &s->len, err);
        if (st != DZ_OK) break;
        int pre = common_prefix(ctx, nctx, s->tokens, s->len);
        if (pre == s->len || pre < 1) {
            st = dz_fail(err, DZ_ERR_INVALID, "label word '%s' adds no tokens after the prompt", spec->label_words[k]);
            break;
        }
        s->cand_len = s->len - pre;
        if (s->cand_len + 1 > max_len) {
            st = dz_fail(err, DZ_ERR_INVALID, "label word '%s' is longer than the sequence limit %d",
                         spec->label_words[k], max_len);
            break;
        }
        *truncated += truncate_left(s, max_len);
    }
    free(ctx);
    return st;
}

dz_status dz_class_set_build(const dz_dataset *ds, const dz_prompt_spec *spec, const dz_tokenizer *tok,
                             int max_len, dz_class_set *out, dz_error *err) {
    memset(out, 0, sizeof *out);
    out->n_examples = ds->count;
    out->n_labels = spec->n_labels;
    out->seqs = calloc((size_t)ds->count * spec->n_labels, sizeof *out->seqs);
    out->labels = calloc((size_t)ds->count, sizeof *out->labels);
    if (!out->seqs || !out->labels) {
        dz_class_set_free(out);
        return dz_fail(err, DZ_ERR_NOMEM, "out of memory building %d prompts", ds->count);
    }
    for (int e = 0; e < ds->count; e++) {
        dz_cand_seq *seqs = &out->seqs[(size_t)e * spec->n_labels];
        dz_status st = build_example(&ds->items[e], spec, tok, max_len, seqs, &out->truncated, err);
        if (st == DZ_OK && (ds->items[e].label < -1 || ds->items[e].label >= spec->n_labels))
            st = dz_fail(err, DZ_ERR_INVALID, "%s: example %d has label %d but only %d label words are given",
                         ds->path ? ds->path : "dataset", e + 1, ds->items[e].label, spec->n_labels);
        if (st != DZ_OK) {
            dz_class_set_free(out);
            return st;
        }
        out->labels[e] = ds->items[e].label;
        for (int k = 0; k < spec->n_labels; k++)
            if (seqs[k].len > out->max_len) out->max_len = seqs[k].len;
    }
    return DZ_OK;
}

void dz_class_set_free(dz_class_set *cs) {
    if (cs->seqs)
        for (int i = 0; i < cs->n_examples * cs->n_labels; i++) free(cs->seqs[i].tokens);
    free(cs->seqs);
    free(cs->labels);
    memset(cs, 0, sizeof *cs);
}

dz_status dz_class_batch_init(dz_class_batch *bb, int max_seqs, int max_len, dz_error *err) {
    memset(bb, 0, sizeof *bb);
    const size_t cap = (size_t)max_seqs * max_len;
    bb->max_seqs = max_seqs;
    bb->max_len = max_len;
    bb->tokens = malloc(sizeof(int) * cap);
    bb->lengths = malloc(sizeof(int) * (size_t)max_seqs);
    bb->rows = malloc(sizeof(int) * cap);
    bb->targets = malloc(sizeof(int) * cap);
    bb->seq_first_row = malloc(sizeof(int) * (size_t)(max_seqs + 1));
    if (bb->tokens && bb->lengths && bb->rows && bb->targets && bb->seq_first_row) return DZ_OK;
    dz_class_batch_free(bb);
    return dz_fail(err, DZ_ERR_NOMEM, "out of memory for a batch of %d x %d", max_seqs, max_len);
}

void dz_class_batch_free(dz_class_batch *bb) {
    free(bb->tokens);
    free(bb->lengths);
    free(bb->rows);
    free(bb->targets);
    free(bb->seq_first_row);
    memset(bb, 0, sizeof *bb);
}

dz_status dz_class_batch_fill(dz_class_batch *bb, const dz_class_set *cs, const int *examples, int n, dz_error *err) {
    const int K = cs->n_labels;
    if (n * K > bb->max_seqs)
        return dz_fail(err, DZ_ERR_INVALID, "batch of %d examples x %d candidates exceeds %d sequences", n, K,
                       bb->max_seqs);
    int T = 0;
    for (int e = 0; e < n; e++)
        for (int k = 0; k < K; k++) {
            const int len = cs->seqs[(size_t)examples[e] * K + k].len;
            T = len > T ? len : T;
        }
    bb->n_seqs = n * K;
    bb->T = T;
    bb->n_rows = 0;
    for (int i = 0; i < bb->n_seqs; i++) {
        const dz_cand_seq *s = &cs->seqs[(size_t)examples[i / K] * K + i % K];
        for (int t = 0; t < T; t++) bb->tokens[i * T + t] = t < s->len ? s->tokens[t] : s->tokens[s->len - 1];
        bb->lengths[i] = s->len;
        bb->seq_first_row[i] = bb->n_rows;
        for (int t = s->len - s->cand_len; t < s->len; t++) {
            bb->rows[bb->n_rows] = i * T + t - 1; /* the position that predicts token t */
            bb->targets[bb->n_rows++] = s->tokens[t];
        }
    }
    bb->seq_first_row[bb->n_seqs] = bb->n_rows;
    return DZ_OK;
}

void dz_class_batch_scores(const dz_class_batch *bb, const float *logprobs, float *scores) {
    for (int i = 0; i < bb->n_seqs; i++) {
        double sum = 0.0;
        for (int r = bb->seq_first_row[i]; r < bb->seq_first_row[i + 1]; r++) sum += logprobs[r];
        scores[i] = (float)(sum / (bb->seq_first_row[i + 1] - bb->seq_first_row[i]));
    }
}

double dz_class_loss(const float *scores, const int *labels, int n, int K) {
    double total = 0.0;
    for (int e = 0; e < n; e++) { /* cross-entropy over the candidates, examples summed in order */
        const float *s = scores + (size_t)e * K;
        double mx = s[0], z = 0.0;
        for (int k = 1; k < K; k++) mx = s[k] > mx ? s[k] : mx;
        for (int k = 0; k < K; k++) z += exp(s[k] - mx);
        total += mx + log(z) - s[labels[e]];
    }
    return total / n;
}

dz_status dz_class_evaluate(dz_forward *f, const dz_weight_source *w, const dz_class_set *cs, int batch,
                            int *preds, float *scores, double *accuracy, dz_error *err) {
    const int total = cs->n_examples * cs->n_labels;
    /* Whole examples per batch so a batch never splits a candidate group. */
    int per = batch / cs->n_labels;
    if (per < 1) per = 1;
    dz_class_batch bb;
    dz_status st = dz_class_batch_init(&bb, per * cs->n_labels, cs->max_len, err);
    if (st != DZ_OK) return st;
    float *all = scores ? scores : malloc(sizeof(float) * (size_t)(total > 0 ? total : 1));
    float *lp = malloc(sizeof(float) * (size_t)per * cs->n_labels * cs->max_len);
    int *ids = malloc(sizeof(int) * (size_t)per);
    if (!all || !lp || !ids) st = dz_fail(err, DZ_ERR_NOMEM, "out of memory");
    for (int e = 0; e < cs->n_examples && st == DZ_OK; e += per) {
        const int ne = cs->n_examples - e < per ? cs->n_examples - e : per;
        for (int i = 0; i < ne; i++) ids[i] = e + i;
        st = dz_class_batch_fill(&bb, cs, ids, ne, err);
        if (st == DZ_OK) st = dz_forward_run(f, w, bb.tokens, bb.lengths, bb.n_seqs, bb.T, 0, err);
        if (st == DZ_OK) st = dz_forward_logprobs(f, w, bb.rows, bb.targets, bb.n_rows, lp, err);
        if (st == DZ_OK) dz_class_batch_scores(&bb, lp, all + (size_t)e * cs->n_labels);
    }
    dz_class_batch_free(&bb);
    free(lp);
    free(ids);
    int correct = 0, labelled = 0;
    for (int e = 0; e < cs->n_examples && st == DZ_OK; e++) {
        const float *s = all + (size_t)e * cs->n_labels;
        int best = 0;
        for (int k = 1; k < cs->n_labels; k++)
            if (s[k] > s[best]) best = k;
        if (preds) preds[e] = best;
        if (cs->labels[e] >= 0) {
            labelled++;
            correct += best == cs->labels[e];
        }
    }
    if (accuracy) *accuracy = labelled ? (double)correct / labelled : 0.0;
    if (!scores) free(all);
    return st;
}
