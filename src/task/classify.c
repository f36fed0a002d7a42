/* MeZO-style prompt classification: one sequence per (example, candidate); the score
 * of a candidate is the mean log-prob of its tokens given everything before them. */
#include <math.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "distzo/log.h"
#include "distzo/progress.h"
#include "distzo/task.h"

enum { PROMPT_CAP = 16384 };

static int common_prefix(const int *a, int na, const int *b, int nb) {
    int i = 0;
    while (i < na && i < nb && a[i] == b[i]) i++;
    return i;
}

/* Encodes text into a freshly allocated array; *n = its length. flags: DZ_ENCODE_*. */
static dz_status encode_alloc(const dz_tokenizer *tok, const char *text, unsigned flags, int **ids, int *n,
                              dz_error *err) {
    int need = dz_tokenizer_encode_flags(tok, text, flags, NULL, 0, err);
    if (need < 0) return err ? err->code : DZ_ERR_FORMAT;
    *ids = malloc(sizeof(int) * (size_t)(need > 0 ? need : 1));
    if (!*ids) return dz_fail(err, DZ_ERR_NOMEM, "out of memory tokenizing");
    *n = dz_tokenizer_encode_flags(tok, text, flags, *ids, need, err);
    return *n < 0 ? (err ? err->code : DZ_ERR_FORMAT) : DZ_OK;
}

int dz_prompt_spec_text_special(const dz_prompt_spec *spec, const dz_tokenizer *tok, char *name, int cap) {
    if (cap > 0) name[0] = '\0';
    if (spec->special_tokens) return 0;
    int as_text[512], as_ids[512]; /* a template fits template_'s 512 bytes: at most that many ids */
    const int nt = dz_tokenizer_encode_flags(tok, spec->template_, 0, as_text, 512, NULL);
    const int ns = dz_tokenizer_encode_flags(tok, spec->template_, DZ_ENCODE_SPECIAL, as_ids, 512, NULL);
    if (nt < 0 || ns < 0 || nt > 512 || ns > 512) return 0;
    int i = 0;
    while (i < nt && i < ns && as_text[i] == as_ids[i]) i++;
    if (i == nt && i == ns) return 0;
    if (i < ns && cap > 0) dz_tokenizer_decode(tok, -1, as_ids[i], name, cap);
    return 1;
}

void dz_prompt_spec_warn_text_special(const dz_prompt_spec *spec, const dz_tokenizer *tok) {
    char name[64];
    if (dz_prompt_spec_text_special(spec, tok, name, sizeof name))
        dz_log(DZ_LOG_WARN, "--template writes %s, a special token of the tokenizer, as plain text: its characters are "
               "encoded, not the token; --special-tokens reads it as the token, as Hugging Face's tokenizer does", name);
}

/* Drops context tokens after the first so the sequence fits max_len. */
static int truncate_left(dz_cand_seq *s, int max_len) {
    if (s->len <= max_len) return 0;
    int drop = s->len - max_len;
    memmove(s->tokens + 1, s->tokens + 1 + drop, sizeof(int) * (size_t)(s->len - 1 - drop));
    s->len = max_len;
    return 1;
}

/* The candidate texts of an example: its own, or the spec's label words. */
static int n_cands_of(const dz_example *ex, const dz_prompt_spec *spec) {
    return ex->cands ? ex->n_cands : spec->n_labels;
}
static const char *cand_text(const dz_example *ex, const dz_prompt_spec *spec, int k) {
    return ex->cands ? ex->cands[k] : spec->label_words[k];
}

static dz_status build_example(const dz_dataset *ds, const dz_example *ex, const dz_prompt_spec *spec,
                               const dz_tokenizer *tok, int max_len, dz_cand_seq *seqs, dz_class_set *out,
                               dz_error *err) {
    const char *path = ds->path ? ds->path : "dataset";
    char *prompt = malloc(PROMPT_CAP), *full = NULL;
    if (!prompt) return dz_fail(err, DZ_ERR_NOMEM, "out of memory building a prompt");
    if (dz_prompt_render(spec, ex->text, prompt, PROMPT_CAP) < 0) {
        free(prompt);
        return dz_fail(err, DZ_ERR_INVALID, "%s:%d: text of %zu bytes is too long for a prompt (at most %d)", path,
                       ex->line, strlen(ex->text), PROMPT_CAP);
    }
    int *ctx = NULL, nctx = 0;
    const unsigned flags = DZ_ENCODE_BOS | (spec->special_tokens ? DZ_ENCODE_SPECIAL : 0);
    dz_status st = encode_alloc(tok, prompt, flags, &ctx, &nctx, err);
    const size_t plen = strlen(prompt);
    for (int k = 0; k < n_cands_of(ex, spec) && st == DZ_OK; k++) {
        const char *word = cand_text(ex, spec, k);
        char *grown = realloc(full, plen + strlen(word) + 1);
        if (!grown) {
            st = dz_fail(err, DZ_ERR_NOMEM, "out of memory building a prompt");
            break;
        }
        full = grown;
        memcpy(full, prompt, plen);
        strcpy(full + plen, word);
        dz_cand_seq *s = &seqs[k];
        st = encode_alloc(tok, full, flags, &s->tokens, &s->len, err);
        if (st != DZ_OK) break;
        int pre = common_prefix(ctx, nctx, s->tokens, s->len);
        if (pre == s->len || pre < 1) {
            st = dz_fail(err, DZ_ERR_INVALID, "%s:%d: candidate '%s' adds no tokens after the prompt", path, ex->line,
                         word);
            break;
        }
        s->cand_len = s->len - pre;
        if (s->cand_len + 1 > max_len) {
            st = dz_fail(err, DZ_ERR_INVALID, "%s:%d: candidate '%.60s' is longer than the sequence limit %d", path,
                         ex->line, word, max_len);
            break;
        }
        if (truncate_left(s, max_len) && !out->truncated++) out->truncated_line = ex->line;
    }
    free(ctx);
    free(prompt);
    free(full);
    return st;
}

dz_status dz_special_tokens_check(const dz_tokenizer *tok, dz_error *err) {
    const dz_tokenizer_kind kind = dz_tokenizer_get_kind(tok);
    if (kind == DZ_TOK_HF_BPE) return DZ_OK;
    return dz_fail(err, DZ_ERR_UNSUPPORTED, "--special-tokens: the model's %s tokenizer reads a prompt as text only "
                   "(special tokens are read from tokenizer.json's and GGUF's BPE tokenizers); leave the option out",
                   kind == DZ_TOK_LLAMA2C ? "llama2.c" : kind == DZ_TOK_SENTENCEPIECE ? "SentencePiece"
                                                       : "GPT-2 (vocab.json + merges.txt)");
}

dz_status dz_class_set_build(const dz_dataset *ds, const dz_prompt_spec *spec, const dz_tokenizer *tok,
                             int max_len, dz_class_set *out, dz_error *err) {
    memset(out, 0, sizeof *out);
    if (ds->count < 1) return dz_fail(err, DZ_ERR_INVALID, "%s: no examples to score", ds->path ? ds->path : "the data");
    if (spec->special_tokens) {
        const dz_status st = dz_special_tokens_check(tok, err);
        if (st != DZ_OK) return st;
    }
    out->n_examples = ds->count;
    out->cand_first = malloc(sizeof(int) * (size_t)(ds->count + 1));
    out->labels = calloc((size_t)ds->count + 1, sizeof *out->labels);
    size_t total = 0;
    for (int e = 0; out->cand_first && e < ds->count; e++) {
        const int k = n_cands_of(&ds->items[e], spec);
        out->cand_first[e] = (int)total;
        total += (size_t)k;
        if (k > out->n_labels) out->n_labels = k;
    }
    if (out->cand_first) out->cand_first[ds->count] = (int)total;
    out->seqs = calloc(total + 1, sizeof *out->seqs);
    out->n_seqs = (int)total;
    if (!out->seqs || !out->labels || !out->cand_first || total > (size_t)INT_MAX) {
        dz_class_set_free(out);
        return dz_fail(err, DZ_ERR_NOMEM, "out of memory building %d prompts", ds->count);
    }
    for (int e = 0; e < ds->count; e++) {
        const dz_example *ex = &ds->items[e];
        dz_cand_seq *seqs = &out->seqs[out->cand_first[e]];
        const int K = n_cands_of(ex, spec);
        dz_status st = build_example(ds, ex, spec, tok, max_len, seqs, out, err);
        if (st == DZ_OK && (ex->label < -1 || ex->label >= K))
            st = dz_fail(err, DZ_ERR_INVALID, "%s:%d: label %d, but only %d %s are given", ds->path ? ds->path : "dataset",
                         ex->line, ex->label, K, ex->cands ? "candidates" : "label words");
        if (st != DZ_OK) {
            dz_class_set_free(out);
            return st;
        }
        out->labels[e] = ex->label;
        for (int k = 0; k < K; k++) {
            if (seqs[k].len > out->max_len) out->max_len = seqs[k].len;
            seqs[k].gold = k == ex->label;
            for (int a = 0; ex->cands && ex->answers && a < ex->n_answers; a++)
                seqs[k].gold |= !strcmp(ex->cands[k], ex->answers[a]);
        }
    }
    return DZ_OK;
}

dz_class_set dz_class_set_view(const dz_class_set *cs, int lo, int hi) {
    dz_class_set v = *cs;
    v.n_examples = hi - lo;
    v.labels = cs->labels + lo;
    if (cs->cand_first) v.cand_first = cs->cand_first + lo; /* indexes stay those of cs->seqs */
    else v.seqs = cs->seqs + (size_t)lo * cs->n_labels;
    return v;
}

void dz_class_set_free(dz_class_set *cs) {
    if (!cs) return;
    if (cs->seqs)
        for (int i = 0; i < cs->n_seqs; i++) free(cs->seqs[i].tokens);
    free(cs->seqs);
    free(cs->labels);
    free(cs->cand_first);
    memset(cs, 0, sizeof *cs);
}

dz_status dz_class_batch_init(dz_class_batch *bb, int max_seqs, int max_len, int share_prompts, dz_error *err) {
    memset(bb, 0, sizeof *bb);
    const size_t cap = (size_t)max_seqs * max_len;
    bb->max_seqs = max_seqs;
    bb->max_len = max_len;
    bb->share_prompts = share_prompts;
    int **ints[] = {&bb->tokens, &bb->rows, &bb->targets, &bb->p_tokens, &bb->p_rows, &bb->p_targets};
    int **small[] = {&bb->lengths, &bb->seq_first_row, &bb->p_lengths, &bb->start, &bb->parent, &bb->p_row_of,
                     &bb->ex_first};
    int ok = 1;
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) ok &= (*ints[i] = malloc(sizeof(int) * cap)) != NULL;
    for (size_t i = 0; i < sizeof small / sizeof small[0]; i++)
        ok &= (*small[i] = malloc(sizeof(int) * (size_t)(max_seqs + 1))) != NULL;
    if (ok) return DZ_OK;
    dz_class_batch_free(bb);
    return dz_fail(err, DZ_ERR_NOMEM, "out of memory for a batch of %d x %d", max_seqs, max_len);
}

void dz_class_batch_free(dz_class_batch *bb) {
    int *all[] = {bb->tokens, bb->lengths, bb->rows, bb->targets, bb->seq_first_row, bb->p_tokens, bb->p_lengths,
                  bb->p_rows, bb->p_targets, bb->start, bb->parent, bb->p_row_of, bb->ex_first};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) free(all[i]);
    memset(bb, 0, sizeof *bb);
}

/* The shared prompt length of example e: the candidates' common prefix, ending before
 * any candidate's scored tokens; 0 if there is none to share. */
static int prompt_len(const dz_class_set *cs, int e) {
    const int first = dz_class_first(cs, e), K = dz_class_count(cs, e);
    const dz_cand_seq *k0 = &cs->seqs[first];
    int p = k0->len - k0->cand_len;
    for (int k = 1; k < K; k++) {
        const dz_cand_seq *q = &cs->seqs[first + k];
        int i = 0;
        while (i < p && i < q->len - q->cand_len && q->tokens[i] == k0->tokens[i]) i++;
        p = i;
    }
    return p;
}

/* Lays out rows [from, len - 1) of a sequence's tokens as sequence i of a padded [n, T]
 * block and records which rows score the last `scored` tokens: rows of position p-1 for
 * token p; a position before `from` is the prompt's last row (tree layout). The last token
 * is no input: its row would predict past the sequence and no later row attends to it. */
static void lay_out(dz_class_batch *bb, int i, const dz_cand_seq *s, int from) {
    const int T = bb->T;
    for (int t = 0; t < T; t++) bb->tokens[i * T + t] = from + t < s->len ? s->tokens[from + t] : s->tokens[s->len - 1];
    bb->lengths[i] = s->len - 1;
    bb->seq_first_row[i] = bb->n_rows;
    bb->p_row_of[i] = -1;
    for (int p = s->len - s->cand_len; p < s->len; p++) {
        if (p - 1 < from) { /* the prompt's last row predicts the first continuation token */
            bb->p_row_of[i] = bb->n_p_rows;
            bb->p_rows[bb->n_p_rows] = bb->parent[i] * bb->PT + from - 1;
            bb->p_targets[bb->n_p_rows++] = s->tokens[p];
            continue;
        }
        bb->rows[bb->n_rows] = i * T + (p - 1 - from);
        bb->targets[bb->n_rows++] = s->tokens[p];
    }
}

dz_status dz_class_batch_fill(dz_class_batch *bb, const dz_class_set *cs, const int *examples, int n, dz_error *err) {
    int total = 0;
    for (int e = 0; e < n; e++) total += dz_class_count(cs, examples[e]);
    if (total > bb->max_seqs)
        return dz_fail(err, DZ_ERR_INVALID, "batch of %d examples with %d candidates in all exceeds %d sequences", n,
                       total, bb->max_seqs);
    bb->n_seqs = total;
    bb->n_examples = n;
    bb->n_rows = bb->n_p_rows = 0;
    for (int e = 0, i = 0; e < n; e++) { /* example e's sequences, and each sequence's example */
        bb->ex_first[e] = i;
        for (int k = 0; k < dz_class_count(cs, examples[e]); k++) bb->parent[i++] = e;
    }
    bb->ex_first[n] = total;
    bb->tree = bb->share_prompts && cs->n_labels > 1;
    for (int e = 0; bb->tree && e < n; e++) bb->tree = prompt_len(cs, examples[e]) > 0;
    int T = 0, PT = 0;
    for (int pass = 0; pass < 2; pass++) {
        T = PT = 0;
        for (int i = 0; i < bb->n_seqs; i++) {
            const int e = bb->parent[i];
            const dz_cand_seq *s = &cs->seqs[dz_class_first(cs, examples[e]) + i - bb->ex_first[e]];
            const int from = bb->tree ? prompt_len(cs, examples[e]) : 0;
            T = s->len - 1 - from > T ? s->len - 1 - from : T; /* 0: every candidate is one token */
            PT = from > PT ? from : PT;
        }
        /* every sequence padded to T from its start must stay within the positions a
         * sequence may have (a long example beside a short one), and the prompts' rows
         * must outnumber the candidates they score (many candidates after a short
         * prompt): else the plain layout */
        if (!bb->tree || (PT + T <= bb->max_len && bb->n_seqs <= n * PT)) break;
        bb->tree = 0;
    }
    if (PT + T > bb->max_len) /* the plain layout's longest input: its buffers hold max_len positions a sequence */
        return dz_fail(err, DZ_ERR_INVALID, "a candidate sequence of %d input tokens exceeds the batch's %d positions (the "
                       "forward's max_seq): build the class set with max_len at most max_seq + 1", PT + T, bb->max_len);
    bb->T = T;
    bb->PT = PT;
    bb->n_prompts = bb->tree ? n : 0;
    for (int e = 0; e < bb->n_prompts; e++) {
        const dz_cand_seq *s = &cs->seqs[dz_class_first(cs, examples[e])];
        const int plen = prompt_len(cs, examples[e]);
        for (int t = 0; t < PT; t++) bb->p_tokens[e * PT + t] = t < plen ? s->tokens[t] : s->tokens[plen - 1];
        bb->p_lengths[e] = plen;
    }
    for (int i = 0; i < bb->n_seqs; i++) {
        const int e = bb->parent[i];
        const int from = bb->tree ? prompt_len(cs, examples[e]) : 0;
        bb->start[i] = from;
        lay_out(bb, i, &cs->seqs[dz_class_first(cs, examples[e]) + i - bb->ex_first[e]], from);
    }
    bb->seq_first_row[bb->n_seqs] = bb->n_rows;
    return DZ_OK;
}

void dz_class_batch_scores(const dz_class_batch *bb, const float *logprobs, const float *p_logprobs, float *scores) {
    for (int i = 0; i < bb->n_seqs; i++) {
        double sum = 0.0;
        int n = bb->seq_first_row[i + 1] - bb->seq_first_row[i];
        if (bb->p_row_of[i] >= 0) {
            sum += p_logprobs[bb->p_row_of[i]];
            n++;
        }
        for (int r = bb->seq_first_row[i]; r < bb->seq_first_row[i + 1]; r++) sum += logprobs[r];
        scores[i] = (float)(sum / n);
    }
}

dz_status dz_class_batch_forward(dz_forward *f, const dz_weight_source *w, const dz_class_batch *bb, float *logprobs,
                                 float *p_logprobs, dz_error *err) {
    if (!bb->tree) {
        dz_status st = dz_forward_run(f, w, bb->tokens, bb->lengths, bb->n_seqs, bb->T, 0, err);
        return st == DZ_OK ? dz_forward_logprobs(f, w, bb->rows, bb->targets, bb->n_rows, logprobs, err) : st;
    }
    static const int both[2] = {0, 1};
    const int conts = bb->T > 0; /* else the prompts' last rows score every candidate */
    dz_status st = dz_forward_embed_tree(f, 0, w, bb->p_tokens, bb->p_lengths, bb->n_prompts, bb->PT, NULL, -1, NULL, err);
    if (st == DZ_OK && conts)
        st = dz_forward_embed_tree(f, 1, w, bb->tokens, bb->lengths, bb->n_seqs, bb->T, bb->start, 0, bb->parent, err);
    if (st == DZ_OK) st = dz_forward_layers(f, w, 1 + conts, both, err);
    const dz_head_rows sets[2] = {
        {.stream = 0, .rows = bb->p_rows, .targets = bb->p_targets, .nrows = bb->n_p_rows, .logprobs = p_logprobs},
        {.stream = 1, .rows = bb->rows, .targets = bb->targets, .nrows = bb->n_rows, .logprobs = logprobs},
    };
    if (st == DZ_OK) st = dz_forward_logprobs_sets(f, w, 1 + conts, sets, err);
    return st;
}

void dz_class_example_losses(const float *scores, const int *labels, int n, int K, double *out) {
    for (int e = 0; e < n; e++) { /* cross-entropy over the candidates */
        const float *s = scores + (size_t)e * K;
        double mx = s[0], z = 0.0;
        for (int k = 1; k < K; k++) mx = s[k] > mx ? s[k] : mx;
        for (int k = 0; k < K; k++) z += exp(s[k] - mx);
        out[e] = mx + log(z) - s[labels[e]];
    }
}

double dz_class_loss(const float *scores, const int *labels, int n, int K) {
    double total = 0.0;
    for (int e = 0; e < n; e++) { /* examples summed in order, as a step sums them */
        double l;
        dz_class_example_losses(scores + (size_t)e * K, labels + e, 1, K, &l);
        total += l;
    }
    return total / n;
}

int dz_class_predict(const float *scores, int K) {
    int best = 0;
    for (int k = 0; k < K; k++) {
        if (!isfinite(scores[k])) return -1; /* NaN compares false: it would pass for label 0 */
        if (scores[k] > scores[best]) best = k;
    }
    return best;
}

dz_status dz_class_evaluate(dz_forward *f, const dz_weight_source *w, const dz_class_set *cs, int batch,
                            int *preds, float *scores, double *accuracy, dz_error *err) {
    const int first0 = cs->n_examples > 0 ? dz_class_first(cs, 0) : 0;
    const int total = cs->n_examples > 0 ? dz_class_first(cs, cs->n_examples) - first0 : 0;
    /* Whole examples per batch so a batch never splits a candidate group; an example with
     * more candidates than the batch is a batch of its own. */
    const int max_seqs = batch > cs->n_labels ? batch : cs->n_labels;
    dz_class_batch bb;
    /* the batch's limit is the forward's positions: a tree batch falls back to the plain
     * layout only where its padding would not fit them */
    dz_status st = dz_class_batch_init(&bb, max_seqs, dz_forward_max_seq(f), dz_forward_n_streams(f) >= 2, err);
    if (st != DZ_OK) return st;
    float *all = scores ? scores : malloc(sizeof(float) * (size_t)(total > 0 ? total : 1));
    float *lp = malloc(sizeof(float) * (size_t)max_seqs * cs->max_len);
    float *plp = malloc(sizeof(float) * (size_t)max_seqs * cs->max_len);
    int *ids = malloc(sizeof(int) * (size_t)max_seqs);
    if (!all || !lp || !plp || !ids) st = dz_fail(err, DZ_ERR_NOMEM, "out of memory");
    for (int e = 0, ne; e < cs->n_examples && st == DZ_OK; e += ne) {
        int seqs = dz_class_count(cs, e);
        ne = 1;
        while (e + ne < cs->n_examples && seqs + dz_class_count(cs, e + ne) <= max_seqs) seqs += dz_class_count(cs, e + ne++);
        for (int i = 0; i < ne; i++) ids[i] = e + i;
        st = dz_class_batch_fill(&bb, cs, ids, ne, err);
        if (st == DZ_OK) st = dz_class_batch_forward(f, w, &bb, lp, plp, err);
        if (st == DZ_OK) dz_class_batch_scores(&bb, lp, plp, all + dz_class_first(cs, e) - first0);
        dz_progress_add(ne);
    }
    dz_class_batch_free(&bb);
    free(lp);
    free(plp);
    free(ids);
    int correct = 0, labelled = 0;
    for (int e = 0; e < cs->n_examples && st == DZ_OK; e++) {
        const int best = dz_class_predict(all + dz_class_first(cs, e) - first0, dz_class_count(cs, e));
        if (preds) preds[e] = best;
        if (cs->labels[e] >= 0) {
            labelled++;
            correct += dz_class_correct(cs, e, best);
        }
    }
    if (accuracy) *accuracy = labelled ? (double)correct / labelled : 0.0;
    if (!scores) free(all);
    return st;
}
