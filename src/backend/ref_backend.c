/* The reference backend: each op written the straightforward way, one thread, float ops
 * accumulated in double and rounded once, so that tests can hold every other backend to it
 * (tests/test_backend_ops.c). Buffers are host memory (dz_alloc), but every upload copies
 * (host_buffers 0), so a forward on it takes a device backend's staging path.
 *
 * The ZO ops are the contract of backend/zo_ops.h element by element: one Philox block per
 * element through the scalar dz_philox4x32_10, Box-Muller and the update in float in the
 * contract's order, so their bits are the CPU backend's. */
#include <math.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/zo_rng_v2.h"
#include "core/util.h"

static void ref_upload(const dz_backend *be, void *dst, const void *src, size_t n) {
    if (dst != src) memcpy(dst, src, n);
}

static const void *ref_upload_view(const dz_backend *be, void *dst, const void *src, size_t n) {
    ref_upload(be, dst, src, n);
    return dst;
}

static void ref_synchronize(const dz_backend *be) {}

static void ref_matmul(const dz_backend *be, float *y, const float *x, const float *w, const float *bias, int M, int N,
                       int K) {
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double acc = bias ? bias[j] : 0.0;
            for (int k = 0; k < K; k++) acc += (double)x[(size_t)i * K + k] * w[(size_t)j * K + k];
            y[(size_t)i * N + j] = (float)acc;
        }
}

static void ref_layernorm(const dz_backend *be, float *y, const float *x, const float *w, const float *b, int rows,
                          int dim, float eps) {
    for (int r = 0; r < rows; r++) {
        const float *xr = x + (size_t)r * dim;
        double mean = 0.0, var = 0.0;
        for (int i = 0; i < dim; i++) mean += xr[i];
        mean /= dim;
        for (int i = 0; i < dim; i++) var += (xr[i] - mean) * (xr[i] - mean);
        const double rstd = 1.0 / sqrt(var / dim + eps);
        for (int i = 0; i < dim; i++) y[(size_t)r * dim + i] = (float)((xr[i] - mean) * rstd * w[i] + (b ? b[i] : 0.0));
    }
}

static void ref_rmsnorm(const dz_backend *be, float *y, const float *x, const float *w, int rows, int dim, float eps) {
    for (int r = 0; r < rows; r++) {
        const float *xr = x + (size_t)r * dim;
        double sq = 0.0;
        for (int i = 0; i < dim; i++) sq += (double)xr[i] * xr[i];
        const double rstd = 1.0 / sqrt(sq / dim + eps);
        for (int i = 0; i < dim; i++) y[(size_t)r * dim + i] = (float)(xr[i] * rstd * w[i]);
    }
}

static void ref_rope(const dz_backend *be, float *x, int rows, const int *pos, int n_heads, int head_dim,
                     const float *cos_sin) {
    const int half = head_dim / 2;
    for (int r = 0; r < rows; r++)
        for (int h = 0; h < n_heads; h++) {
            float *v = x + ((size_t)r * n_heads + h) * head_dim;
            const float *cs = cos_sin + (size_t)pos[r] * head_dim;
            for (int i = 0; i < half; i++) {
                const double x0 = v[i], x1 = v[i + half], c = cs[i], s = cs[half + i];
                v[i] = (float)(x0 * c - x1 * s);
                v[i + half] = (float)(x0 * s + x1 * c);
            }
        }
}

/* Key/value row j of sequence b, kv head kvh: below n_virtual a virtual row (prefix
 * tuning), then position j - n_virtual from the prefix slot below start, else its own. */
static const float *kv_row(const float *virt, const float *const *prefix, const float *const *own,
                           const dz_attn_args *a, int b, int j, int kvh) {
    if (j < a->n_virtual) return virt + ((size_t)j * a->n_kv_heads + kvh) * a->head_dim;
    j -= a->n_virtual;
    const float *slot = j < a->start[b] ? prefix[b] : own[b];
    return slot + ((size_t)j * a->n_kv_heads + kvh) * a->head_dim;
}

static double score(const float *qi, const dz_attn_args *a, int b, int j, int kvh) {
    const float *k = kv_row(a->virtual_k, a->prefix_k, a->own_k, a, b, j, kvh);
    double d = 0.0;
    for (int t = 0; t < a->head_dim; t++) d += (double)qi[t] * k[t];
    return d * a->scale;
}

/* Three passes over the keys of each query (max, sum, weighted values): no scratch. */
static void ref_attention(const dz_backend *be, float *out, const float *q, const dz_attn_args *a) {
    const int hd = a->head_dim, qstride = a->n_heads * hd, group = a->n_heads / a->n_kv_heads;
    for (int b = 0; b < a->batch; b++)
        for (int i = 0; i < (a->row0 ? a->row0[b + 1] - a->row0[b] : a->n_new); i++)
            for (int h = 0; h < a->n_heads; h++) {
                const size_t row = (a->row0 ? (size_t)a->row0[b] : (size_t)b * a->n_new) + i;
                const float *qi = q + row * qstride + (size_t)h * hd;
                float *oi = out + row * qstride + (size_t)h * hd;
                const int pos = a->start[b] + i, kvh = h / group;
                if (pos >= a->lengths[b]) { /* padding */
                    for (int t = 0; t < hd; t++) oi[t] = 0.0f;
                    continue;
                }
                double mx = -INFINITY, sum = 0.0;
                const int keys = a->n_virtual + pos + 1;
                for (int j = 0; j < keys; j++) mx = fmax(mx, score(qi, a, b, j, kvh));
                for (int j = 0; j < keys; j++) sum += exp(score(qi, a, b, j, kvh) - mx);
                for (int t = 0; t < hd; t++) {
                    double acc = 0.0;
                    for (int j = 0; j < keys; j++)
                        acc += exp(score(qi, a, b, j, kvh) - mx) / sum * kv_row(a->virtual_v, a->prefix_v, a->own_v, a, b, j, kvh)[t];
                    oi[t] = (float)acc;
                }
            }
}

static void ref_relu(const dz_backend *be, float *x, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

static void ref_swiglu(const dz_backend *be, float *gate, const float *up, size_t n) {
    for (size_t i = 0; i < n; i++) gate[i] = (float)(gate[i] / (1.0 + exp(-(double)gate[i])) * up[i]);
}

static void ref_add(const dz_backend *be, float *y, const float *x, size_t n) {
    for (size_t i = 0; i < n; i++) y[i] = (float)((double)y[i] + x[i]);
}

static void ref_fill(const dz_backend *be, float *x, float v, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] = v;
}

static void ref_copy_rows(const dz_backend *be, float *dst, const int *dst_rows, const float *src, const int *src_rows,
                          int nrows, int cols) {
    for (int i = 0; i < nrows; i++)
        for (int c = 0; c < cols; c++)
            dst[(size_t)(dst_rows ? dst_rows[i] : i) * cols + c] = src[(size_t)(src_rows ? src_rows[i] : i) * cols + c];
}

static void ref_logsumexp_update(const dz_backend *be, const float *logits, int rows, int n, float *m, float *s) {
    for (int r = 0; r < rows; r++) {
        const float *l = logits + (size_t)r * n;
        double mx = m[r];
        for (int i = 0; i < n; i++) mx = fmax(mx, l[i]);
        double sum = m[r] == -INFINITY ? 0.0 : s[r] * exp(m[r] - mx);
        for (int i = 0; i < n; i++) sum += exp(l[i] - mx);
        m[r] = (float)mx;
        s[r] = (float)sum;
    }
}

static void ref_pick_target(const dz_backend *be, float *out, const float *logits, int rows, int n, const int *targets,
                            int v0) {
    for (int r = 0; r < rows; r++)
        if (targets[r] >= v0 && targets[r] < v0 + n) out[r] = logits[(size_t)r * n + (targets[r] - v0)];
}

static void ref_logprob_finish(const dz_backend *be, float *out, const float *target, const float *m, const float *s,
                               int rows) {
    for (int r = 0; r < rows; r++) out[r] = (float)((double)target[r] - m[r] - log(s[r]));
}

/* ---- ZO: the contract, one element at a time ---- */

static float z_at(uint64_t seed, uint32_t tensor, uint32_t draw, uint64_t i, dz_zdist dist) {
    if (dist & DZ_Z_GAUSSIAN_V2) return dz_zv2_at(seed, tensor, draw, i, dist & DZ_Z_RADEMACHER);
    uint32_t x[4];
    dz_philox_block_of(x, seed, DZ_PURPOSE_Z, tensor, draw, i);
    const unsigned lane = (unsigned)(i & 3);
    if (dist == DZ_Z_RADEMACHER) return dz_rademacher(x[lane]);
    float pair[2];
    dz_box_muller(x[lane & 2], x[(lane & 2) + 1], &pair[0], &pair[1]);
    return pair[lane & 1];
}

static void ref_z_fill(const dz_backend *be, float *z, uint64_t seed, uint32_t tensor, uint32_t draw, uint64_t i0,
                       size_t n, dz_zdist dist) {
    for (size_t k = 0; k < n; k++) z[k] = z_at(seed, tensor, draw, i0 + k, dist);
}

static void ref_philox_fill(const dz_backend *be, uint32_t *x, uint64_t seed, uint32_t purpose, uint32_t tensor,
                            uint32_t draw, uint64_t i0, size_t n) {
    for (size_t k = 0; k < n; k++) {
        uint32_t w[4];
        dz_philox_block_of(w, seed, purpose, tensor, draw, i0 + k);
        x[k] = w[(i0 + k) & 3];
    }
}

/* Where a span's theta is read (f32 or bf16) and, with an update, written (the same array). */
typedef struct master {
    const float *in_f32;
    const uint16_t *in_bf16;
    float *out_f32;
    uint16_t *out_bf16;
} master;

/* One span: theta updated by upd (if any) and stored back in its own type, then the pair
 * (if w_plus) for next_draw from the stored value. */
static void ref_span(master th_at, float *w_plus, float *w_minus, size_t n, const dz_zo_update *upd, float eps,
                     uint64_t seed, uint32_t tensor, uint32_t next_draw, uint64_t i0, dz_zdist dist) {
    for (size_t k = 0; k < n; k++) {
        const uint64_t i = i0 + k;
        float th = th_at.in_f32 ? th_at.in_f32[k] : dz_zo_u2f((uint32_t)th_at.in_bf16[k] << 16);
        if (upd) {
            const uint32_t d0 = upd->step * (uint32_t)upd->q;
            float u = 0.0f;
            for (int j = 0; j < upd->q; j++) u = u + upd->g[j] * z_at(seed, tensor, d0 + (uint32_t)j, i, dist);
            float v = u;
            if (upd->q > 1) v = v / (float)upd->q;
            if (upd->wd != 0.0f) v = v + upd->wd * th;
            th = th - upd->lr * v;
            if (th_at.out_f32) {
                th_at.out_f32[k] = th;
            } else {
                uint32_t x[4];
                dz_philox_block_of(x, seed, DZ_PURPOSE_SR, tensor, d0, i);
                th_at.out_bf16[k] = dz_bf16_round_stochastic(th, x[i & 3]);
                th = dz_zo_u2f((uint32_t)th_at.out_bf16[k] << 16);
            }
        }
        if (w_plus) {
            const float e = eps * z_at(seed, tensor, next_draw, i, dist);
            w_plus[k] = th + e;
            w_minus[k] = th - e;
        }
    }
}

static void ref_perturb_pair(const dz_backend *be, const float *theta, float *w_plus, float *w_minus, size_t n,
                             float eps, uint64_t seed, uint32_t tensor, uint32_t draw, uint64_t i0, dz_zdist dist) {
    ref_span((master){.in_f32 = theta}, w_plus, w_minus, n, NULL, eps, seed, tensor, draw, i0, dist);
}

static void ref_perturb_pair_bf16(const dz_backend *be, const uint16_t *theta, float *w_plus, float *w_minus, size_t n,
                                  float eps, uint64_t seed, uint32_t tensor, uint32_t draw, uint64_t i0,
                                  dz_zdist dist) {
    ref_span((master){.in_bf16 = theta}, w_plus, w_minus, n, NULL, eps, seed, tensor, draw, i0, dist);
}

static void ref_update_f32(const dz_backend *be, float *theta, size_t n, const float *g, int q, float lr, float wd,
                           uint64_t seed, uint32_t tensor, uint32_t step, uint64_t i0, dz_zdist dist) {
    const dz_zo_update upd = {.g = g, .q = q, .lr = lr, .wd = wd, .step = step};
    ref_span((master){.in_f32 = theta, .out_f32 = theta}, NULL, NULL, n, &upd, 0.0f, seed, tensor, 0, i0, dist);
}

static void ref_update_bf16(const dz_backend *be, uint16_t *theta, size_t n, const float *g, int q, float lr, float wd,
                            uint64_t seed, uint32_t tensor, uint32_t step, uint64_t i0, dz_zdist dist) {
    const dz_zo_update upd = {.g = g, .q = q, .lr = lr, .wd = wd, .step = step};
    ref_span((master){.in_bf16 = theta, .out_bf16 = theta}, NULL, NULL, n, &upd, 0.0f, seed, tensor, 0, i0, dist);
}

static void ref_update_then_perturb_f32(const dz_backend *be, float *theta, float *w_plus, float *w_minus, size_t n,
                                        const dz_zo_update *upd, float eps, uint64_t seed, uint32_t tensor,
                                        uint32_t next_draw, uint64_t i0, dz_zdist dist) {
    const master th = {.in_f32 = theta, .out_f32 = theta};
    ref_span(th, w_plus, w_minus, n, upd, eps, seed, tensor, next_draw, i0, dist);
}

static void ref_update_then_perturb_bf16(const dz_backend *be, uint16_t *theta, float *w_plus, float *w_minus,
                                         size_t n, const dz_zo_update *upd, float eps, uint64_t seed, uint32_t tensor,
                                         uint32_t next_draw, uint64_t i0, dz_zdist dist) {
    const master th = {.in_bf16 = theta, .out_bf16 = theta};
    ref_span(th, w_plus, w_minus, n, upd, eps, seed, tensor, next_draw, i0, dist);
}

/* Plain host memory: the instance holds no state. */
static void *ref_alloc(const dz_backend *be, size_t bytes) { return dz_alloc(bytes); }
static void ref_free(const dz_backend *be, void *buf) { dz_free(buf); }

static const dz_backend_ops ref_ops = {
    .alloc = ref_alloc,
    .free = ref_free,
    .upload = ref_upload,
    .upload_view = ref_upload_view,
    .download = ref_upload,
    .synchronize = ref_synchronize,
    .matmul = ref_matmul,
    .layernorm = ref_layernorm,
    .rmsnorm = ref_rmsnorm,
    .rope = ref_rope,
    .attention = ref_attention,
    .relu = ref_relu,
    .swiglu = ref_swiglu,
    .add = ref_add,
    .fill = ref_fill,
    .copy_rows = ref_copy_rows,
    .logsumexp_update = ref_logsumexp_update,
    .pick_target = ref_pick_target,
    .logprob_finish = ref_logprob_finish,
    .z_fill = ref_z_fill,
    .philox_fill = ref_philox_fill,
    .perturb_pair = ref_perturb_pair,
    .perturb_pair_bf16 = ref_perturb_pair_bf16,
    .update_f32 = ref_update_f32,
    .update_bf16 = ref_update_bf16,
    .update_then_perturb_f32 = ref_update_then_perturb_f32,
    .update_then_perturb_bf16 = ref_update_then_perturb_bf16,
};

/* The one instance: no state, so every caller may share it (dz_backend_free leaves it). */
static dz_backend ref_backend = {.name = "ref", .host_buffers = 0, .ops = &ref_ops};

const dz_backend *dz_backend_ref(void) { return &ref_backend; }
