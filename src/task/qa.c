/* Generation tasks (SQuAD, DROP): a greedy answer after the prompt, stopped at a newline,
 * EOS or a token budget, scored against the gold answers by the SQuAD v1.1 evaluation
 * script's F1 and exact match (normalize_answer: lowercase, ASCII punctuation removed,
 * the articles a/an/the removed, whitespace collapsed). */
#include <stdlib.h>
#include <string.h>

#include "distzo/progress.h"
#include "distzo/task.h"

enum { ANSWER_CAP = 4096 };

static int is_space(unsigned char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }
static int is_punct(unsigned char c) { return c < 0x80 && c > ' ' && c != 0x7f && !((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')); }
/* Python's \w: letters, digits, underscore; any non-ASCII byte counts (letters mostly). */
static int is_word(unsigned char c) {
    return c >= 0x80 || c == '_' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

size_t dz_qa_normalize(const char *s, char *out, size_t cap) {
    if (cap == 0) return 0;
    /* lower, then punctuation out */
    size_t n = 0, len = strlen(s);
    char *tmp = malloc(len + 1);
    if (!tmp) {
        out[0] = '\0';
        return 0;
    }
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 'A' && c <= 'Z') c = (unsigned char)(c - 'A' + 'a');
        if (!is_punct(c)) tmp[n++] = (char)c;
    }
    tmp[n] = '\0';
    /* \b(a|an|the)\b -> " " */
    for (size_t i = 0; i < n;) {
        const int start = i == 0 || !is_word((unsigned char)tmp[i - 1]);
        size_t w = 0;
        if (start) {
            static const char *const arts[3] = {"the", "an", "a"};
            for (int k = 0; k < 3 && !w; k++) {
                const size_t al = strlen(arts[k]);
                if (i + al <= n && !memcmp(tmp + i, arts[k], al) && (i + al == n || !is_word((unsigned char)tmp[i + al])))
                    w = al;
            }
        }
        if (w) {
            tmp[i] = ' ';
            memmove(tmp + i + 1, tmp + i + w, n - i - w + 1);
            n -= w - 1;
            i++;
        } else {
            i++;
        }
    }
    /* ' '.join(text.split()) */
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        while (i < n && is_space((unsigned char)tmp[i])) i++;
        if (i >= n) break;
        if (o > 0 && o + 1 < cap) out[o++] = ' ';
        while (i < n && !is_space((unsigned char)tmp[i])) {
            if (o + 1 < cap) out[o++] = tmp[i];
            i++;
        }
    }
    out[o] = '\0';
    free(tmp);
    return o;
}

/* Splits s (normalized: single spaces) in place into tokens; returns their count. */
static int split(char *s, char **tok, int cap) {
    int n = 0;
    for (char *p = strtok(s, " "); p && n < cap; p = strtok(NULL, " ")) tok[n++] = p;
    return n;
}

double dz_qa_f1(const char *pred, const char *gold) {
    char a[ANSWER_CAP], b[ANSWER_CAP];
    char *pt[512], *gt[512];
    dz_qa_normalize(pred, a, sizeof a);
    dz_qa_normalize(gold, b, sizeof b);
    const int np = split(a, pt, 512), ng = split(b, gt, 512);
    int used[512] = {0}, same = 0;
    for (int i = 0; i < np; i++) /* the size of the multiset intersection (Counter &) */
        for (int j = 0; j < ng; j++)
            if (!used[j] && !strcmp(pt[i], gt[j])) {
                used[j] = 1, same++;
                break;
            }
    if (same == 0) return 0.0;
    const double p = (double)same / np, r = (double)same / ng;
    return 2.0 * p * r / (p + r);
}

int dz_qa_exact(const char *pred, const char *gold) {
    char a[ANSWER_CAP], b[ANSWER_CAP];
    dz_qa_normalize(pred, a, sizeof a);
    dz_qa_normalize(gold, b, sizeof b);
    return !strcmp(a, b);
}

void dz_qa_best(const char *pred, char *const *golds, int n, double *f1, double *em) {
    *f1 = 0.0, *em = 0.0;
    for (int i = 0; i < n; i++) { /* metric_max_over_ground_truths */
        const double f = dz_qa_f1(pred, golds[i]);
        if (f > *f1) *f1 = f;
        if (dz_qa_exact(pred, golds[i])) *em = 1.0;
    }
}

/* ---- the sets and greedy answers -------------------------------------------------------- */

dz_status dz_qa_set_build(const dz_dataset *ds, const dz_tokenizer *tok, int max_len, int max_new, dz_qa_set *out,
                          dz_error *err) {
    memset(out, 0, sizeof *out);
    const char *path = ds->path ? ds->path : "dataset";
    if (max_new < 1 || max_new >= max_len)
        return dz_fail(err, DZ_ERR_INVALID, "%d answer tokens do not fit %d positions", max_new, max_len);
    out->prompts = calloc((size_t)ds->count + 1, sizeof *out->prompts);
    out->prompt_len = calloc((size_t)ds->count + 1, sizeof *out->prompt_len);
    out->data.path = strdup(path);
    dz_status st0 = out->data.path ? DZ_OK : dz_fail(err, DZ_ERR_NOMEM, "out of memory");
    int cap = 0;
    for (int e = 0; st0 == DZ_OK && e < ds->count; e++) st0 = dz_dataset_append(&out->data, &cap, &ds->items[e], err);
    if (st0 != DZ_OK) {
        dz_qa_set_free(out);
        return st0;
    }
    if (!out->prompts || !out->prompt_len) {
        dz_qa_set_free(out);
        return dz_fail(err, DZ_ERR_NOMEM, "out of memory");
    }
    for (int e = 0; e < ds->count; e++) {
        const dz_example *ex = &ds->items[e];
        if (!ex->answers) {
            dz_qa_set_free(out);
            return dz_fail(err, DZ_ERR_INVALID, "%s:%d: a generation example needs gold answers", path, ex->line);
        }
        const int need = dz_tokenizer_encode(tok, ex->text, 1, NULL, 0, err);
        int *ids = need >= 0 ? malloc(sizeof(int) * (size_t)(need > 0 ? need : 1)) : NULL;
        const int n = ids ? dz_tokenizer_encode(tok, ex->text, 1, ids, need, err) : -1;
        if (n < 1) {
            free(ids);
            dz_qa_set_free(out);
            return need < 0 || n < 0 ? (err ? err->code : DZ_ERR_FORMAT)
                                     : dz_fail(err, DZ_ERR_INVALID, "%s:%d: empty prompt", path, ex->line);
        }
        const int keep = n > max_len - max_new ? max_len - max_new : n; /* BOS and the prompt's end */
        if (keep < n) {
            memmove(ids + 1, ids + 1 + (n - keep), sizeof(int) * (size_t)(keep - 1));
            if (!out->truncated++) out->truncated_line = ex->line;
        }
        out->prompts[e] = ids, out->prompt_len[e] = keep;
        out->n_examples++;
    }
    return DZ_OK;
}

void dz_qa_set_free(dz_qa_set *s) {
    for (int e = 0; s->prompts && e < s->n_examples; e++) free(s->prompts[e]);
    free(s->prompts);
    free(s->prompt_len);
    dz_dataset_free(&s->data);
    memset(s, 0, sizeof *s);
}

static int argmax(const float *x, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

void dz_qa_decoder_start(dz_qa_decoder *d, char *buf, int cap, int max_new) {
    *d = (dz_qa_decoder){.text = buf, .cap = cap, .max_new = max_new};
    buf[0] = '\0';
}

int dz_qa_decoder_step(dz_qa_decoder *d, const dz_tokenizer *tok, int prev, const float *logits, int vocab) {
    if (d->done) return -1;
    const int id = argmax(logits, vocab);
    if (id == dz_tokenizer_eos(tok)) {
        d->done = 1;
        return -1;
    }
    char piece[256];
    const char *p = dz_tokenizer_decode(tok, prev, id, piece, sizeof piece);
    const char *nl = p ? strchr(p, '\n') : NULL;
    const size_t pn = p ? (nl ? (size_t)(nl - p) : strlen(p)) : 0;
    if (d->len + pn + 1 < (size_t)d->cap) memcpy(d->text + d->len, p, pn), d->len += (int)pn, d->text[d->len] = '\0';
    if (nl) {
        d->done = 1;
        return -1;
    }
    if (++d->n_new >= d->max_new) d->done = 1; /* this token is the last */
    return id;
}

const char *dz_qa_decoder_answer(dz_qa_decoder *d) {
    /* MeZO strips the decoded answer */
    int a = 0, len = d->len;
    while (a < len && is_space((unsigned char)d->text[a])) a++;
    while (len > a && is_space((unsigned char)d->text[len - 1])) len--;
    d->text[len] = '\0';
    return d->text + a;
}

dz_status dz_qa_answer(dz_forward *f, const dz_weight_source *w, const dz_tokenizer *tok, const int *prompt,
                       int n_prompt, int max_new, int *work, float *logits, char *out, int cap, dz_error *err) {
    const int max_seq = dz_forward_max_seq(f), V = dz_model_config(dz_forward_model(f))->vocab_size;
    int n = n_prompt;
    dz_qa_decoder d;
    dz_qa_decoder_start(&d, out, cap, max_new);
    memcpy(work, prompt, sizeof(int) * (size_t)n_prompt);
    dz_status st = DZ_OK;
    while (!d.done && n < max_seq && max_new > 0) {
        /* the whole sequence again: a training forward keeps no KV cache */
        if ((st = dz_forward_run(f, w, work, NULL, 1, n, 0, err)) != DZ_OK) break;
        const int row = n - 1;
        if ((st = dz_forward_logits(f, w, &row, 1, logits, err)) != DZ_OK) break;
        const int id = dz_qa_decoder_step(&d, tok, work[n - 1], logits, V);
        if (id < 0) break;
        work[n++] = id;
    }
    const char *a = dz_qa_decoder_answer(&d);
    memmove(out, a, strlen(a) + 1);
    return st;
}

dz_status dz_qa_evaluate(dz_forward *f, const dz_weight_source *w, const dz_tokenizer *tok, const dz_qa_set *s, int lo,
                         int hi, int max_new, double *f1, double *em, dz_error *err) {
    return dz_qa_evaluate_answers(f, w, tok, s, lo, hi, max_new, f1, em, NULL, err);
}

dz_status dz_qa_evaluate_answers(dz_forward *f, const dz_weight_source *w, const dz_tokenizer *tok, const dz_qa_set *s,
                                 int lo, int hi, int max_new, double *f1, double *em, char **answers, dz_error *err) {
    const int max_seq = dz_forward_max_seq(f), V = dz_model_config(dz_forward_model(f))->vocab_size;
    int *work = malloc(sizeof(int) * (size_t)max_seq);
    float *logits = malloc(sizeof(float) * (size_t)V);
    char *answer = malloc(ANSWER_CAP);
    dz_status st = work && logits && answer ? DZ_OK : dz_fail(err, DZ_ERR_NOMEM, "out of memory");
    for (int e = lo; e < hi && st == DZ_OK; e++) {
        st = dz_qa_answer(f, w, tok, s->prompts[e], s->prompt_len[e], max_new, work, logits, answer, ANSWER_CAP, err);
        if (st == DZ_OK)
            dz_qa_best(answer, s->data.items[e].answers, s->data.items[e].n_answers, &f1[e - lo], &em[e - lo]);
        if (st == DZ_OK && answers && !(answers[e - lo] = strdup(answer)))
            st = dz_fail(err, DZ_ERR_NOMEM, "out of memory");
        dz_progress_add(1);
    }
    free(work);
    free(logits);
    free(answer);
    return st;
}
