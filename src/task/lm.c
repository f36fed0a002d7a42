/* Causal LM scoring: mean next-token negative log-likelihood over windows. */
#include <stdlib.h>

#include "distzo/task.h"

dz_status dz_lm_nll(dz_forward *f, const dz_weight_source *w, const int *tokens, int n, int seq,
                    double *nll_sum, int64_t *n_scored, dz_error *err) {
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
        if (st == DZ_OK) *n_scored += len - 1;
    }
    free(rows);
    free(lp);
    return st;
}
