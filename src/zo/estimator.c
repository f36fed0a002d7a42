/* The SPSA estimator (MeZO): for each of q samples, both perturbed forwards (+eps z and
 * -eps z) block by block through the pipeline, a (loss, weight) pair per example and
 * sign; the pairs are summed over ranks, combined in example order, and
 * g_j = (L+ - L-) / (2 eps) becomes the pending update. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "distzo/util.h"
#include "model/forward_pair.h"
#include "zo/internal.h"

/* Adds the seconds since *t0 to *acc and restarts the clock. */
static void lap(double *acc, double *t0) {
    const double t = dz_now();
    *acc += t - *t0;
    *t0 = t;
}

/* Layer l's tensors for both signs: the pipeline's working copies, and under an adapter
 * the base's tensors (one fetch for both signs) beside the adapter's copies. */
static dz_status layer_tensors(dz_zo_engine *e, int l, const float *w[2][DZ_L_COUNT], dz_error *err) {
    dz_status st = dz_pipeline_layer(e->pipe, l, w, err);
    if (st != DZ_OK || !e->adapter) return st;
    const float *base[DZ_L_COUNT];
    if ((st = dz_forward_layer_weights(e->f, &e->base, 0, l, base, err)) != DZ_OK) return st;
    for (int k = 0; k < 2; k++)
        for (int r = 0; r < DZ_L_LORA_FIRST; r++) w[k][r] = base[r];
    return DZ_OK;
}

/* Both signs' forwards through each layer in lockstep (forward_pair.h): when switched on,
 * both signs run, each has one stream (no prompt tree with continuations), and the
 * pipeline and the forward can do it exactly. */
static int use_pair(const dz_zo_engine *e, int n_signs, int two_streams_a_sign) {
    return e->pair_gemm && n_signs == 2 && !two_streams_a_sign && !e->adapter && dz_pipeline_pair_exact(e->pipe) &&
           dz_forward_pair_supported(e->f);
}

dz_status dz_zo_pair_gemm_setting(int *on, dz_error *err) {
    const char *v = getenv("DISTZO_PAIR_GEMM");
    *on = DZ_ZO_PAIR_GEMM_DEFAULT;
    if (!v || !*v) return DZ_OK;
    if (strcmp(v, "0") && strcmp(v, "1"))
        return dz_fail(err, DZ_ERR_INVALID, "DISTZO_PAIR_GEMM=%.32s: expected 0 or 1", v);
    *on = v[0] == '1';
    return DZ_OK;
}

/* One sample: both perturbed forwards block by block, then the per-example losses of each
 * sign this rank computes (into out[sign][example0 ...]). Streams: with a tree batch 0/1
 * are the prompts (+/-) and 2/3 the continuations; the weight source perturbs by the
 * stream's parity. */
static dz_status dual_forward(dz_zo_engine *e, uint32_t draw, int mask, const dz_zo_batch *b, double *out[2],
                              dz_zo_step_time *tm, dz_error *err) {
    const dz_config *c = dz_model_config(e->m);
    const dz_weight_source src = dz_zo_step_source(e);
    const int tree = b->n_prompts > 0, cs = tree ? 2 : 0; /* continuation streams cs (+), cs+1 (-) */
    const int conts = !tree || b->T > 0; /* a tree batch of one-token candidates has no continuation rows */
    if (tree && dz_forward_n_streams(e->f) < 4)
        return dz_fail(err, DZ_ERR_INVALID, "zo: a tree batch needs a forward with 4 streams");
    int signs[2], n_signs = 0;
    for (int k = 0; k < 2; k++)
        if (mask & (1 << k)) signs[n_signs++] = k;
    double t0 = dz_now();
    dz_status st = dz_pipeline_begin(e->pipe, draw, err);
    for (int i = 0; st == DZ_OK && i < n_signs; i++) {
        const int k = signs[i];
        if (tree) st = dz_forward_embed_tree(e->f, k, &src, b->p_tokens, b->p_lengths, b->n_prompts, b->PT, NULL, -1,
                                             NULL, err);
        if (st == DZ_OK && conts)
            st = dz_forward_embed_tree(e->f, cs + k, &src, b->tokens, b->lengths, b->B, b->T, b->start,
                                       tree ? k : -1, tree ? b->parent : NULL, err);
    }
    if (st != DZ_OK) return st;
    lap(&tm->begin, &t0);
    const int pair = use_pair(e, n_signs, tree && conts);
    if (pair && (st = dz_forward_pair_reserve(e->f, err)) != DZ_OK) return st;
    for (int l = 0; l < c->n_layers; l++) {
        const float *w[2][DZ_L_COUNT];
        if (pair) {
            if ((st = dz_pipeline_layer_pair(e->pipe, l, w, &e->mats, err)) != DZ_OK) return st;
            lap(&tm->pass, &t0);
            const int s[2] = {tree ? 0 : cs, tree ? 1 : cs + 1}; /* the one stream of each sign */
            dz_forward_layer_pair(e->f, s, l, w, &e->mats);
            lap(&tm->layers, &t0);
            continue;
        }
        if ((st = layer_tensors(e, l, w, err)) != DZ_OK) return st;
        lap(&tm->pass, &t0);
        for (int i = 0; i < n_signs; i++) {
            const int k = signs[i];
            if (tree) dz_forward_layer(e->f, k, l, w[k]); /* a prompt before its continuations */
            if (conts) dz_forward_layer(e->f, cs + k, l, w[k]);
        }
        lap(&tm->layers, &t0);
    }
    if ((st = dz_pipeline_end_layers(e->pipe, err)) != DZ_OK) return st;
    lap(&tm->pass, &t0); /* a store's last write-back */
    /* one pass over the head for all streams, each sign's together: the perturbed source
     * makes a chunk's +eps and -eps rows once for the prompts' and the continuations' rows */
    dz_head_rows sets[4];
    int n_sets = 0;
    for (int i = 0; i < n_signs; i++) {
        const int k = signs[i];
        if (tree)
            sets[n_sets++] = (dz_head_rows){.stream = k, .rows = b->p_rows, .targets = b->p_targets,
                                            .nrows = b->n_p_rows, .logprobs = e->plp[k]};
        if (conts)
            sets[n_sets++] = (dz_head_rows){.stream = cs + k, .rows = b->rows, .targets = b->targets,
                                            .nrows = b->n_rows, .logprobs = e->lp[k]};
    }
    st = dz_forward_logprobs_sets(e->f, &src, n_sets, sets, err);
    if (st == DZ_OK) st = dz_pipeline_rows_status(e->pipe, err);
    if (st != DZ_OK) return st;
    lap(&tm->head, &t0);
    for (int i = 0; i < n_signs; i++) {
        const int k = signs[i];
        b->loss(e->lp[k], tree ? e->plp[k] : NULL, b->user, out[k] + 2 * (size_t)b->example0);
    }
    return DZ_OK;
}

/* Greedy decoding under each perturbation: pass after pass, both signs' sequences (each
 * grown by its own greedy tokens) run through the block pipeline at the same draw, the
 * last live row of each gives its logits to d->next; then d->loss gives the pairs. Each
 * pass recomputes the whole sequences (the streams keep no KV cache). */
static dz_status decode_forward(dz_zo_engine *e, uint32_t draw, int mask, const dz_zo_decode *d, double *out[2],
                                dz_zo_step_time *tm, dz_error *err) {
    const dz_config *c = dz_model_config(e->m);
    const dz_weight_source src = dz_zo_step_source(e);
    int signs[2], n_signs = 0;
    for (int k = 0; k < 2; k++)
        if (mask & (1 << k)) signs[n_signs++] = k;
    dz_status st = DZ_OK;
    for (int i = 0; i < n_signs; i++) d->reset(d->user, signs[i]);
    for (int pass = 0; pass < d->max_passes && st == DZ_OK; pass++) {
        int live[2] = {0, 0}, T[2] = {0, 0};
        for (int i = 0; i < n_signs; i++) { /* each sign's live sequences, packed [n, T] */
            const int k = signs[i];
            for (int b = 0; b < d->B; b++) {
                if (d->done[k][b]) continue;
                T[k] = d->lengths[k][b] > T[k] ? d->lengths[k][b] : T[k];
                e->dec_rows[k][live[k]++] = b;
            }
            for (int j = 0; j < live[k]; j++) {
                const int b = e->dec_rows[k][j];
                for (int t = 0; t < T[k]; t++)
                    e->dec_tokens[k][j * T[k] + t] = d->tokens[k][(size_t)b * d->T + (t < d->lengths[k][b] ? t : 0)];
                e->dec_len[k][j] = d->lengths[k][b];
            }
        }
        if (live[0] + live[1] == 0) break;
        double t0 = dz_now();
        st = dz_pipeline_begin(e->pipe, draw, err);
        for (int i = 0; st == DZ_OK && i < n_signs; i++)
            if (live[signs[i]])
                st = dz_forward_embed(e->f, signs[i], &src, e->dec_tokens[signs[i]], e->dec_len[signs[i]], live[signs[i]],
                                      T[signs[i]], 0, err);
        lap(&tm->begin, &t0);
        for (int l = 0; st == DZ_OK && l < c->n_layers; l++) {
            const float *w[2][DZ_L_COUNT];
            if ((st = layer_tensors(e, l, w, err)) != DZ_OK) break;
            lap(&tm->pass, &t0);
            for (int i = 0; i < n_signs; i++)
                if (live[signs[i]]) dz_forward_layer(e->f, signs[i], l, w[signs[i]]);
            lap(&tm->layers, &t0);
        }
        if (st == DZ_OK) st = dz_pipeline_end_layers(e->pipe, err);
        lap(&tm->pass, &t0);
        for (int i = 0; st == DZ_OK && i < n_signs; i++) {
            const int k = signs[i];
            if (!live[k]) continue;
            int rows[DZ_ZO_MAX_DECODE];
            for (int j = 0; j < live[k]; j++) rows[j] = j * T[k] + e->dec_len[k][j] - 1;
            st = dz_forward_logits_stream(e->f, &src, k, rows, live[k], d->logits, err);
            if (st == DZ_OK) st = dz_pipeline_rows_status(e->pipe, err);
            for (int j = 0; st == DZ_OK && j < live[k]; j++)
                d->next(d->user, k, e->dec_rows[k][j], d->logits + (size_t)j * c->vocab_size);
        }
        lap(&tm->head, &t0);
    }
    for (int i = 0; st == DZ_OK && i < n_signs; i++) d->loss(d->user, signs[i], out[signs[i]] + 2 * (size_t)d->example0);
    return st;
}

dz_status dz_zo_run_sample(dz_zo_engine *e, uint32_t draw, int mask, const dz_zo_sample_batch *sb, double *out[2],
                           dz_zo_step_time *tm, dz_error *err) {
    return sb->b ? dual_forward(e, draw, mask, sb->b, out, tm, err) : decode_forward(e, draw, mask, sb->d, out, tm, err);
}

dz_status dz_zo_loss_slots(dz_zo_engine *e, int n_slots, const dz_zo_sample_batch *b, size_t *per_slot,
                           dz_error *err) {
    /* the batch's shape in the global batch, zeros meaning one example, the whole batch */
    const int n_local = b->n_examples > 0 ? b->n_examples : 1, n_global = b->n_global > 0 ? b->n_global : n_local;
    if (b->example0 < 0 || b->example0 + n_local > n_global)
        return dz_fail(err, DZ_ERR_INVALID, "zo: batch examples [%d, %d) outside the global batch of %d", b->example0,
                       b->example0 + n_local, n_global);
    *per_slot = 2 * (size_t)n_global;
    const size_t need = (size_t)n_slots * *per_slot; /* (loss, weight) pairs */
    if (need > e->ex_cap) { /* grows once, at the first step of a larger batch */
        double *p = realloc(e->ex_loss, need * sizeof *p);
        if (!p) return dz_fail(err, DZ_ERR_NOMEM, "zo: out of memory");
        e->ex_loss = p, e->ex_cap = need;
    }
    memset(e->ex_loss, 0, need * sizeof *e->ex_loss);
    return DZ_OK;
}

double dz_zo_slot_loss(const double *x, int n_global) {
    double loss = 0.0, weight = 0.0;
    for (int i = 0; i < n_global; i++) loss += x[2 * i], weight += x[2 * i + 1];
    return loss / weight;
}

/* The losses and g of n samples, draws draw0 .. draw0 + n - 1, into out (no update). */
static dz_status estimate(dz_zo_engine *e, int n, uint32_t draw0, const dz_zo_sample_batch *b,
                          dz_zo_step_result *out, dz_error *err) {
    memset(out, 0, sizeof *out);
    out->finite = 1;
    size_t per_sign;
    dz_status st = dz_zo_loss_slots(e, 2 * n, b, &per_sign, err);
    if (st != DZ_OK) return st;
    const int n_global = (int)(per_sign / 2);
    for (int j = 0; j < n; j++) {
        const uint32_t draw = draw0 + (uint32_t)j;
        double *sample[2] = {e->ex_loss + (size_t)(2 * j) * per_sign, e->ex_loss + (size_t)(2 * j + 1) * per_sign};
        if ((st = dz_zo_run_sample(e, draw, e->par.signs, b, sample, &out->time, err)) != DZ_OK) return st;
    }
    if (e->par.sum) { /* every rank holds only its examples and signs; the others are zeros */
        st = e->par.sum(e->par.ctx, e->ex_loss, (size_t)(2 * n) * per_sign, err);
        if (st != DZ_OK) return st;
    }
    for (int j = 0; j < n; j++) {
        out->loss_plus[j] = dz_zo_slot_loss(e->ex_loss + (size_t)(2 * j) * per_sign, n_global);
        out->loss_minus[j] = dz_zo_slot_loss(e->ex_loss + (size_t)(2 * j + 1) * per_sign, n_global);
        out->g[j] = (float)((out->loss_plus[j] - out->loss_minus[j]) / (2.0 * (double)e->p.eps));
        if (!isfinite(out->loss_plus[j]) || !isfinite(out->loss_minus[j]) || !isfinite(out->g[j])) out->finite = 0;
    }
    return DZ_OK;
}

static dz_zo_sample_batch of_batch(const dz_zo_batch *b) {
    return (dz_zo_sample_batch){.b = b, .n_examples = b->n_examples, .example0 = b->example0, .n_global = b->n_global};
}

dz_status dz_zo_estimate(dz_zo_engine *e, uint32_t draw, const dz_zo_batch *b, dz_zo_step_result *out,
                         dz_error *err) {
    const dz_zo_sample_batch sb = of_batch(b);
    return estimate(e, 1, draw, &sb, out, err);
}

static dz_status step_with(dz_zo_engine *e, uint32_t step, float lr, const dz_zo_sample_batch *sb,
                           dz_zo_step_result *out, dz_error *err) {
    dz_status st = e->p.estimator == DZ_ZO_FZOO    ? dz_zo_fzoo_estimate(e, step, sb, out, err)
                   : e->p.estimator == DZ_ZO_HIZOO ? dz_zo_hizoo_estimate(e, step, sb, out, err)
                                                   : estimate(e, e->p.q, step * (uint32_t)e->p.q, sb, out, err);
    if (st != DZ_OK || !out->finite) return st;
    st = dz_zo_set_update(e, step, lr, out->g, err);
    if (st == DZ_OK && !e->p.fuse) st = dz_pipeline_apply_pending(e->pipe, err); /* resident: no download */
    return st;
}

dz_status dz_zo_step(dz_zo_engine *e, uint32_t step, float lr, const dz_zo_batch *b, dz_zo_step_result *out,
                     dz_error *err) {
    const dz_zo_sample_batch sb = of_batch(b);
    return step_with(e, step, lr, &sb, out, err);
}

dz_status dz_zo_step_decode(dz_zo_engine *e, uint32_t step, float lr, const dz_zo_decode *d, dz_zo_step_result *out,
                            dz_error *err) {
    if (d->B < 1 || d->B > DZ_ZO_MAX_DECODE || d->T > dz_forward_max_seq(e->f) || d->B > dz_forward_max_batch(e->f))
        return dz_fail(err, DZ_ERR_INVALID, "zo: a decoding batch of %d x %d does not fit the forward (%d x %d, at most "
                       "%d sequences)", d->B, d->T, dz_forward_max_batch(e->f), dz_forward_max_seq(e->f),
                       DZ_ZO_MAX_DECODE);
    const size_t need = (size_t)d->B * d->T;
    if (need > e->dec_cap) { /* grows once, at the first step */
        for (int k = 0; k < 2; k++) {
            int *t = realloc(e->dec_tokens[k], need * sizeof *t);
            if (!t) return dz_fail(err, DZ_ERR_NOMEM, "zo: out of memory");
            e->dec_tokens[k] = t;
        }
        e->dec_cap = need;
    }
    const dz_zo_sample_batch sb = {.d = d, .n_examples = d->n_examples, .example0 = d->example0, .n_global = d->n_global};
    return step_with(e, step, lr, &sb, out, err);
}
