/* HiZOO's z (arXiv 2402.15173): MeZO's z of every element divided by the square root of
 * its diagonal Hessian estimate H (the curvature state, one f32 per trainable element,
 * starting at 1), and the update that moves H with the step:
 *
 *   perturbation of draw d:  w+- = theta +- eps * (z_d / sqrt(H))
 *   update of step t (g, c): t = z * z; t = H * t; t = c * t; H = H * (1 - alpha) + t;
 *                            s = z / sqrt(H); u = 0 + g * s; then MeZO's update of u
 *                            (v = u + wd theta [wd != 0]; theta = theta - lr v; bf16
 *                            masters stochastically rounded as MeZO's)
 *
 * with z the step's MeZO z (any dist), c = alpha |L+ + L- - 2 L0| / (2 eps^2) computed by
 * the estimator (src/zo/hizoo.c) and logged, so that replay moves H exactly as training
 * did. A "center" pass (the estimator's third forward, L0 at theta) writes w+ = w- =
 * theta. Element-wise, no reductions, no FMA (-ffp-contract=off), sqrt and division
 * correctly rounded: the same bits on every thread count and ISA level. The update is
 * applied exactly once per element (a pass that applies an update to a copy, as a
 * streamed global block's rows do, would move H twice: refused at use_store).
 * HiZOO-L (p->z.factored) keeps a 2-D tensor's H as rank-1 factors that move before the
 * update's passes (hessian_factors.c): its spans read H from them and only scale z. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu_simd.h"
#include "backend/cpu_zo_update.h"
#include "core/util.h"
#include "pipeline/internal.h"

enum { SEG = 1024 };

size_t dz_hz_floats_for(const dz_param_table *t, int factored) {
    size_t n = 0;
    for (int i = 0; i < t->count; i++) n += dz_hz_tensor_floats(&t->params[i], factored);
    return n;
}

dz_status dz_hz_create(dz_pipeline *p, dz_error *err) {
    if (p->z.shape != DZ_PZ_HESSIAN) return DZ_OK;
    if (!(p->z.smooth > 0.0f && p->z.smooth < 1.0f))
        return dz_fail(err, DZ_ERR_INVALID, "zo: --hizoo-smooth %g is outside (0, 1)", (double)p->z.smooth);
    const dz_param_table *t = dz_model_params(p->m);
    hessian_state *hs = &p->hess;
    hs->off = calloc((size_t)t->count, sizeof *hs->off);
    hs->coff = calloc((size_t)t->count, sizeof *hs->coff);
    if (!hs->off || !hs->coff) return dz_fail(err, DZ_ERR_NOMEM, "zo: out of memory");
    size_t cols = 0;
    for (int i = 0; i < t->count; i++) {
        hs->off[i] = hs->n, hs->coff[i] = cols;
        hs->n += dz_hz_tensor_floats(&t->params[i], p->z.factored);
        if (dz_hz_factored(&t->params[i], p->z.factored)) cols += (size_t)t->params[i].cols;
    }
    hs->h = dz_alloc((hs->n ? hs->n : 1) * sizeof(float));
    hs->colsum = malloc((cols ? cols : 1) * sizeof(double));
    if (!hs->h || !hs->colsum)
        return dz_fail(err, DZ_ERR_NOMEM, "zo: cannot allocate HiZOO's curvature (%zu floats)", hs->n);
    for (size_t i = 0; i < hs->n; i++) hs->h[i] = 1.0f;
    return DZ_OK;
}

void dz_hz_free(dz_pipeline *p) {
    free(p->hess.off);
    free(p->hess.coff);
    free(p->hess.colsum);
    dz_free(p->hess.h);
}

float *dz_pipeline_curvature(dz_pipeline *p, size_t *n) {
    *n = p->hess.n;
    return p->hess.h;
}

void dz_pipeline_set_center(dz_pipeline *p, int center) { p->hess.center = center; }

/* H = H * keep + c * (H * (z * z)); s = z / sqrt(H) (the new H). */
DZ_ISA_VARIANTS(hz_move, (float *h, float *s, const float *z, float keep, float c, size_t n), (h, s, z, keep, c, n)) {
    for (size_t k = 0; k < n; k++) {
        float t = z[k] * z[k];
        t = h[k] * t;
        t = c * t;
        const float hn = h[k] * keep + t;
        h[k] = hn;
        s[k] = z[k] / sqrtf(hn);
    }
}

/* s = z / sqrt(H). */
DZ_ISA_VARIANTS(hz_scale, (float *s, const float *z, const float *h, size_t n), (s, z, h, n)) {
    for (size_t k = 0; k < n; k++) s[k] = z[k] / sqrtf(h[k]);
}

DZ_ISA_VARIANTS(hz_round_bf16, (uint16_t *o, const float *x, const uint32_t *sr, size_t n), (o, x, sr, n)) {
    for (size_t k = 0; k < n; k++) o[k] = dz_bf16_round_stochastic(x[k], sr[k]);
}

/* The update of one segment: H moved (factored: it moved before, hessian_factors.c),
 * theta updated in place. */
static void segment_update(const dz_pipeline *p, int id, uint64_t i, size_t n, void *t, const float *x, float *h,
                           int factored, const dz_zo_update *u) {
    float z[SEG], s[SEG], acc[SEG];
    uint32_t sr[SEG];
    const uint32_t d0 = u->step * (uint32_t)u->q;
    p->be->ops->z_fill(p->be, z, p->z.seed, (uint32_t)id, d0, i, n, p->z.dist);
    if (factored)
        hz_scale(s, z, h, n);
    else
        hz_move(h, s, z, 1.0f - p->z.smooth, u->curv, n);
    dz_zo_add_scaled(acc, u->g[0], s, n, 1);
    if (dz_masters_bf16(p)) {
        p->be->ops->philox_fill(p->be, sr, p->z.seed, DZ_PURPOSE_SR, (uint32_t)id, d0, i, n);
        dz_zo_apply_update(acc, x, acc, n, 1, u->lr, u->wd);
        hz_round_bf16((uint16_t *)t, acc, sr, n);
    } else {
        dz_zo_apply_update((float *)t, x, acc, n, 1, u->lr, u->wd);
    }
}

void dz_hz_span(const dz_pipeline *p, int id, uint64_t i0, size_t n, void *th, float *wp, float *wm,
                const dz_zo_update *u) {
    const int bf16 = dz_masters_bf16(p);
    const size_t esz = bf16 ? 2 : 4;
    const int factored = dz_hz_factored(&dz_model_params(p->m)->params[id], p->z.factored);
    float xb[SEG], z[SEG], hf[SEG];
    for (size_t a = 0; a < n; a += SEG) {
        const size_t len = n - a < SEG ? n - a : SEG;
        char *t = (char *)th + a * esz;
        const float *x = bf16 ? (dz_zo_widen_bf16(xb, (const uint16_t *)(void *)t, len), xb) : (const float *)(void *)t;
        float *h = factored ? hf : p->hess.h + p->hess.off[id] + i0 + a;
        if (factored) dz_hz_expand(p, id, i0 + a, len, hf);
        if (u) {
            segment_update(p, id, i0 + a, len, t, x, h, factored, u);
            if (bf16) dz_zo_widen_bf16(xb, (const uint16_t *)(void *)t, len); /* the rounded theta */
        }
        if (!wp) continue;
        if (p->hess.center) { /* L0's forward: theta itself on both streams */
            memcpy(wp + a, x, len * sizeof(float));
            memcpy(wm + a, x, len * sizeof(float));
            continue;
        }
        p->be->ops->z_fill(p->be, z, p->z.seed, (uint32_t)id, p->draw, i0 + a, len, p->z.dist);
        hz_scale(z, z, h, len);
        dz_zo_make_pair(wp + a, wm + a, x, z, p->z.eps, len);
    }
}
