/* Causal LM scoring: mean next-token negative log-likelihood over windows. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "distzo/progress.h"
#include "distzo/task.h"

dz_status dz_lm_nll(dz_forward *f, const dz_weight_source *w, const int *tokens, int n, int seq,
                    double *nll_sum, int64_t *n_scored, float *token_logprobs, dz_error *err) {
    *nll_sum = 0.0;
    *n_scored = 0;
    if (seq < 2) return dz_fail(err, DZ_ERR_INVALID, "lm: window of %d tokens is too short", seq);
    int *rows = malloc(sizeof(int) * (size_t)seq);
    float *lp = malloc(sizeof(float) * (size_t)seq);
    if (!rows || !lp) {
        free(rows);
        free(lp);
        return dz_fail(err, DZ_ERR_NOMEM, "lm: out of memory");
    }
    dz_status st = DZ_OK;
    /* Non-overlapping windows; each window's first token is context only. */
    for (int start = 0; start + 1 < n && st == DZ_OK; start += seq - 1) {
        int len = n - start < seq ? n - start : seq;
        if (len < 2) break;
        st = dz_forward_run(f, w, tokens + start, NULL, 1, len, 0, err);
        for (int i = 0; i < len - 1; i++) rows[i] = i;
        if (st == DZ_OK) st = dz_forward_logprobs(f, w, rows, tokens + start + 1, len - 1, lp, err);
        for (int i = 0; i < len - 1 && st == DZ_OK; i++) *nll_sum -= lp[i];
        if (st == DZ_OK && token_logprobs) memcpy(token_logprobs + start, lp, sizeof(float) * (size_t)(len - 1));
        if (st == DZ_OK) *n_scored += len - 1;
        if (st == DZ_OK) dz_progress_add(len - 1); /* a long text reports as it goes, by tokens */
    }
    free(rows);
    free(lp);
    return st;
}

/* ---- causal-LM training sets ------------------------------------------------------- */

static dz_status push_seq(dz_class_set *s, int *cap, const int *tokens, int len, int scored, dz_error *err) {
    if (s->n_examples == *cap) {
        int ncap = *cap ? *cap * 2 : 64;
        dz_cand_seq *seqs = realloc(s->seqs, sizeof *seqs * (size_t)ncap);
        int *labels = realloc(s->labels, sizeof *labels * (size_t)ncap);
        if (seqs) s->seqs = seqs;
        if (labels) s->labels = labels;
        if (!seqs || !labels) return dz_fail(err, DZ_ERR_NOMEM, "lm: out of memory");
        *cap = ncap;
    }
    dz_cand_seq *q = &s->seqs[s->n_examples];
    q->tokens = malloc(sizeof(int) * (size_t)len);
    if (!q->tokens) return dz_fail(err, DZ_ERR_NOMEM, "lm: out of memory");
    memcpy(q->tokens, tokens, sizeof(int) * (size_t)len);
    q->len = len;
    q->cand_len = scored;
    s->n_seqs++;
    s->labels[s->n_examples++] = -1;
    if (len > s->max_len) s->max_len = len;
    return DZ_OK;
}

static int *encode_all(const dz_tokenizer *tok, const char *text, int *n, dz_error *err) {
    int need = dz_tokenizer_encode(tok, text, 1, NULL, 0, err);
    if (need < 0) return NULL;
    int *ids = malloc(sizeof(int) * (size_t)(need + 1));
    if (ids) *n = dz_tokenizer_encode(tok, text, 1, ids, need, err);
    return ids;
}

/* One example: windows of a long text, or a prompt/completion pair (prompt cut from the
 * left after BOS when too long). */
static dz_status lm_example(const char *path, const dz_example *ex, const dz_tokenizer *tok, int max_len,
                            dz_class_set *s, int *cap, dz_error *err) {
    int n = 0, np = 0;
    char *joined = NULL;
    if (ex->completion) {
        size_t a = strlen(ex->text), b = strlen(ex->completion);
        joined = malloc(a + b + 1);
        if (!joined) return dz_fail(err, DZ_ERR_NOMEM, "lm: out of memory");
        memcpy(joined, ex->text, a);
        memcpy(joined + a, ex->completion, b + 1);
    }
    int *ids = encode_all(tok, joined ? joined : ex->text, &n, err);
    int *pids = ex->completion ? encode_all(tok, ex->text, &np, err) : NULL;
    dz_status st = DZ_OK;
    if (!ids || (ex->completion && !pids)) st = err && err->code ? err->code : dz_fail(err, DZ_ERR_NOMEM, "lm: out of memory");
    if (st == DZ_OK && !ex->completion) {
        for (int start = 0; st == DZ_OK && start + 1 < n; start += max_len - 1) { /* windows share one token */
            const int len = n - start < max_len ? n - start : max_len;
            st = push_seq(s, cap, ids + start, len, len - 1, err);
        }
    } else if (st == DZ_OK) {
        int pre = 0;
        while (pre < np && pre < n && pids[pre] == ids[pre]) pre++;
        int scored = n - pre;
        if (scored < 1) st = dz_fail(err, DZ_ERR_INVALID, "%s:%d: the completion adds no tokens after its prompt", path, ex->line);
        if (st == DZ_OK && scored > max_len - 1) scored = max_len - 1; /* keep the completion's start */
        int len = n;
        if (st == DZ_OK && len > max_len && !s->truncated++) s->truncated_line = ex->line;
        if (st == DZ_OK && len > max_len) {
            if (pre + scored <= max_len) {
                len = pre + scored; /* only the completion's tail goes */
            } else {                /* and prompt tokens after BOS */
                const int keep_prompt = max_len - scored;
                memmove(ids + 1, ids + pre - (keep_prompt - 1), sizeof(int) * (size_t)(keep_prompt - 1 + scored));
                len = max_len;
            }
        }
        if (st == DZ_OK) st = push_seq(s, cap, ids, len, scored, err);
    }
    free(ids);
    free(pids);
    free(joined);
    return st;
}

dz_status dz_lm_set_build(const dz_dataset *ds, const dz_tokenizer *tok, int max_len, dz_class_set *out,
                          dz_error *err) {
    memset(out, 0, sizeof *out);
    out->n_labels = 1;
    if (max_len < 2) return dz_fail(err, DZ_ERR_INVALID, "lm: sequence length %d is too short", max_len);
    int cap = 0;
    for (int e = 0; e < ds->count; e++) {
        dz_status st = lm_example(ds->path ? ds->path : "dataset", &ds->items[e], tok, max_len, out, &cap, err);
        if (st != DZ_OK) {
            dz_class_set_free(out);
            return st;
        }
    }
    return DZ_OK;
}

void dz_lm_example_losses(const dz_class_batch *bb, const float *logprobs, double *out) {
    for (int i = 0; i < bb->n_seqs; i++) {
        double s = 0.0;
        for (int r = bb->seq_first_row[i]; r < bb->seq_first_row[i + 1]; r++) s -= logprobs[r];
        out[2 * i] = s, out[2 * i + 1] = bb->seq_first_row[i + 1] - bb->seq_first_row[i];
    }
}

dz_status dz_lm_evaluate(dz_forward *f, const dz_weight_source *w, const dz_class_set *set, int batch, double *ex,
                         double *nll, dz_error *err) {
    dz_class_batch bb;
    *nll = NAN;
    dz_status st = dz_class_batch_init(&bb, batch, set->max_len, 0, err);
    float *lp = st == DZ_OK ? malloc(sizeof(float) * (size_t)batch * set->max_len) : NULL;
    int *ids = st == DZ_OK ? malloc(sizeof(int) * (size_t)batch) : NULL;
    if (st == DZ_OK && (!lp || !ids)) st = dz_fail(err, DZ_ERR_NOMEM, "lm: out of memory");
    double sum = 0.0, count = 0.0, *pairs = ex ? ex : malloc(sizeof(double) * 2 * (size_t)batch);
    if (st == DZ_OK && !pairs) st = dz_fail(err, DZ_ERR_NOMEM, "lm: out of memory");
    for (int e = 0; st == DZ_OK && e < set->n_examples; e += batch) {
        const int n = set->n_examples - e < batch ? set->n_examples - e : batch;
        for (int i = 0; i < n; i++) ids[i] = e + i;
        st = dz_class_batch_fill(&bb, set, ids, n, err);
        if (st == DZ_OK) st = dz_forward_run(f, w, bb.tokens, bb.lengths, bb.n_seqs, bb.T, 0, err);
        if (st == DZ_OK) st = dz_forward_logprobs(f, w, bb.rows, bb.targets, bb.n_rows, lp, err);
        double *out = ex ? ex + 2 * (size_t)e : pairs;
        if (st == DZ_OK) dz_lm_example_losses(&bb, lp, out);
        for (int i = 0; st == DZ_OK && i < n; i++) sum += out[2 * i], count += out[2 * i + 1];
        dz_progress_add(n);
    }
    if (!ex) free(pairs);
    if (st == DZ_OK && count > 0) *nll = sum / count;
    dz_class_batch_free(&bb);
    free(lp);
    free(ids);
    return st;
}
