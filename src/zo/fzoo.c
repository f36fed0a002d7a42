/* FZOO (Dang et al., arXiv 2506.09034): a step of N one-sided Rademacher directions that
 * share one unperturbed loss, normalized by the spread of the perturbed losses.
 *
 *   l0  = L(theta)                 the pass at eps 0 (the pending update fused in there)
 *   l_j = L(theta + eps u_j)       u_j the Rademacher z of draw step * N + j
 *   sigma = sqrt(sum_j (l_j - mean)^2 / (N - 1))
 *   g_j = float((l_j - l0) / (eps sigma))
 *
 * The update is then MeZO's with q = N (docs/ZO_RNG.md section 5): theta -= lr (sum_j
 * g_j u_j) / N = lr / (eps N sigma) sum_j (l_j - l0) u_j, FZOO's step. So the seed log's
 * record (step, lr, g[N]) is all replay needs, and resume, export and replay are MeZO's.
 * When the N losses agree to float rounding (sigma <= 1e-7 max(1, |l0|)) the step has no
 * direction to normalize: g = 0 (weight decay alone moves the weights).
 * Under --pertp 2 the pair's ranks split the N + 1 passes (my_slots); a federated worker
 * computes a round's g alone (dz_zo_fzoo_coefficients) and sends them one byte each. */
#include <math.h>
#include <string.h>

#include "zo/internal.h"

/* Spread below this (relative to max(1, |l0|)) is the forwards' float rounding. */
#define FZOO_SIGMA_MIN_REL 1e-7

dz_status dz_zo_fzoo_check(const dz_zo_params *p, dz_error *err) {
    if (p->q < 2)
        return dz_fail(err, DZ_ERR_INVALID, "zo: --estimator fzoo needs at least 2 directions per step "
                       "(--fzoo-directions %d): sigma is their losses' standard deviation", p->q);
    if (!p->rademacher)
        return dz_fail(err, DZ_ERR_INVALID, "zo: --estimator fzoo perturbs with Rademacher directions "
                       "(--perturbation rademacher)");
    return DZ_OK;
}

/* One forward of the +eps stream at draw `draw` with perturbation scale eps, its
 * (loss, weight) pairs into slot. */
static dz_status one_sided(dz_zo_engine *e, uint32_t draw, float eps, const dz_zo_sample_batch *sb, double *slot,
                           dz_zo_step_time *tm, dz_error *err) {
    double *out[2] = {slot, slot}; /* only sign 0 is written */
    dz_pipeline_set_eps(e->pipe, eps);
    dz_status st = dz_zo_run_sample(e, draw, 1, sb, out, tm, err);
    dz_pipeline_set_eps(e->pipe, e->p.eps);
    return st;
}

/* The sample standard deviation of l[0..n-1], n >= 2. */
static double spread(const double *l, int n) {
    double mean = 0.0, ss = 0.0;
    for (int j = 0; j < n; j++) mean += l[j];
    mean /= n;
    for (int j = 0; j < n; j++) ss += (l[j] - mean) * (l[j] - mean);
    return sqrt(ss / (n - 1));
}

/* g from the losses; out->loss_plus[j] = l_j, out->loss_minus[j] = l0. */
static void coefficients(const dz_zo_engine *e, double l0, const double *l, dz_zo_step_result *out) {
    const int n = e->p.q;
    const double sigma = spread(l, n);
    const int flat = !(sigma > FZOO_SIGMA_MIN_REL * fmax(1.0, fabs(l0)));
    out->finite = isfinite(l0) && isfinite(sigma);
    for (int j = 0; j < n; j++) {
        out->loss_plus[j] = l[j], out->loss_minus[j] = l0;
        out->g[j] = flat ? 0.0f : (float)((l[j] - l0) / ((double)e->p.eps * sigma));
        if (!isfinite(l[j]) || !isfinite(out->g[j])) out->finite = 0;
    }
}

/* Perturbation parallelism (--pertp 2, signs 1 or 2): the N + 1 passes (slot 0 the l0
 * pass, slot j + 1 direction j) split into P contiguous shares, sizes differing by at most
 * one; this rank runs [*lo, *hi). Its first pass takes the pending update, whichever slot
 * it is, and the slots it leaves are zeros in the exact sum over ranks. */
static void my_slots(const dz_zo_engine *e, int *lo, int *hi) {
    const int slots = e->p.q + 1, parts = e->par.signs == 3 ? 1 : 2, k = e->par.signs == 2;
    *lo = slots * k / parts, *hi = slots * (k + 1) / parts;
}

dz_status dz_zo_fzoo_estimate(dz_zo_engine *e, uint32_t step, const dz_zo_sample_batch *sb, dz_zo_step_result *out,
                              dz_error *err) {
    memset(out, 0, sizeof *out);
    const int n = e->p.q;
    const uint32_t draw0 = step * (uint32_t)n;
    size_t per;
    int lo, hi;
    my_slots(e, &lo, &hi);
    dz_status st = dz_zo_loss_slots(e, n + 1, sb, &per, err);
    /* slot 0: l0, first, so that its pass takes the pending update; slot j + 1: l_j */
    for (int s = lo; st == DZ_OK && s < hi; s++)
        st = one_sided(e, draw0 + (uint32_t)(s > 0 ? s - 1 : 0), s > 0 ? e->p.eps : 0.0f, sb,
                       e->ex_loss + (size_t)s * per, &out->time, err);
    if (st == DZ_OK && e->par.sum) /* data or perturbation parallel: every rank holds only its slots' examples */
        st = e->par.sum(e->par.ctx, e->ex_loss, (size_t)(n + 1) * per, err);
    if (st != DZ_OK) return st;
    const int n_global = (int)(per / 2);
    double l[DZ_ZO_MAX_Q];
    for (int j = 0; j < n; j++) l[j] = dz_zo_slot_loss(e->ex_loss + (size_t)(j + 1) * per, n_global);
    coefficients(e, dz_zo_slot_loss(e->ex_loss, n_global), l, out);
    return DZ_OK;
}

dz_status dz_zo_fzoo_check_parallel(const dz_zo_params *p, const dz_zo_parallel *par, dz_error *err) {
    if (p->estimator == DZ_ZO_FZOO && par->signs != 3 && par->n_slices > 1)
        return dz_fail(err, DZ_ERR_UNSUPPORTED, "zo: --estimator fzoo under --pertp 2 runs other directions on each "
                       "rank of a pair, which cannot share the node's one working copy: give each rank its own "
                       "replica (--node-size 1)");
    return DZ_OK;
}

dz_status dz_zo_fzoo_coefficients(dz_zo_engine *e, uint32_t step, const dz_zo_batch *b, dz_zo_step_result *out,
                                  dz_error *err) {
    if (e->p.estimator != DZ_ZO_FZOO)
        return dz_fail(err, DZ_ERR_INVALID, "zo: FZOO's coefficients asked of an engine of --estimator %s",
                       dz_zo_estimator_name(e->p.estimator));
    const dz_zo_sample_batch sb = {
        .b = b, .n_examples = b->n_examples, .example0 = b->example0, .n_global = b->n_global};
    return dz_zo_fzoo_estimate(e, step, &sb, out, err);
}
