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

/* L0 on this rank's share: its examples on the stream of its + sign, summed over ranks
 * (the - slot's sum is not used). A rank of only the - sign (perturbation parallelism)
 * computes L0 on its - stream: the forward needs a stream, and the pass the update. */
static dz_status center_loss(dz_zo_engine *e, uint32_t draw, const dz_zo_sample_batch *sb, double *l0,
                             dz_zo_step_time *tm, dz_error *err) {
    dz_zo_step_result c;
    const int signs = e->par.signs;
    e->par.signs = signs & 1 ? 1 : 2;
    dz_pipeline_set_center(e->pipe, 1);
    dz_status st = dz_zo_estimate_samples(e, 1, draw, sb, &c, err);
    dz_pipeline_set_center(e->pipe, 0);
    e->par.signs = signs;
    *l0 = c.loss_plus[0];
    tm->begin += c.time.begin, tm->pass += c.time.pass, tm->layers += c.time.layers, tm->head += c.time.head;
    return st;
}

dz_status dz_zo_hizoo_step(dz_zo_engine *e, uint32_t step, float lr, const dz_zo_sample_batch *sb,
                           dz_zo_step_result *out, dz_error *err) {
    double l0 = NAN;
    dz_zo_step_time t0 = {0};
    dz_status st = center_loss(e, step, sb, &l0, &t0, err);
    if (st == DZ_OK) st = dz_zo_estimate_samples(e, 1, step, sb, out, err);
    if (st != DZ_OK) return st;
    out->time.begin += t0.begin, out->time.pass += t0.pass, out->time.layers += t0.layers, out->time.head += t0.head;
    const double eps = (double)e->p.eps;
    const double c = (double)e->p.hizoo_smooth * fabs(out->loss_plus[0] + out->loss_minus[0] - 2.0 * l0) /
                     (2.0 * eps * eps);
    out->g[1] = (float)c;
    if (!isfinite(l0) || !isfinite(out->g[1])) out->finite = 0;
    if (!out->finite) return DZ_OK;
    st = dz_zo_set_update(e, step, lr, out->g, err);
    if (st == DZ_OK && !e->p.fuse) st = dz_pipeline_apply_pending(e->pipe, err);
    return st;
}
