/* FedKSeed's seed pool (seed_pool.h). */
#include "run/seed_pool.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/hash.h"
#include "core/rng.h"

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

dz_status dz_seed_pool_apply(const dz_seed_pool *p, dz_zo_engine *e, dz_error *err) {
    float g[DZ_ZO_MAX_Q];
    for (uint32_t s = 0; (uint64_t)s * p->q < p->k; s++) {
        int any = 0;
        for (uint32_t j = 0; j < p->q; j++) {
            const uint64_t i = (uint64_t)s * p->q + j;
            g[j] = i < p->k ? p->acc[i] : 0.0f;
            any |= g[j] != 0;
        }
        if (!any) continue;
        dz_status st = dz_zo_apply(e, s, 1.0f, g, err);
        if (st != DZ_OK) return st;
    }
    return DZ_OK;
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
