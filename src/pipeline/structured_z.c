/* The structured estimators' z on 2-D tensors, as span kernels beside the backend's dense
 * ones (block_pass.c and global_rows.c call them for such tensors; vectors keep MeZO's z):
 *
 * SPARSE (Sparse-MeZO, arXiv 2402.15751): MeZO's z of the element (the contract's, any
 *   dist) where |theta| <= tau of its row, 0 elsewhere. tau is the ceil(density * S)-th
 *   smallest |theta| among S <= SPARSE_SAMPLE evenly spaced elements of the row, computed
 *   from the weights the pass reads: the update of step t masks with theta_t's rows (as the
 *   perturbation of step t did), the perturbation that follows with the updated rows. The
 *   mask is thus a function of the weights alone (no stored state); spans hold whole rows
 *   (working_set.c cuts them so).
 * LOWRANK (LOZO): z_ij = (sum_k U_ik V_jk) / sqrt(r). U (rows x r) is Gaussian of counter
 *   purpose DZ_PURPOSE_LOZO_U at the draw, element i*r + k; V (cols x r) of purpose
 *   DZ_PURPOSE_LOZO_V at "draw" w = step / nu (step = draw / q), element j*r + k. V is
 *   kept for two windows (slot w % 2), regenerated from the seed when a window starts, and
 *   stored rank-major (V[k][j]) so that a row's z is r contiguous multiply-adds per element;
 *   U's r values of a row are generated where the row is used.
 *
 * The update keeps the contract's float order (backend/zo_ops.h): u = 0; u = u + g_j z_j;
 * v = u; v = v / q [q > 1]; v = v + wd theta [wd != 0]; theta = theta - lr v; bf16 masters
 * stochastically rounded with the purpose-1 word of (tensor, element, step * q); then
 * w+- = theta +- (eps z). The elementwise loops are one variant per ISA level
 * (backend/cpu_simd.h): no reductions, no FMA, -ffp-contract=off, so the same bits on every
 * thread count, ISA level and backend; the threshold's selection counts integers, exact in
 * any order. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu_simd.h"
#include "backend/cpu_zo_update.h"
#include "core/util.h"
#include "pipeline/internal.h"

/* SEG: elements per chunk of a row (SmolLM2's 576-wide rows in one) */
enum { SEG = 1024, SPARSE_SAMPLE = 128 };

int dz_sz_applies(const dz_pipeline *p, int id) {
    const dz_param *t = &dz_model_params(p->m)->params[id];
    return (p->z.shape == DZ_PZ_SPARSE || p->z.shape == DZ_PZ_LOWRANK) && t->rows > 1 && t->cols > 1;
}

/* Gaussians of counter (j, purpose, tensor, draw) for elements i0 .. i0+n-1, the contract's
 * word pairs through Box-Muller (the same mapping as z of purpose 0). */
void dz_sz_gaussians(float *out, uint64_t seed, uint32_t purpose, uint32_t tensor, uint32_t draw, uint64_t i0,
                     size_t n) {
    uint64_t i = i0;
    const uint64_t end = i0 + n;
    while (i < end) {
        uint32_t x[4];
        float z[4];
        dz_philox_block_of(x, seed, purpose, tensor, draw, i);
        dz_box_muller(x[0], x[1], &z[0], &z[1]);
        dz_box_muller(x[2], x[3], &z[2], &z[3]);
        for (unsigned lane = (unsigned)(i & 3); lane < 4 && i < end; lane++, i++) out[i - i0] = z[lane];
    }
}

/* ---- LOWRANK: the V of two windows -------------------------------------------------- */

static uint32_t window_of_step(const dz_pipeline *p, uint32_t step) { return step / (uint32_t)p->z.nu; }

size_t dz_pipeline_shape_bytes_for(const dz_param_table *t, const dz_pipeline_perturbation *z) {
    if (z->shape == DZ_PZ_HESSIAN) /* H, and HiZOO-L's column sums */
        return dz_hz_floats_for(t, z->factored) * sizeof(float) + dz_hz_colsum_count(t, z->factored) * sizeof(double);
    if (z->shape != DZ_PZ_LOWRANK) return 0;
    size_t floats = 0;
    for (int i = 0; i < t->count; i++)
        if (t->params[i].rows > 1 && t->params[i].cols > 1) floats += (size_t)t->params[i].cols * (size_t)z->rank;
    return 2 * floats * sizeof(float);
}

dz_status dz_sz_create(dz_pipeline *p, dz_error *err) {
    const dz_param_table *t = dz_model_params(p->m);
    if (p->z.shape == DZ_PZ_SPARSE) {
        if (!(p->z.density > 0.0f && p->z.density <= 1.0f))
            return dz_fail(err, DZ_ERR_INVALID, "zo: --sparse-density %g is outside (0, 1]", (double)p->z.density);
        for (int i = 0; i < t->count; i++)
            if (t->params[i].rows > 1 && t->params[i].cols > SPAN)
                return dz_fail(err, DZ_ERR_UNSUPPORTED, "zo: sparse: tensor %s has rows of %lld elements (at most %d)",
                               t->params[i].hf_name, (long long)t->params[i].cols, (int)SPAN);
    }
    if (p->z.shape != DZ_PZ_LOWRANK) return DZ_OK;
    if (p->z.rank < 1 || p->z.rank > DZ_PIPELINE_MAX_RANK)
        return dz_fail(err, DZ_ERR_INVALID, "zo: --lozo-rank %d is outside 1..%d", p->z.rank, DZ_PIPELINE_MAX_RANK);
    if (p->z.nu < 1) return dz_fail(err, DZ_ERR_INVALID, "zo: --lozo-nu %d must be at least 1", p->z.nu);
    if (p->z.q < 1) return dz_fail(err, DZ_ERR_INVALID, "zo: a low-rank perturbation needs the draws per step");
    lowrank_state *lr = &p->lowrank;
    lr->v_off = calloc((size_t)t->count, sizeof *lr->v_off);
    if (!lr->v_off) return dz_fail(err, DZ_ERR_NOMEM, "zo: out of memory");
    size_t floats = 0;
    for (int i = 0; i < t->count; i++) {
        lr->v_off[i] = floats;
        if (t->params[i].rows > 1 && t->params[i].cols > 1) floats += (size_t)t->params[i].cols * (size_t)p->z.rank;
    }
    for (int s = 0; s < 2; s++) {
        lr->v[s] = dz_alloc((floats ? floats : 1) * sizeof(float));
        lr->valid[s] = 0;
        if (!lr->v[s]) return dz_fail(err, DZ_ERR_NOMEM, "zo: cannot allocate LOZO's V (%zu floats)", floats);
    }
    return DZ_OK;
}

void dz_sz_free(dz_pipeline *p) {
    free(p->lowrank.v_off);
    for (int s = 0; s < 2; s++) dz_free(p->lowrank.v[s]);
}

static int window_ready(const dz_pipeline *p, uint32_t w) {
    const lowrank_state *lr = &p->lowrank;
    return lr->valid[w & 1] && lr->window[w & 1] == w;
}

/* The slot of window w holds its V (the caller's thread, with no pass running). */
static void make_window(dz_pipeline *p, uint32_t w) {
    lowrank_state *lr = &p->lowrank;
    if (window_ready(p, w)) return;
    const dz_param_table *t = dz_model_params(p->m);
    const size_t r = (size_t)p->z.rank;
    for (int i = 0; i < t->count; i++) {
        if (!dz_sz_applies(p, i)) continue;
        const size_t cols = (size_t)t->params[i].cols, n = cols * r;
        float *v = lr->v[w & 1] + lr->v_off[i], buf[SEG];
        for (size_t a = 0; a < n; a += SEG) { /* element j*r + k lands at V[k][j] */
            const size_t len = n - a < SEG ? n - a : SEG;
            dz_sz_gaussians(buf, p->z.seed, DZ_PURPOSE_LOZO_V, (uint32_t)i, w, a, len);
            for (size_t e = 0; e < len; e++) v[((a + e) % r) * cols + (a + e) / r] = buf[e];
        }
    }
    lr->window[w & 1] = w;
    lr->valid[w & 1] = 1;
}

dz_status dz_sz_prepare(dz_pipeline *p, int perturb, uint32_t draw, dz_error *err) {
    if (p->z.shape != DZ_PZ_LOWRANK) return DZ_OK;
    const int pending = p->upd.pending;
    const uint32_t wu = pending ? window_of_step(p, p->upd.rule.step) : 0;
    if (pending) make_window(p, wu); /* set with its step: normally still there */
    if (!perturb) return DZ_OK;
    const uint32_t w = window_of_step(p, draw / (uint32_t)p->z.q);
    if (pending && w != wu && (w & 1) == (wu & 1)) { /* both windows want one slot: apply the update first */
        dz_status st = dz_pipeline_flush(p, err);
        if (st != DZ_OK) return st;
    }
    make_window(p, w);
    return DZ_OK;
}

/* ---- SPARSE: a row's threshold ------------------------------------------------------- */

static float theta_at(const void *th, int bf16, size_t k) {
    return bf16 ? dz_zo_u2f((uint32_t)((const uint16_t *)th)[k] << 16) : ((const float *)th)[k];
}

/* The k-th smallest (0-based) of n non-negative floats given as bit patterns (their order
 * is the integers'), found bit by bit from the top: bit b of the answer is 0 iff more than
 * k patterns are <= (the bits found so far, b clear, all lower bits set). 31 counting
 * passes over a 128-sample row vectorize and never branch on the data, unlike the
 * quickselect this replaced (its pivot branches mispredict on random weights). */
DZ_ISA_VARIANTS(kth_smallest_bits, (int32_t *out, const int32_t *s, int n, int k), (out, s, n, k)) {
    int32_t ans = 0;
    for (int b = 30; b >= 0; b--) {
        const int32_t t = ans | (int32_t)((1u << b) - 1u);
        int c = 0;
        for (int i = 0; i < n; i++) c += s[i] <= t;
        if (c <= k) ans |= (int32_t)(1u << b);
    }
    *out = ans;
}

/* tau of a row of `cols` elements at th (NaNs count as +inf: never perturbed). */
static float row_threshold(const void *th, int bf16, int64_t cols, float density) {
    int32_t s[SPARSE_SAMPLE];
    const int n = cols < SPARSE_SAMPLE ? (int)cols : SPARSE_SAMPLE;
    for (int64_t k = 0; k < n; k++) { /* element floor(k cols / n): n is SPARSE_SAMPLE or cols */
        const int64_t at = n == SPARSE_SAMPLE ? k * cols / SPARSE_SAMPLE : k;
        const float a = fabsf(theta_at(th, bf16, (size_t)at));
        s[k] = (int32_t)dz_zo_f2u(a == a ? a : INFINITY);
    }
    int rank = (int)ceilf(density * (float)n) - 1;
    rank = rank < 0 ? 0 : rank >= n ? n - 1 : rank;
    int32_t bits;
    kth_smallest_bits(&bits, s, n, rank);
    return dz_zo_u2f((uint32_t)bits);
}

/* ---- Elementwise kernels of a chunk ------------------------------------------------- */

/* SPARSE: z where |theta| <= tau (NaN: never), else 0. */
DZ_ISA_VARIANTS(mask_z, (float *z, const float *x, float tau, size_t n), (z, x, tau, n)) {
    for (size_t k = 0; k < n; k++) z[k] = fabsf(x[k]) <= tau ? z[k] : 0.0f;
}

/* LOWRANK: z_k = ((0 + u_0 v_0k) + u_1 v_1k + ...) * scale, v row m at v + m * ld. */
DZ_ISA_VARIANTS(lowrank_z, (float *z, const float *u, const float *v, size_t ld, int r, float scale, size_t n),
                (z, u, v, ld, r, scale, n)) {
    for (size_t k = 0; k < n; k++) z[k] = 0.0f;
    for (int m = 0; m < r; m++) {
        const float um = u[m], *vm = v + (size_t)m * ld;
        for (size_t k = 0; k < n; k++) z[k] = z[k] + um * vm[k];
    }
    for (size_t k = 0; k < n; k++) z[k] = z[k] * scale;
}

DZ_ISA_VARIANTS(round_chunk_bf16, (uint16_t *h, const float *x, const uint32_t *sr, size_t n), (h, x, sr, n)) {
    for (size_t k = 0; k < n; k++) h[k] = dz_bf16_round_stochastic(x[k], sr[k]);
}

/* ---- The span kernel ----------------------------------------------------------------- */

/* z of draw d for elements [c, c + len) of row `row` of tensor id (columns c..), x their
 * theta (SPARSE's mask), tau the row's threshold. */
static void z_segment(const dz_pipeline *p, int id, int64_t cols, int64_t row, int64_t c, size_t len, uint32_t d,
                      const float *x, float tau, const float *v, float *z) {
    if (p->z.shape == DZ_PZ_SPARSE) {
        p->be->ops->z_fill(p->be, z, p->z.seed, (uint32_t)id, d, (uint64_t)(row * cols + c), len, p->z.dist);
        mask_z(z, x, tau, len);
        return;
    }
    const int r = p->z.rank;
    float u[DZ_PIPELINE_MAX_RANK];
    dz_sz_gaussians(u, p->z.seed, DZ_PURPOSE_LOZO_U, (uint32_t)id, d, (uint64_t)(row * r), (size_t)r);
    lowrank_z(z, u, v + c, (size_t)cols, r, 1.0f / sqrtf((float)r), len);
}

/* theta of a chunk as floats: an f32 master itself, a bf16 one widened into buf. */
static const float *chunk_values(const void *t, int bf16, size_t n, float *buf) {
    if (!bf16) return (const float *)t;
    dz_zo_widen_bf16(buf, (const uint16_t *)t, n);
    return buf;
}

/* LOWRANK: V of tensor id for the window of `step` (draw >= 0: of that draw's step). */
static const float *v_of(const dz_pipeline *p, int id, uint32_t step, int64_t draw) {
    if (p->z.shape != DZ_PZ_LOWRANK) return NULL;
    const uint32_t w = window_of_step(p, draw >= 0 ? (uint32_t)draw / (uint32_t)p->z.q : step);
    return p->lowrank.v[w & 1] + p->lowrank.v_off[id];
}

/* Elements [c0, c0 + len) of one row: the update (u), then the pair (wp) from the result. */
static void row_piece(const dz_pipeline *p, int id, int64_t cols, int64_t row, int64_t c0, size_t len, void *th,
                      float *wp, float *wm, const dz_zo_update *u) {
    const int bf16 = dz_masters_bf16(p), sparse = p->z.shape == DZ_PZ_SPARSE;
    const size_t esz = bf16 ? 2 : 4;
    float z[SEG], acc[SEG], xb[SEG];
    uint32_t sr[SEG];
    if (u) {
        const uint32_t d0 = u->step * (uint32_t)u->q;
        const float tau = sparse ? row_threshold(th, bf16, cols, p->z.density) : 0.0f;
        const float *v = v_of(p, id, u->step, -1);
        for (size_t a = 0; a < len; a += SEG) {
            const size_t n = len - a < SEG ? len - a : SEG;
            char *t = (char *)th + a * esz;
            const float *x = chunk_values(t, bf16, n, xb);
            for (int j = 0; j < u->q; j++) {
                z_segment(p, id, cols, row, c0 + (int64_t)a, n, d0 + (uint32_t)j, x, tau, v, z);
                dz_zo_add_scaled(acc, u->g[j], z, n, j == 0);
            }
            if (bf16) {
                p->be->ops->philox_fill(p->be, sr, p->z.seed, DZ_PURPOSE_SR, (uint32_t)id, d0,
                                        (uint64_t)(row * cols + c0) + a, n);
                dz_zo_apply_update(acc, x, acc, n, u->q, u->lr, u->wd);
                round_chunk_bf16((uint16_t *)(void *)t, acc, sr, n);
            } else {
                dz_zo_apply_update((float *)(void *)t, x, acc, n, u->q, u->lr, u->wd);
            }
        }
    }
    if (!wp) return;
    const float tau = sparse ? row_threshold(th, bf16, cols, p->z.density) : 0.0f;
    const float *v = v_of(p, id, 0, (int64_t)p->draw);
    for (size_t a = 0; a < len; a += SEG) {
        const size_t n = len - a < SEG ? len - a : SEG;
        const float *x = chunk_values((const char *)th + a * esz, bf16, n, xb);
        z_segment(p, id, cols, row, c0 + (int64_t)a, n, p->draw, x, tau, v, z);
        dz_zo_make_pair(wp + a, wm + a, x, z, p->z.eps, n);
    }
}

void dz_sz_span(const dz_pipeline *p, int id, uint64_t i0, size_t n, void *th, float *wp, float *wm,
                const dz_zo_update *u) {
    const int64_t cols = dz_model_params(p->m)->params[id].cols;
    const size_t esz = dz_masters_bf16(p) ? 2 : 4;
    for (size_t a = 0; a < n;) {
        const uint64_t i = i0 + a;
        const int64_t row = (int64_t)(i / (uint64_t)cols), c = (int64_t)(i % (uint64_t)cols);
        const size_t len = (size_t)(cols - c) < n - a ? (size_t)(cols - c) : n - a;
        row_piece(p, id, cols, row, c, len, (char *)th + a * esz, wp ? wp + a : NULL, wm ? wm + a : NULL, u);
        a += len;
    }
}
