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
 * w+- = theta +- (eps z). Plain scalar loops, -ffp-contract=off: the same bits on every
 * thread count, ISA level and backend. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "pipeline/internal.h"

enum { SEG = 512, SPARSE_SAMPLE = 128 };

int dz_sz_applies(const dz_pipeline *p, int id) {
    const dz_param *t = &dz_model_params(p->m)->params[id];
    return p->z.shape != DZ_PZ_DENSE && t->rows > 1 && t->cols > 1;
}

/* Gaussians of counter (j, purpose, tensor, draw) for elements i0 .. i0+n-1, the contract's
 * word pairs through Box-Muller (the same mapping as z of purpose 0). */
void dz_sz_gaussians(float *out, uint64_t seed, uint32_t purpose, uint32_t tensor, uint32_t draw, uint64_t i0,
                     size_t n) {
    const uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
    uint64_t i = i0;
    const uint64_t end = i0 + n;
    while (i < end) {
        const uint32_t ctr[4] = {(uint32_t)(i >> 2), purpose, tensor, draw};
        uint32_t x[4];
        float z[4];
        dz_philox4x32_10(ctr, key, x);
        dz_box_muller(x[0], x[1], &z[0], &z[1]);
        dz_box_muller(x[2], x[3], &z[2], &z[3]);
        for (unsigned lane = (unsigned)(i & 3); lane < 4 && i < end; lane++, i++) out[i - i0] = z[lane];
    }
}

/* ---- LOWRANK: the V of two windows -------------------------------------------------- */

static uint32_t window_of_step(const dz_pipeline *p, uint32_t step) { return step / (uint32_t)p->z.nu; }

size_t dz_pipeline_shape_bytes_for(const dz_param_table *t, const dz_pipeline_perturbation *z) {
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

/* The k-th smallest (0-based) of x[0..n-1] (reordered): Hoare's selection. The value is the
 * order statistic itself, whichever pivots lead there. */
static float kth_smallest(float *x, int n, int k) {
    int lo = 0, hi = n - 1;
    while (lo < hi) {
        const float pivot = x[lo + (hi - lo) / 2];
        int i = lo, j = hi;
        while (i <= j) {
            while (x[i] < pivot) i++;
            while (x[j] > pivot) j--;
            if (i <= j) {
                const float t = x[i];
                x[i] = x[j], x[j] = t;
                i++, j--;
            }
        }
        if (k <= j) hi = j;
        else if (k >= i) lo = i;
        else return x[k];
    }
    return x[k];
}

/* tau of a row of `cols` elements at th (NaNs count as +inf: never perturbed). */
static float row_threshold(const void *th, int bf16, int64_t cols, float density) {
    float s[SPARSE_SAMPLE];
    const int n = cols < SPARSE_SAMPLE ? (int)cols : SPARSE_SAMPLE;
    int64_t at = 0, rem = 0; /* at = floor(k cols / n), stepped without a division */
    for (int k = 0; k < n; k++) {
        const float a = fabsf(theta_at(th, bf16, (size_t)at));
        s[k] = a == a ? a : INFINITY;
        for (rem += cols; rem >= n; rem -= n) at++;
    }
    int rank = (int)ceilf(density * (float)n) - 1;
    rank = rank < 0 ? 0 : rank >= n ? n - 1 : rank;
    return kth_smallest(s, n, rank);
}

/* ---- The span kernel ----------------------------------------------------------------- */

/* z of draw d for elements [c, c + len) of row `row` of tensor id (columns c..), th at
 * column c (SPARSE's mask), tau the row's threshold. */
static void z_segment(const dz_pipeline *p, int id, int64_t cols, int64_t row, int64_t c, size_t len, uint32_t d,
                      const void *th, int bf16, float tau, const float *v, float *z) {
    if (p->z.shape == DZ_PZ_SPARSE) {
        p->be->z_fill(z, p->z.seed, (uint32_t)id, d, (uint64_t)(row * cols + c), len, p->z.dist);
        for (size_t k = 0; k < len; k++)
            if (!(fabsf(theta_at(th, bf16, k)) <= tau)) z[k] = 0.0f;
        return;
    }
    const int r = p->z.rank;
    float u[DZ_PIPELINE_MAX_RANK];
    dz_sz_gaussians(u, p->z.seed, DZ_PURPOSE_LOZO_U, (uint32_t)id, d, (uint64_t)(row * r), (size_t)r);
    const float scale = 1.0f / sqrtf((float)r);
    for (size_t k = 0; k < len; k++) z[k] = 0.0f;
    for (int m = 0; m < r; m++) { /* z_j = ((0 + u_0 v_0j) + u_1 v_1j) + ...: the same order for every j */
        const float um = u[m], *vm = v + (size_t)m * (size_t)cols + c;
        for (size_t k = 0; k < len; k++) z[k] = z[k] + um * vm[k];
    }
    for (size_t k = 0; k < len; k++) z[k] = z[k] * scale;
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
    const int bf16 = dz_masters_bf16(p);
    const size_t esz = bf16 ? 2 : 4;
    float z[SEG], acc[SEG];
    uint32_t sr[SEG];
    if (u) {
        const uint32_t d0 = u->step * (uint32_t)u->q;
        const float tau = p->z.shape == DZ_PZ_SPARSE ? row_threshold(th, bf16, cols, p->z.density) : 0.0f;
        const float *v = v_of(p, id, u->step, -1);
        for (size_t a = 0; a < len; a += SEG) {
            const size_t n = len - a < SEG ? len - a : SEG;
            char *t = (char *)th + a * esz;
            for (size_t k = 0; k < n; k++) acc[k] = 0.0f;
            for (int j = 0; j < u->q; j++) {
                z_segment(p, id, cols, row, c0 + (int64_t)a, n, d0 + (uint32_t)j, t, bf16, tau, v, z);
                for (size_t k = 0; k < n; k++) acc[k] = acc[k] + u->g[j] * z[k];
            }
            if (bf16)
                p->be->philox_fill(sr, p->z.seed, DZ_PURPOSE_SR, (uint32_t)id, d0, (uint64_t)(row * cols + c0) + a, n);
            const float qf = (float)u->q, wd = u->wd, lr = u->lr;
            if (u->q > 1)
                for (size_t k = 0; k < n; k++) acc[k] = acc[k] / qf;
            if (bf16) {
                uint16_t *tb = (uint16_t *)(void *)t;
                for (size_t k = 0; k < n; k++) {
                    const float x = theta_at(tb, 1, k), vv = wd != 0.0f ? acc[k] + wd * x : acc[k];
                    tb[k] = dz_bf16_round_stochastic(x - lr * vv, sr[k]);
                }
            } else {
                float *tf = (float *)(void *)t;
                for (size_t k = 0; k < n; k++) {
                    const float x = tf[k], vv = wd != 0.0f ? acc[k] + wd * x : acc[k];
                    tf[k] = x - lr * vv;
                }
            }
        }
    }
    if (!wp) return;
    const float tau = p->z.shape == DZ_PZ_SPARSE ? row_threshold(th, bf16, cols, p->z.density) : 0.0f;
    const float *v = v_of(p, id, 0, (int64_t)p->draw);
    for (size_t a = 0; a < len; a += SEG) {
        const size_t n = len - a < SEG ? len - a : SEG;
        const char *t = (const char *)th + a * esz;
        z_segment(p, id, cols, row, c0 + (int64_t)a, n, p->draw, t, bf16, tau, v, z);
        const float eps = p->z.eps;
        float *pa = wp + a, *ma = wm + a;
        if (bf16) {
            for (size_t k = 0; k < n; k++) {
                const float x = theta_at(t, 1, k), e = eps * z[k];
                pa[k] = x + e, ma[k] = x - e;
            }
        } else {
            const float *tf = (const float *)(const void *)t;
            for (size_t k = 0; k < n; k++) {
                const float x = tf[k], e = eps * z[k];
                pa[k] = x + e, ma[k] = x - e;
            }
        }
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
