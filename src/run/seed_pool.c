/* FedKSeed's seed pool (seed_pool.h). */
#include "run/seed_pool.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/hash.h"
#include "core/rng.h"
#include "backend/backend.h"

dz_status dz_seed_pool_init(dz_seed_pool *p, uint32_t k, uint32_t q, dz_error *err) {
    memset(p, 0, sizeof *p);
    if (k < 1 || k > DZ_SEED_POOL_MAX || q < 1 || q > DZ_ZO_MAX_Q)
        return dz_fail(err, DZ_ERR_INVALID, "seed pool: %u seeds of %u slots (1..%u seeds, 1..%d slots)", k, q,
                       DZ_SEED_POOL_MAX, DZ_ZO_MAX_Q);
    p->k = k, p->q = q;
    p->acc = calloc(k, sizeof *p->acc);
    p->abs_sum = calloc(k, sizeof *p->abs_sum);
    p->count = calloc(k, sizeof *p->count);
    if (!p->acc || !p->abs_sum || !p->count) {
        dz_seed_pool_free(p);
        return dz_fail(err, DZ_ERR_NOMEM, "seed pool: out of memory for %u seeds", k);
    }
    return DZ_OK;
}

void dz_seed_pool_free(dz_seed_pool *p) {
    free(p->acc);
    free(p->abs_sum);
    free(p->count);
    memset(p, 0, sizeof *p);
}

dz_status dz_seed_pool_add(dz_seed_pool *p, float lr, const float *vals, dz_error *err) {
    const float *g = vals, *seeds = vals + p->q;
    for (uint32_t j = 0; j < p->q; j++)
        if (!(seeds[j] >= 0 && seeds[j] < (float)p->k && seeds[j] == floorf(seeds[j])))
            return dz_fail(err, DZ_ERR_FORMAT, "seed pool: slot %u names seed %g, not one of 0..%u", j, (double)seeds[j],
                           p->k - 1);
    if (!isfinite(lr)) return DZ_OK; /* a skipped record, as in export */
    for (uint32_t j = 0; j < p->q; j++) {
        if (!isfinite(g[j]) || g[j] == 0) continue;
        const uint32_t s = (uint32_t)seeds[j];
        p->acc[s] = (float)((double)p->acc[s] + (double)lr * (double)g[j]);
        p->abs_sum[s] += fabs((double)g[j]);
        p->count[s]++;
    }
    return DZ_OK;
}

enum { Z_CHUNK = 16384 };

dz_status dz_seed_pool_weights_init(dz_seed_pool_weights *w, dz_model *m, uint64_t run_seed, int rademacher, int rng_v2,
                                    const dz_seed_pool *p, dz_error *err) {
    memset(w, 0, sizeof *w);
    if (dz_model_dtype(m) != DZ_F32)
        return dz_fail(err, DZ_ERR_UNSUPPORTED, "seed pool: f32 master weights only (--master-dtype f32), not %s",
                       dz_dtype_name(dz_model_dtype(m)));
    const dz_param_table *t = dz_model_params(m);
    w->m = m, w->run_seed = run_seed, w->rademacher = rademacher, w->rng_v2 = rng_v2, w->k = p->k, w->q = p->q, w->n_tensors = t->count;
    w->applied = calloc(p->k, sizeof *w->applied);
    w->base = calloc((size_t)t->count, sizeof *w->base);
    w->d = calloc((size_t)t->count, sizeof *w->d);
    w->z = malloc(Z_CHUNK * sizeof *w->z);
    int ok = w->applied && w->base && w->d && w->z;
    for (int i = 0; ok && i < t->count; i++) {
        const size_t n = (size_t)dz_param_numel(&t->params[i]);
        const float *mem = dz_model_tensor(m, i);
        if (!mem) {
            dz_seed_pool_weights_free(w);
            return dz_fail(err, DZ_ERR_UNSUPPORTED, "seed pool: tensor %s is not in memory", t->params[i].hf_name);
        }
        w->base[i] = malloc(n * sizeof(float) + 1);
        w->d[i] = calloc(n + 1, sizeof(int64_t));
        ok = w->base[i] && w->d[i];
        if (ok) memcpy(w->base[i], mem, n * sizeof(float));
    }
    if (!ok) {
        dz_seed_pool_weights_free(w);
        return dz_fail(err, DZ_ERR_NOMEM, "seed pool: out of memory for the base weights and their sums");
    }
    return DZ_OK;
}

void dz_seed_pool_weights_free(dz_seed_pool_weights *w) {
    for (int i = 0; i < w->n_tensors; i++) {
        if (w->base) free(w->base[i]);
        if (w->d) free(w->d[i]);
    }
    free(w->applied);
    free(w->base);
    free(w->d);
    free(w->z);
    memset(w, 0, sizeof *w);
}

/* The fixed-point term of one element (seed_pool.h); clamped far beyond any real update. */
static inline int64_t term(double a, float z, double scale) {
    double x = a * (double)z * scale;
    const double lim = 0x1p62;
    x = x > lim ? lim : x < -lim ? -lim : x;
    return llrint(x);
}

void dz_seed_pool_weights_sync(dz_seed_pool_weights *w, const dz_seed_pool *p) {
    const dz_param_table *t = dz_model_params(w->m);
    const double scale = 0x1p40 / (double)w->q;
    const dz_zdist dist = dz_zdist_of(w->rademacher, w->rng_v2);
    int changed = 0;
    for (uint32_t k = 0; k < w->k; k++) {
        if (!memcmp(&w->applied[k], &p->acc[k], sizeof(float))) continue;
        const double a_old = w->applied[k], a_new = p->acc[k];
        for (int i = 0; i < t->count; i++) {
            const uint64_t n = (uint64_t)dz_param_numel(&t->params[i]);
            int64_t *d = w->d[i];
            for (uint64_t i0 = 0; i0 < n; i0 += Z_CHUNK) {
                const size_t len = n - i0 < Z_CHUNK ? (size_t)(n - i0) : Z_CHUNK;
                dz_backend_cpu()->ops->z_fill(dz_backend_cpu(), w->z, w->run_seed, (uint32_t)i, k, i0, len, dist);
                if (a_old == 0) /* a seed's first scalar (every seed of a join): term(0) is 0 */
                    for (size_t j = 0; j < len; j++) d[i0 + j] += term(a_new, w->z[j], scale);
                else
                    for (size_t j = 0; j < len; j++)
                        d[i0 + j] += term(a_new, w->z[j], scale) - term(a_old, w->z[j], scale);
            }
        }
        w->applied[k] = p->acc[k];
        changed = 1;
    }
    if (!changed) return;
    for (int i = 0; i < t->count; i++) {
        const uint64_t n = (uint64_t)dz_param_numel(&t->params[i]);
        float *mem = dz_model_tensor(w->m, i);
        for (uint64_t j = 0; j < n; j++) mem[j] = (float)((double)w->base[i][j] - (double)w->d[i][j] * 0x1p-40);
    }
}

void dz_seed_pool_probabilities(const dz_seed_pool *p, dz_seed_sampling mode, double *prob) {
    const uint32_t k = p->k;
    if (mode == DZ_SEED_UNIFORM) {
        for (uint32_t i = 0; i < k; i++) prob[i] = 1.0 / k;
        return;
    }
    double lo = INFINITY, hi = -INFINITY;
    for (uint32_t i = 0; i < k; i++) {
        prob[i] = p->count[i] ? p->abs_sum[i] / p->count[i] : 0.0; /* the mean |g| */
        lo = prob[i] < lo ? prob[i] : lo, hi = prob[i] > hi ? prob[i] : hi;
    }
    double sum = 0;
    for (uint32_t i = 0; i < k; i++) {
        const double psi = hi > lo ? (prob[i] - lo) / (hi - lo) : 0.0;
        prob[i] = exp(psi); /* psi in [0, 1]: no overflow, no need to subtract the max */
        sum += prob[i];
    }
    for (uint32_t i = 0; i < k; i++) prob[i] /= sum;
}

void dz_seed_pool_draw(const dz_seed_pool *p, dz_seed_sampling mode, uint64_t run_seed, uint32_t round, double *prob,
                       uint32_t *seeds) {
    if (mode == DZ_SEED_IMPORTANCE) dz_seed_pool_probabilities(p, mode, prob);
    const uint64_t round_key = dz_hash_u64(dz_hash_u64(DZ_HASH_START, run_seed), round);
    for (uint32_t j = 0; j < p->q; j++) {
        uint64_t state = dz_hash_u64(round_key, j);
        const double u = dz_uniform01(&state);
        if (mode == DZ_SEED_UNIFORM) {
            const uint32_t s = (uint32_t)(u * p->k);
            seeds[j] = s < p->k ? s : p->k - 1;
            continue;
        }
        double cum = 0;
        uint32_t s = 0;
        for (; s + 1 < p->k; s++) {
            cum += prob[s];
            if (u < cum) break;
        }
        seeds[j] = s;
    }
}

void dz_seed_pool_log_tag(uint32_t k, const char *rest, uint8_t fingerprint[64]) {
    char text[65];
    snprintf(text, sizeof text, "fedkseed %u %s", k, rest ? rest : "");
    memset(fingerprint, 0, 64);
    memcpy(fingerprint, text, strlen(text));
}

uint32_t dz_seed_pool_log_k(const uint8_t fingerprint[64]) {
    char text[65];
    memcpy(text, fingerprint, 64);
    text[64] = '\0';
    unsigned k = 0;
    if (strncmp(text, "fedkseed ", 9) || sscanf(text + 9, "%u", &k) != 1 || k < 1 || k > DZ_SEED_POOL_MAX) return 0;
    return k;
}

const char *dz_seed_sampling_name(dz_seed_sampling s) { return s == DZ_SEED_IMPORTANCE ? "importance" : "uniform"; }

int dz_seed_sampling_parse(const char *name, dz_seed_sampling *s) {
    if (!strcmp(name, "uniform")) *s = DZ_SEED_UNIFORM;
    else if (!strcmp(name, "importance")) *s = DZ_SEED_IMPORTANCE;
    else return -1;
    return 0;
}
