/* Text generation: greedy or nucleus sampling over a KV-cached forward pass. */
#include <math.h>
#include <stdlib.h>

#include "core/rng.h"
#include "distzo/task.h"

void dz_sampler_init(dz_sampler *s, float temperature, float top_p, uint64_t seed) {
    s->temperature = temperature;
    s->top_p = top_p > 0.0f && top_p <= 1.0f ? top_p : 1.0f;
    s->state = seed;
}

static int argmax(const float *x, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

static const float *g_sort_probs; /* qsort has no context argument; sampling is single-threaded */
static int by_prob_desc(const void *a, const void *b) {
    float pa = g_sort_probs[*(const int *)a], pb = g_sort_probs[*(const int *)b];
    if (pa != pb) return pa < pb ? 1 : -1;
    return *(const int *)a - *(const int *)b;
}

int dz_sampler_pick(dz_sampler *s, const float *logits, int vocab, float *work) {
    if (s->temperature <= 0.0f) return argmax(logits, vocab);
    float *p = work;
    int *order = (int *)(work + vocab);
    float mx = logits[argmax(logits, vocab)];
    double sum = 0.0;
    for (int i = 0; i < vocab; i++) {
        p[i] = expf((logits[i] - mx) / s->temperature);
        sum += p[i];
    }
    for (int i = 0; i < vocab; i++) p[i] = (float)(p[i] / sum);
    double r = dz_uniform01(&s->state);
    if (s->top_p >= 1.0f) {
        double c = 0.0;
        for (int i = 0; i < vocab; i++)
            if ((c += p[i]) > r) return i;
        return vocab - 1;
    }
    /* Nucleus: the smallest set of most likely tokens whose mass reaches top_p. */
    for (int i = 0; i < vocab; i++) order[i] = i;
    g_sort_probs = p;
    qsort(order, (size_t)vocab, sizeof *order, by_prob_desc);
    double mass = 0.0;
    int k = 0;
    while (k < vocab && mass < s->top_p) mass += p[order[k++]];
    double c = 0.0, target = r * mass;
    for (int i = 0; i < k; i++)
        if ((c += p[order[i]]) > target) return order[i];
    return order[k - 1];
}

dz_status dz_generate(dz_forward *f, const dz_weight_source *w, const int *prompt, int n_prompt, int n,
                      int eos, dz_sampler *s, int *out, int *n_out, dz_token_cb on_token, void *user,
                      dz_error *err) {
    *n_out = 0;
    if (s && (!(s->temperature >= 0.0f) || !isfinite(s->temperature) || !(s->top_p > 0.0f && s->top_p <= 1.0f)))
        return dz_fail(err, DZ_ERR_INVALID, "generate: temperature %g (must be 0 or more) or top_p %g (in (0, 1]) is "
                       "out of range", (double)s->temperature, (double)s->top_p);
    const dz_config *c = dz_model_config(dz_forward_model(f));
    const int max_seq = dz_forward_max_seq(f);
    if (n_prompt < 1) return dz_fail(err, DZ_ERR_INVALID, "generate: the prompt needs at least one token");
    if (n_prompt >= max_seq)
        return dz_fail(err, DZ_ERR_INVALID, "generate: prompt of %d tokens leaves no room in %d positions",
                       n_prompt, max_seq);
    float *logits = malloc(sizeof(float) * (size_t)c->vocab_size * 3);
    if (!logits) return dz_fail(err, DZ_ERR_NOMEM, "generate: out of memory");
    dz_status st = dz_forward_run(f, w, prompt, NULL, 1, n_prompt, 0, err);
    int row = n_prompt - 1, pos = n_prompt, prev = prompt[n_prompt - 1];
    while (st == DZ_OK && *n_out < n) {
        st = dz_forward_logits(f, w, &row, 1, logits, err);
        if (st != DZ_OK) break;
        int tok = dz_sampler_pick(s, logits, c->vocab_size, logits + c->vocab_size);
        if (eos >= 0 && tok == eos) break;
        out[(*n_out)++] = tok;
        if (on_token) on_token(prev, tok, user);
        prev = tok;
        if (pos >= max_seq || *n_out == n) break;
        st = dz_forward_run(f, w, &tok, NULL, 1, 1, pos++, err);
        row = 0;
    }
    free(logits);
    return st;
}
