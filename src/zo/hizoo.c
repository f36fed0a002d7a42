/* HiZOO's step (arXiv 2402.15173; the kernels and H: src/pipeline/hessian_z.c): three
 * forwards of the same batch, L0 at theta (a "center" pass through the pipeline, which
 * also fuses in the previous step's pending update), then L+ and L- at theta +- eps z /
 * sqrt(H) as MeZO's dual forward. Then
 *   g = (L+ - L-) / (2 eps),   c = alpha |L+ + L- - 2 L0| / (2 eps^2)
 * (c in double, rounded to f32 once) become the pending update: H and theta move
 * together in the next pass over each block. The step result carries c in g[1] (after
 * the q = 1 values of g), which the trainer logs: replay needs nothing else. */
#include <math.h>
#include <string.h>

#include "zo/internal.h"

int dz_zo_log_values(const dz_zo_params *p) { return p->q + (p->estimator == DZ_ZO_HIZOO ? 1 : 0); }

float *dz_zo_curvature(dz_zo_engine *e, size_t *n) {
    *n = 0;
    if (e->p.estimator != DZ_ZO_HIZOO) return NULL;
    return dz_pipeline_curvature(e->pipe, n);
}

/* The slots of a step's (loss, weight) pairs: L0 of the ranks that compute the + sign,
 * L+, L-, and L0 of ranks of only the - sign (perturbation parallelism: their pass must
 * run for the update it fuses in, and the forward needs a stream; their L0 is not used). */
enum { SLOT_L0, SLOT_PLUS, SLOT_MINUS, SLOT_L0_MINUS, SLOTS };

/* L0 at theta: the pipeline's center pass on one stream, which takes the pending update. */
static dz_status center_pass(dz_zo_engine *e, uint32_t step, const dz_zo_sample_batch *sb, size_t per,
                             dz_zo_step_time *tm, dz_error *err) {
    const int plus = e->par.signs & 1;
    double *slot = e->ex_loss + (size_t)(plus ? SLOT_L0 : SLOT_L0_MINUS) * per, *out[2] = {slot, slot};
    dz_pipeline_set_center(e->pipe, 1);
    dz_status st = dz_zo_run_sample(e, step, plus ? 1 : 2, sb, out, tm, err);
    dz_pipeline_set_center(e->pipe, 0);
    return st;
}

dz_status dz_zo_hizoo_estimate(dz_zo_engine *e, uint32_t step, const dz_zo_sample_batch *sb, dz_zo_step_result *out,
                               dz_error *err) {
    memset(out, 0, sizeof *out);
    size_t per;
    dz_status st = dz_zo_loss_slots(e, SLOTS, sb, &per, err);
    if (st == DZ_OK) st = center_pass(e, step, sb, per, &out->time, err);
    double *pm[2] = {e->ex_loss + (size_t)SLOT_PLUS * per, e->ex_loss + (size_t)SLOT_MINUS * per};
    if (st == DZ_OK) st = dz_zo_run_sample(e, step, e->par.signs, sb, pm, &out->time, err);
    if (st == DZ_OK && e->par.sum) /* every rank holds only its examples and signs; the others are zeros */
        st = e->par.sum(e->par.ctx, e->ex_loss, (size_t)SLOTS * per, err);
    if (st != DZ_OK) return st;
    const int n_global = (int)(per / 2);
    const double l0 = dz_zo_slot_loss(e->ex_loss, n_global), eps = (double)e->p.eps;
    const double lp = dz_zo_slot_loss(pm[0], n_global), lm = dz_zo_slot_loss(pm[1], n_global);
    out->loss_plus[0] = lp, out->loss_minus[0] = lm;
    out->g[0] = (float)((lp - lm) / (2.0 * eps));
    out->g[1] = (float)((double)e->p.hizoo_smooth * fabs(lp + lm - 2.0 * l0) / (2.0 * eps * eps));
    out->finite = isfinite(l0) && isfinite(lp) && isfinite(lm) && isfinite(out->g[0]) && isfinite(out->g[1]);
    return DZ_OK;
}
