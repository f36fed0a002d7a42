/* The CPU backend: distzo's own GEMM (gemm.c), loops on distzo's thread pool for everything
 * else; the ZO ops are cpu_philox.c and cpu_zo.c. Buffers are host memory (dz_alloc), and
 * uploading a weight is zero-copy.
 * Determinism: rows are split across threads with a static schedule and each row's
 * arithmetic runs in a fixed order, so results do not depend on the thread count. */
#include <math.h>
#include <string.h>

#include "core/threads.h"
#include "core/util.h"
#include "backend/backend.h"
#include "backend/gemm.h"
#include "backend/cpu_simd.h"
#include "backend/cpu_zo.h"

/* Element-wise ops run in spans of this many elements, one task each. */
enum { ELEMENT_SPAN = 4096 };

static int spans_of(size_t n) { return (int)((n + ELEMENT_SPAN - 1) / ELEMENT_SPAN); }

/* Arguments of the row-wise ops (each task is one row r of dim elements). */
typedef struct row_op {
    float *y;
    const float *x, *w, *b;
    int dim;
    float eps;
} row_op;

static void cpu_upload(const dz_backend *be, void *dst, const void *src, size_t n) {
    if (dst != src) memcpy(dst, src, n);
}

static const void *cpu_upload_view(const dz_backend *be, void *dst, const void *src, size_t n) { return src; }

static void cpu_download(const dz_backend *be, void *dst, const void *src, size_t n) {
    if (dst != src) memcpy(dst, src, n);
}

static void cpu_synchronize(const dz_backend *be) {}

static void cpu_matmul(const dz_backend *be, float *y, const float *x, const float *w, const float *bias, int M, int N,
                       int K) {
    dz_gemm_linear(y, x, w, bias, M, N, K);
}

static void cpu_matmul_pair(const dz_backend *be, float *const y[2], const float *const x[2], const int M[2],
                            float *theta, const float *const bias[2], int N, int K, const dz_gemm_perturb *pt) {
    dz_gemm_linear_pair(y, x, M, theta, bias, N, K, pt);
}

static void layernorm_row(void *ctx, int r, int thread) {
    const row_op *o = ctx;
    const int dim = o->dim;
    const float *xr = o->x + (size_t)r * dim, *w = o->w, *b = o->b;
    float *yr = o->y + (size_t)r * dim;
    double sum = 0.0, sq = 0.0;
    for (int i = 0; i < dim; i++) sum += xr[i];
    double mean = sum / dim;
    for (int i = 0; i < dim; i++) {
        double d = xr[i] - mean;
        sq += d * d;
    }
    float rstd = (float)(1.0 / sqrt(sq / dim + o->eps));
    float m = (float)mean;
    for (int i = 0; i < dim; i++) yr[i] = (xr[i] - m) * rstd * w[i] + (b ? b[i] : 0.0f);
}

static void cpu_layernorm(const dz_backend *be, float *y, const float *x, const float *w, const float *b, int rows,
                          int dim, float eps) {
    row_op o = {.y = y, .x = x, .w = w, .b = b, .dim = dim, .eps = eps};
    dz_parallel_for(rows, layernorm_row, &o);
}

static void rmsnorm_row(void *ctx, int r, int thread) {
    const row_op *o = ctx;
    const int dim = o->dim;
    const float *xr = o->x + (size_t)r * dim, *w = o->w;
    float *yr = o->y + (size_t)r * dim;
    double sq = 0.0;
    for (int i = 0; i < dim; i++) sq += (double)xr[i] * xr[i];
    float rstd = (float)(1.0 / sqrt(sq / dim + o->eps));
    for (int i = 0; i < dim; i++) yr[i] = w[i] * (xr[i] * rstd);
}

static void cpu_rmsnorm(const dz_backend *be, float *y, const float *x, const float *w, int rows, int dim, float eps) {
    row_op o = {.y = y, .x = x, .w = w, .dim = dim, .eps = eps};
    dz_parallel_for(rows, rmsnorm_row, &o);
}

typedef struct rope_op {
    float *x;
    const int *positions;
    int n_heads, head_dim;
    const float *cos_sin;
} rope_op;

static void rope_row(void *ctx, int r, int thread) {
    const rope_op *o = ctx;
    const int half = o->head_dim / 2;
    const float *c = o->cos_sin + (size_t)o->positions[r] * o->head_dim, *s = c + half;
    for (int h = 0; h < o->n_heads; h++) {
        float *v = o->x + ((size_t)r * o->n_heads + h) * o->head_dim;
        for (int i = 0; i < half; i++) {
            const float x0 = v[i], x1 = v[i + half];
            v[i] = x0 * c[i] - x1 * s[i];
            v[i + half] = x0 * s[i] + x1 * c[i];
        }
    }
}

static void cpu_rope(const dz_backend *be, float *x, int rows, const int *positions, int n_heads, int head_dim,
                     const float *cos_sin) {
    rope_op o = {x, positions, n_heads, head_dim, cos_sin};
    dz_parallel_for(rows, rope_row, &o);
}

/* In-place softmax of each row's first visible[i] entries; the rest of the row is zeroed.
 * Inlined into attend_group's variants. */
DZ_ISA_INLINE void softmax_prefix(float *s, int cols, int visible) {
    float mx = -INFINITY;
    for (int j = 0; j < visible; j++) mx = s[j] > mx ? s[j] : mx;
    for (int j = 0; j < visible; j++) s[j] = dz_expf(s[j] - mx);
    float part[16] = {0};
    int j = 0;
    for (; j + 16 <= visible; j += 16)
        for (int k = 0; k < 16; k++) part[k] += s[j + k];
    for (int k = 0; j < visible; j++, k++) part[k] += s[j];
    for (int w = 8; w >= 1; w /= 2)
        for (int k = 0; k < w; k++) part[k] += part[k + w];
    const float inv = 1.0f / part[0];
    for (j = 0; j < visible; j++) s[j] *= inv;
    for (; j < cols; j++) s[j] = 0.0f;
}

/* Attention works on blocks of ATTN_ROWS query rows: their scores (16 keys at a time) and
 * their outputs (16 head dimensions at a time) accumulate in registers, each key row and
 * value row loaded once for the block (backend/attention_tile.h, one copy per vector width). */
enum { ATTN_ROWS = 4 };

/* Where a group's keys (or values) come from: key index j < nv is virtual row j (prefix
 * tuning), then position j - nv, from the prefix slot below start, else the own slot. */
typedef struct key_source {
    const float *virt, *pre, *own;
    int nv, start;
    size_t stride;
} key_source;

DZ_ISA_INLINE const float *key_at(const key_source *ks, int j) {
    if (j < ks->nv) return ks->virt + (size_t)j * ks->stride;
    j -= ks->nv;
    return (j < ks->start ? ks->pre : ks->own) + (size_t)j * ks->stride;
}

/* Row j and the end (<= limit) of the run of rows after it that lie one stride apart, so
 * the hot loops walk a pointer without a test per key. */
DZ_ISA_INLINE const float *key_run(const key_source *ks, int j, int limit, int *end) {
    const int bound = j < ks->nv ? ks->nv : j < ks->nv + ks->start ? ks->nv + ks->start : limit;
    *end = bound < limit ? bound : limit;
    return key_at(ks, j);
}

#define ATTN_W 16
#define ATTN_FN(name) name##_w16
#include "backend/attention_tile.h"
#undef ATTN_W
#undef ATTN_FN
#define ATTN_W 8
#define ATTN_FN(name) name##_w8
#include "backend/attention_tile.h"
#undef ATTN_W
#undef ATTN_FN
#define ATTN_W 4
#define ATTN_FN(name) name##_w4
#include "backend/attention_tile.h"
#undef ATTN_W
#undef ATTN_FN

/* The tiles of the level's vector width: isa is a constant in each variant. */
#define ATTN_AT_WIDTH(isa, name, ...)                                                   \
    ((isa) == DZ_ISA_AVX512 ? name##_w16(__VA_ARGS__)                                   \
     : (isa) == DZ_ISA_AVX2 ? name##_w8(__VA_ARGS__) : name##_w4(__VA_ARGS__))

/* One sequence and one key/value head with the query heads that share it (GQA). Keys are
 * first transposed, once for the group, into kt[hd][kpad]; then each head's query rows go
 * in blocks of ATTN_ROWS (block_scores, the softmax of each row, block_values). Query
 * rows at padding positions get zeros. Per element the summation order is fixed: the
 * same bits as one row at a time. */
DZ_ISA_VARIANTS(attend_group, (float *out, const float *q, float *scratch, int b, int kvh, const dz_attn_args *a),
                (out, q, scratch, b, kvh, a)) {
    const int hd = a->head_dim, qstride = a->n_heads * hd, kvstride = a->n_kv_heads * hd;
    const int group = a->n_heads / a->n_kv_heads, start = a->start[b], len = a->lengths[b];
    const size_t row0 = a->row0 ? (size_t)a->row0[b] : (size_t)b * a->n_new;
    const int rows = a->row0 ? a->row0[b + 1] - a->row0[b] : a->n_new;
    int nq = len - start < rows ? len - start : rows; /* real query rows */
    if (nq < 0) nq = 0;
    for (int h = kvh * group; h < (kvh + 1) * group; h++)
        for (int i = nq; i < rows; i++) memset(out + (row0 + i) * qstride + (size_t)h * hd, 0, sizeof(float) * hd);
    if (nq == 0) return;
    const int nv = a->n_virtual, kmax = nv + start + nq, kpad = (kmax + 15) / 16 * 16;
    const size_t head = (size_t)kvh * hd;
    const key_source ks = {nv ? a->virtual_k + head : NULL, a->prefix_k[b] + head, a->own_k[b] + head, nv, start, kvstride};
    const key_source vs = {nv ? a->virtual_v + head : NULL, a->prefix_v[b] + head, a->own_v[b] + head, nv, start, kvstride};
    float *kt = scratch, *sc = scratch + (size_t)hd * kpad;
    for (int d = 0; d < hd; d++) {
        float *row = kt + (size_t)d * kpad;
        for (int j = 0, end; j < kmax;)
            for (const float *p = key_run(&ks, j, kmax, &end) + d; j < end; j++, p += kvstride) row[j] = *p;
        for (int j = kmax; j < kpad; j++) row[j] = 0.0f;
    }
    for (int h = kvh * group; h < (kvh + 1) * group; h++)
        for (int i0 = 0; i0 < nq; i0 += ATTN_ROWS) {
            const int nr = nq - i0 < ATTN_ROWS ? nq - i0 : ATTN_ROWS, nk0 = nv + start + i0 + 1;
            const float *qr[ATTN_ROWS];
            float *orow[ATTN_ROWS];
            for (int r = 0; r < ATTN_ROWS; r++) { /* a short block repeats its last row (not stored) */
                const size_t at = (row0 + i0 + (r < nr ? r : nr - 1)) * qstride + (size_t)h * hd;
                qr[r] = q + at, orow[r] = out + at;
            }
            ATTN_AT_WIDTH(isa, block_scores, sc, qr, kt, kpad, hd, (nk0 + nr - 1 + 15) / 16);
            for (int r = 0; r < nr; r++) {
                float *s = sc + (size_t)r * kpad;
                for (int j = 0; j < nk0 + r; j++) s[j] *= a->scale;
                softmax_prefix(s, nk0 + r, nk0 + r);
            }
            ATTN_AT_WIDTH(isa, block_values, orow, sc, kpad, nr, nk0, hd, &vs);
        }
}

typedef struct attn_op {
    float *out;
    const float *q;
    const dz_attn_args *a;
    int chunks;
} attn_op;

/* Chunk c of the (sequence, key/value head) pairs, a contiguous range, with scratch slot
 * c: the slot follows the task, so no thread needs to know its id. */
static void attend_chunk(void *ctx, int c, int thread) {
    const attn_op *o = ctx;
    const dz_attn_args *a = o->a;
    const int64_t pairs = (int64_t)a->batch * a->n_kv_heads;
    float *scratch = a->scratch + (size_t)c * dz_attn_scratch_floats(a->head_dim, a->max_keys);
    for (int t = (int)(pairs * c / o->chunks); t < (int)(pairs * (c + 1) / o->chunks); t++)
        attend_group(o->out, o->q, scratch, t / a->n_kv_heads, t % a->n_kv_heads, a);
}

/* One chunk per thread, as many as there are scratch slots. */
static void cpu_attention(const dz_backend *be, float *out, const float *q, const dz_attn_args *a) {
    const int threads = dz_parallel_threads();
    attn_op o = {out, q, a, threads < a->scratch_threads ? threads : a->scratch_threads};
    dz_parallel_for(o.chunks, attend_chunk, &o);
}

/* Arguments of the element-wise ops (task k: elements [k*ELEMENT_SPAN, ...) of n). */
typedef struct elementwise_op {
    float *y;
    const float *x;
    size_t n;
} elementwise_op;

static size_t span_start(int k) { return (size_t)k * ELEMENT_SPAN; }

static size_t span_len(const elementwise_op *o, int k) {
    return o->n - span_start(k) < ELEMENT_SPAN ? o->n - span_start(k) : ELEMENT_SPAN;
}

static void relu_span(void *ctx, int k, int thread) {
    const elementwise_op *o = ctx;
    float *x = o->y + span_start(k);
    for (size_t i = 0, n = span_len(o, k); i < n; i++) x[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

static void cpu_relu(const dz_backend *be, float *x, size_t n) {
    elementwise_op o = {.y = x, .n = n};
    dz_parallel_for(spans_of(n), relu_span, &o);
}

DZ_ISA_VARIANTS(swiglu_span, (float *gate, const float *up, size_t n), (gate, up, n)) {
    for (size_t i = 0; i < n; i++) gate[i] = gate[i] / (1.0f + dz_expf(-gate[i])) * up[i];
}

static void swiglu_task(void *ctx, int k, int thread) {
    const elementwise_op *o = ctx;
    swiglu_span(o->y + span_start(k), o->x + span_start(k), span_len(o, k));
}

static void cpu_swiglu(const dz_backend *be, float *gate, const float *up, size_t n) {
    elementwise_op o = {gate, up, n};
    dz_parallel_for(spans_of(n), swiglu_task, &o);
}

static void add_span(void *ctx, int k, int thread) {
    const elementwise_op *o = ctx;
    float *y = o->y + span_start(k);
    const float *x = o->x + span_start(k);
    for (size_t i = 0, n = span_len(o, k); i < n; i++) y[i] += x[i];
}

static void cpu_add(const dz_backend *be, float *y, const float *x, size_t n) {
    elementwise_op o = {y, x, n};
    dz_parallel_for(spans_of(n), add_span, &o);
}

DZ_ISA_VARIANTS(logsumexp_row, (const float *l, int n, float *m, float *s), (l, n, m, s)) {
    float mx = *m;
    for (int i = 0; i < n; i++) mx = l[i] > mx ? l[i] : mx;
    float acc = *m == -INFINITY ? 0.0f : *s * dz_expf(*m - mx);
    float part[16] = {0};
    int i = 0;
    for (; i + 16 <= n; i += 16)
        for (int j = 0; j < 16; j++) part[j] += dz_expf(l[i + j] - mx);
    for (int j = 0; i < n; i++, j++) part[j] += dz_expf(l[i] - mx);
    for (int w = 8; w >= 1; w /= 2)
        for (int j = 0; j < w; j++) part[j] += part[j + w];
    *m = mx;
    *s = acc + part[0];
}

typedef struct logsumexp_op {
    const float *logits;
    int n;
    float *m, *s;
} logsumexp_op;

static void logsumexp_task(void *ctx, int r, int thread) {
    const logsumexp_op *o = ctx;
    logsumexp_row(o->logits + (size_t)r * o->n, o->n, o->m + r, o->s + r);
}

static void cpu_logsumexp_update(const dz_backend *be, const float *logits, int rows, int n, float *m, float *s) {
    logsumexp_op o = {logits, n, m, s};
    dz_parallel_for(rows, logsumexp_task, &o);
}

static void fill_span(void *ctx, int k, int thread) {
    const elementwise_op *o = ctx;
    float *x = o->y + span_start(k);
    const float v = *o->x;
    for (size_t i = 0, n = span_len(o, k); i < n; i++) x[i] = v;
}

static void cpu_fill(const dz_backend *be, float *x, float v, size_t n) {
    elementwise_op o = {x, &v, n};
    dz_parallel_for(spans_of(n), fill_span, &o);
}

/* Rows are a few KB each and few: one thread, no task overhead. */
static void cpu_copy_rows(const dz_backend *be, float *dst, const int *dst_rows, const float *src, const int *src_rows,
                          int nrows, int cols) {
    for (int i = 0; i < nrows; i++)
        memcpy(dst + (size_t)(dst_rows ? dst_rows[i] : i) * cols, src + (size_t)(src_rows ? src_rows[i] : i) * cols,
               sizeof(float) * (size_t)cols);
}

static void cpu_pick_target(const dz_backend *be, float *out, const float *logits, int rows, int n, const int *targets,
                            int v0) {
    for (int r = 0; r < rows; r++)
        if (targets[r] >= v0 && targets[r] < v0 + n) out[r] = logits[(size_t)r * n + (targets[r] - v0)];
}

static void cpu_logprob_finish(const dz_backend *be, float *out, const float *target, const float *m, const float *s,
                               int rows) {
    for (int r = 0; r < rows; r++) out[r] = target[r] - m[r] - logf(s[r]);
}

/* Plain host memory: the instance holds no state. */
static void *cpu_alloc(const dz_backend *be, size_t bytes) { return dz_alloc(bytes); }
static void cpu_free(const dz_backend *be, void *buf) { dz_free(buf); }

static const dz_backend_ops cpu_ops = {
    .alloc = cpu_alloc,
    .free = cpu_free,
    .upload = cpu_upload,
    .upload_view = cpu_upload_view,
    .download = cpu_download,
    .synchronize = cpu_synchronize,
    .matmul = cpu_matmul,
    .matmul_pair = cpu_matmul_pair,
    .layernorm = cpu_layernorm,
    .rmsnorm = cpu_rmsnorm,
    .rope = cpu_rope,
    .attention = cpu_attention,
    .relu = cpu_relu,
    .swiglu = cpu_swiglu,
    .add = cpu_add,
    .fill = cpu_fill,
    .copy_rows = cpu_copy_rows,
    .logsumexp_update = cpu_logsumexp_update,
    .pick_target = cpu_pick_target,
    .logprob_finish = cpu_logprob_finish,
    .z_fill = dz_cpu_z_fill,
    .philox_fill = dz_cpu_philox_fill,
    .perturb_pair = dz_cpu_perturb_pair,
    .perturb_pair_bf16 = dz_cpu_perturb_pair_bf16,
    .update_f32 = dz_cpu_update_f32,
    .update_bf16 = dz_cpu_update_bf16,
    .update_then_perturb_f32 = dz_cpu_update_then_perturb_f32,
    .update_then_perturb_bf16 = dz_cpu_update_then_perturb_bf16,
};

/* The one instance: no state, so every caller may share it (dz_backend_free leaves it). */
static dz_backend cpu_backend = {.name = "cpu", .host_buffers = 1, .ops = &cpu_ops};

const dz_backend *dz_backend_cpu(void) { return &cpu_backend; }

