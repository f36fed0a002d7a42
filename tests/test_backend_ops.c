/* The backends of backend/backend.h, in the spirit of ggml's test-backend-ops:
 * - the CPU and reference backends' float ops against plain double-precision references
 *   written here, on odd shapes (both keep their buffers in host memory, so these checks
 *   hand them host pointers);
 * - every op of every registered backend, through its own buffers (alloc, upload,
 *   download), against the reference backend: float ops to a tolerance, data moves and the
 *   ZO ops (the contract of backend/zo_ops.h) bitwise, the CPU's at every instruction-set
 *   level (core/isa.h) this machine runs;
 * - each CPU op's result bitwise the same with 1 and 2 threads and at every level. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "core/isa.h"
#include "core/threads.h"
#include "core/rng.h"
#include "backend/backend.h"
#include "backend/cpu_simd.h" /* dz_expf */

static float *randn(size_t n, uint64_t seed, float scale) {
    float *x = malloc(sizeof(float) * n);
    for (size_t i = 0; i < n; i++) x[i] = (float)(scale * dz_normal(&seed));
    return x;
}

static double max_rel_err(const float *got, const double *want, size_t n) {
    double m = 0.0;
    for (size_t i = 0; i < n; i++) m = fmax(m, fabs(got[i] - want[i]) / (1.0 + fabs(want[i])));
    return m;
}

/* The backends whose buffers are host memory (backend.h), by name. */
static const char *const host_backends[] = {"cpu", "ref"};

/* name(void **) runs name_on(be) on each of host_backends. */
#define ON_HOST_BACKENDS(name)                                                   \
    static void name(void **s) {                                                 \
        (void)s;                                                                 \
        for (size_t i = 0; i < sizeof host_backends / sizeof host_backends[0]; i++) { \
            const dz_backend *be = dz_backend_by_name(host_backends[i]);         \
            assert_non_null(be);                                                 \
            name##_on(be);                                                       \
        }                                                                        \
    }

static void exp_is_accurate(void **s) {
    (void)s;
    double worst = 0.0;
    for (float x = -87.0f; x < 88.0f; x += 0.001f) {
        double want = exp((double)x);
        worst = fmax(worst, fabs(dz_expf(x) - want) / want);
    }
    assert_true(worst < 3e-7);
    assert_true(dz_expf(-1000.0f) == 0.0f || dz_expf(-1000.0f) < 1e-37f);
    assert_true(dz_expf(0.0f) == 1.0f);
    assert_true(isnan(dz_expf(NAN)));          /* NaN propagates (no undefined float-to-int conversion) */
    assert_true(dz_expf(INFINITY) > 1e38f); /* saturates */
}

static void matmul_with_bias_on(const dz_backend *be) {
    const int shapes[][3] = {{1, 1, 1}, {3, 5, 7}, {17, 33, 65}, {64, 96, 48}, {130, 7, 300}};
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        const int M = shapes[k][0], N = shapes[k][1], K = shapes[k][2];
        float *x = randn((size_t)M * K, 1, 1), *w = randn((size_t)N * K, 2, 1), *b = randn(N, 3, 1);
        float *y = malloc(sizeof(float) * M * N);
        double *want = malloc(sizeof(double) * M * N);
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) {
                double acc = b[j];
                for (int t = 0; t < K; t++) acc += (double)x[i * K + t] * w[j * K + t];
                want[i * N + j] = acc;
            }
        be->ops->matmul(be, y, x, w, b, M, N, K);
        assert_true(max_rel_err(y, want, (size_t)M * N) < 1e-5 * sqrt(K));
        free(x), free(w), free(b), free(y), free(want);
    }
}
ON_HOST_BACKENDS(matmul_with_bias)

static void norms_on(const dz_backend *be) {
    const int rows = 5, dim = 77;
    float *x = randn(rows * dim, 4, 3), *w = randn(dim, 5, 1), *b = randn(dim, 6, 1);
    float *y = malloc(sizeof(float) * rows * dim);
    double *want = malloc(sizeof(double) * rows * dim);
    for (int r = 0; r < rows; r++) {
        double mean = 0, var = 0, sq = 0;
        for (int i = 0; i < dim; i++) mean += x[r * dim + i];
        mean /= dim;
        for (int i = 0; i < dim; i++) var += pow(x[r * dim + i] - mean, 2), sq += pow(x[r * dim + i], 2);
        var /= dim;
        for (int i = 0; i < dim; i++) want[r * dim + i] = (x[r * dim + i] - mean) / sqrt(var + 1e-5) * w[i] + b[i];
    }
    be->ops->layernorm(be, y, x, w, b, rows, dim, 1e-5f);
    assert_true(max_rel_err(y, want, rows * dim) < 1e-5);
    for (int r = 0; r < rows; r++) {
        double sq = 0;
        for (int i = 0; i < dim; i++) sq += pow(x[r * dim + i], 2);
        for (int i = 0; i < dim; i++) want[r * dim + i] = x[r * dim + i] / sqrt(sq / dim + 1e-6) * w[i];
    }
    be->ops->rmsnorm(be, y, x, w, rows, dim, 1e-6f);
    assert_true(max_rel_err(y, want, rows * dim) < 1e-5);
    free(x), free(w), free(b), free(y), free(want);
}
ON_HOST_BACKENDS(norms)

/* Rotary embedding, HF layout: pairs (i, i + head_dim/2) of each head. */
static void rope_half_split_on(const dz_backend *be) {
    const int rows = 6, per_seq = 3, pos0 = 5, heads = 2, hd = 8;
    float *x = randn(rows * heads * hd, 7, 1);
    double *want = malloc(sizeof(double) * rows * heads * hd);
    for (int r = 0; r < rows; r++)
        for (int h = 0; h < heads; h++)
            for (int i = 0; i < hd / 2; i++) {
                const int a = i, b = i + hd / 2;
                const float *v = x + (r * heads + h) * hd;
                double ang = (pos0 + r % per_seq) * pow(10000.0, -2.0 * i / hd);
                want[(r * heads + h) * hd + a] = v[a] * cos(ang) - v[b] * sin(ang);
                want[(r * heads + h) * hd + b] = v[a] * sin(ang) + v[b] * cos(ang);
            }
    int pos[6];
    for (int r = 0; r < rows; r++) pos[r] = pos0 + r % per_seq;
    float table[(5 + 3) * 8];
    dz_rope_table_fill(table, pos0 + per_seq, hd, 10000.0f);
    be->ops->rope(be, x, rows, pos, heads, hd, table);
    assert_true(max_rel_err(x, want, rows * heads * hd) < 1e-6);
    free(x), free(want);
}
ON_HOST_BACKENDS(rope_half_split)

/* Causal attention with GQA, padding and key prefixes, against a direct softmax:
 * sequence 0 and 1 read their own earlier positions (a KV cache), sequence 2 continues
 * sequence 0's slot (a shared prompt) from its own slot. Padding query rows give zeros. */
static void attention_gqa_padding_prefix_on(const dz_backend *be) {
    enum { B = 3, n_new = 3, T = 6, H = 4, KV = 2, hd = 5 };
    const int start[B] = {2, 2, 2}, lengths[B] = {5, 3, 5};
    float *q = randn(B * n_new * H * hd, 8, 1), *k = randn(B * T * KV * hd, 9, 1), *v = randn(B * T * KV * hd, 10, 1);
    float *out = malloc(sizeof(float) * B * n_new * H * hd), *scratch = malloc(sizeof(float) * dz_attn_scratch_floats(hd, T) * 64);
    double *want = calloc(B * n_new * H * hd, sizeof(double));
    const float *pk[B], *pv[B], *ok[B], *ov[B];
    const int prefix_slot[B] = {0, 1, 0};
    for (int b = 0; b < B; b++) {
        ok[b] = k + b * T * KV * hd, ov[b] = v + b * T * KV * hd;
        pk[b] = k + prefix_slot[b] * T * KV * hd, pv[b] = v + prefix_slot[b] * T * KV * hd;
    }
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int i = 0; i < n_new; i++) {
                if (start[b] + i >= lengths[b]) continue; /* padding queries: zeros */
                int nk = start[b] + i + 1;
                double sc[16], mx = -1e300, sum = 0;
                for (int j = 0; j < nk; j++) {
                    const float *kj = (j < start[b] ? pk[b] : ok[b]) + (j * KV + h / 2) * hd;
                    double d = 0;
                    for (int t = 0; t < hd; t++) d += (double)q[((b * n_new + i) * H + h) * hd + t] * kj[t];
                    sc[j] = d / sqrt(hd);
                    mx = fmax(mx, sc[j]);
                }
                for (int j = 0; j < nk; j++) sum += sc[j] = exp(sc[j] - mx);
                for (int j = 0; j < nk; j++) {
                    const float *vj = (j < start[b] ? pv[b] : ov[b]) + (j * KV + h / 2) * hd;
                    for (int t = 0; t < hd; t++) want[((b * n_new + i) * H + h) * hd + t] += sc[j] / sum * vj[t];
                }
            }
    dz_attn_args a = {.batch = B, .n_new = n_new, .max_keys = T, .n_heads = H, .n_kv_heads = KV, .head_dim = hd,
                      .start = start, .lengths = lengths, .prefix_k = pk, .prefix_v = pv, .own_k = ok, .own_v = ov,
                      .scale = 1.0f / sqrtf(hd), .scratch = scratch, .scratch_threads = 64};
    be->ops->attention(be, out, q, &a);
    assert_true(max_rel_err(out, want, B * n_new * H * hd) < 1e-5);
    /* packed (row0): only the real rows, back to back; each must be the padded layout's
     * row bit for bit (the forward packs its streams so) */
    int row0[B + 1], n = 0;
    float *pq = malloc(sizeof(float) * B * n_new * H * hd), *pout = malloc(sizeof(float) * B * n_new * H * hd);
    for (int b = 0; b < B; b++) {
        row0[b] = n;
        for (int i = 0; i < n_new && start[b] + i < lengths[b]; i++, n++)
            memcpy(pq + n * H * hd, q + (b * n_new + i) * H * hd, sizeof(float) * H * hd);
    }
    row0[B] = n;
    assert_true(n < B * n_new); /* the case has padding to drop */
    a.row0 = row0;
    be->ops->attention(be, pout, pq, &a);
    for (int b = 0; b < B; b++)
        for (int i = 0; i < row0[b + 1] - row0[b]; i++)
            assert_memory_equal(pout + (row0[b] + i) * H * hd, out + (b * n_new + i) * H * hd, sizeof(float) * H * hd);
    free(pq), free(pout);
    free(q), free(k), free(v), free(out), free(scratch), free(want);
}
ON_HOST_BACKENDS(attention_gqa_padding_prefix)

/* Prefix tuning's virtual rows: nv key/value rows that every query sees before position
 * 0. Against the test's own loop over nv + pos + 1 keys (the virtual rows, then the
 * slot's), and bitwise against the same keys laid as nv extra leading rows of each
 * sequence's slot with its positions moved by nv (the op's key order is the same). */
static void attention_virtual_rows_on(const dz_backend *be) {
    enum { B = 2, nv = 3, n_new = 3, T = 6, H = 4, KV = 2, hd = 18, kvd = KV * hd };
    const int start[B] = {0, 2}, lengths[B] = {2, 5};
    float *q = randn(B * n_new * H * hd, 21, 1), *k = randn(B * T * kvd, 22, 1), *v = randn(B * T * kvd, 23, 1);
    float *vk = randn(nv * kvd, 24, 1), *vv = randn(nv * kvd, 25, 1);
    const size_t nout = (size_t)B * n_new * H * hd;
    float *out = malloc(sizeof(float) * nout), *moved = malloc(sizeof(float) * nout);
    float *scratch = malloc(sizeof(float) * dz_attn_scratch_floats(hd, nv + T) * 64);
    double *want = calloc(nout, sizeof(double));
    const float *ok[B], *ov[B];
    for (int b = 0; b < B; b++) ok[b] = k + b * T * kvd, ov[b] = v + b * T * kvd;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int i = 0; i < n_new && start[b] + i < lengths[b]; i++) {
                const int nk = nv + start[b] + i + 1;
                double sc[16], mx = -1e300, sum = 0;
                for (int j = 0; j < nk; j++) {
                    const float *kj = j < nv ? vk + (j * KV + h / 2) * hd : ok[b] + ((j - nv) * KV + h / 2) * hd;
                    double d = 0;
                    for (int t = 0; t < hd; t++) d += (double)q[((b * n_new + i) * H + h) * hd + t] * kj[t];
                    mx = fmax(mx, sc[j] = d / sqrt(hd));
                }
                for (int j = 0; j < nk; j++) sum += sc[j] = exp(sc[j] - mx);
                for (int j = 0; j < nk; j++) {
                    const float *vj = j < nv ? vv + (j * KV + h / 2) * hd : ov[b] + ((j - nv) * KV + h / 2) * hd;
                    for (int t = 0; t < hd; t++) want[((b * n_new + i) * H + h) * hd + t] += sc[j] / sum * vj[t];
                }
            }
    dz_attn_args a = {.batch = B, .n_new = n_new, .max_keys = nv + T, .n_heads = H, .n_kv_heads = KV, .head_dim = hd,
                      .start = start, .lengths = lengths, .prefix_k = ok, .prefix_v = ov, .own_k = ok, .own_v = ov,
                      .scale = 1.0f / sqrtf(hd), .scratch = scratch, .scratch_threads = 64,
                      .n_virtual = nv, .virtual_k = vk, .virtual_v = vv};
    memset(out, 0x7f, sizeof(float) * nout);
    be->ops->attention(be, out, q, &a);
    for (int b = 0; b < B; b++) /* padding rows: zeros */
        for (int i = lengths[b] - start[b]; i < n_new; i++)
            for (int e = 0; e < H * hd; e++) want[(b * n_new + i) * H * hd + e] = 0.0;
    assert_true(max_rel_err(out, want, nout) < 1e-5);
    /* the virtual rows as the slots' first nv positions */
    float *wk = malloc(sizeof(float) * B * (nv + T) * kvd), *wv = malloc(sizeof(float) * B * (nv + T) * kvd);
    const float *wok[B], *wov[B];
    int wstart[B], wlen[B];
    for (int b = 0; b < B; b++) {
        memcpy(wk + b * (nv + T) * kvd, vk, sizeof(float) * nv * kvd);
        memcpy(wv + b * (nv + T) * kvd, vv, sizeof(float) * nv * kvd);
        memcpy(wk + (b * (nv + T) + nv) * kvd, ok[b], sizeof(float) * T * kvd);
        memcpy(wv + (b * (nv + T) + nv) * kvd, ov[b], sizeof(float) * T * kvd);
        wok[b] = wk + b * (nv + T) * kvd, wov[b] = wv + b * (nv + T) * kvd;
        wstart[b] = start[b] + nv, wlen[b] = lengths[b] + nv;
    }
    dz_attn_args w = a;
    w.n_virtual = 0, w.virtual_k = w.virtual_v = NULL;
    w.start = wstart, w.lengths = wlen, w.prefix_k = w.own_k = wok, w.prefix_v = w.own_v = wov;
    be->ops->attention(be, moved, q, &w);
    assert_memory_equal(out, moved, sizeof(float) * nout);
    free(wk), free(wv), free(vk), free(vv);
    free(q), free(k), free(v), free(out), free(moved), free(scratch), free(want);
}
ON_HOST_BACKENDS(attention_virtual_rows)

static void activations_and_logsumexp_on(const dz_backend *be) {
    const size_t n = 1000;
    float *g = randn(n, 11, 4), *u = randn(n, 12, 1), *r = malloc(sizeof(float) * n);
    double *want = malloc(sizeof(double) * n);
    memcpy(r, g, sizeof(float) * n);
    for (size_t i = 0; i < n; i++) want[i] = g[i] / (1.0 + exp(-(double)g[i])) * u[i];
    be->ops->swiglu(be, g, u, n);
    assert_true(max_rel_err(g, want, n) < 1e-6);
    for (size_t i = 0; i < n; i++) want[i] = r[i] > 0 ? r[i] : 0;
    be->ops->relu(be, r, n);
    assert_true(max_rel_err(r, want, n) < 1e-12);
    /* two chunks of a 3 x 700 row block, folded online */
    float *l = randn(3 * 700, 13, 5), m[3] = {-INFINITY, -INFINITY, -INFINITY}, sum[3] = {0};
    float *c1 = malloc(sizeof(float) * 3 * 300), *c2 = malloc(sizeof(float) * 3 * 400);
    for (int row = 0; row < 3; row++) {
        memcpy(c1 + row * 300, l + row * 700, sizeof(float) * 300);
        memcpy(c2 + row * 400, l + row * 700 + 300, sizeof(float) * 400);
    }
    be->ops->logsumexp_update(be, c1, 3, 300, m, sum);
    be->ops->logsumexp_update(be, c2, 3, 400, m, sum);
    for (int row = 0; row < 3; row++) {
        double acc = 0;
        for (int i = 0; i < 700; i++) acc += exp((double)l[row * 700 + i]);
        assert_true(fabs((m[row] + log(sum[row])) - log(acc)) < 1e-5);
    }
    free(g), free(u), free(r), free(want), free(l), free(c1), free(c2);
}
ON_HOST_BACKENDS(activations_and_logsumexp)

/* Row results must not depend on the thread count. */
static void ops_are_bitwise_equal_across_thread_counts(void **s) {
    (void)s;
    const dz_backend *be = dz_backend_cpu();
    const int M = 96, N = 80, K = 72;
    float *x = randn(M * K, 14, 1), *w = randn(N * K, 15, 1), *y[2], *ln[2], *lse[2];
    for (int t = 0; t < 2; t++) {
        dz_set_num_threads(t + 1);
        y[t] = malloc(sizeof(float) * M * N);
        ln[t] = malloc(sizeof(float) * M * K);
        lse[t] = calloc(2 * M, sizeof(float));
        be->ops->matmul(be, y[t], x, w, w, M, N, K);
        be->ops->layernorm(be, ln[t], x, w, w + K, M, K, 1e-5f);
        for (int i = 0; i < M; i++) lse[t][i] = -INFINITY;
        be->ops->logsumexp_update(be, y[t], M, N, lse[t], lse[t] + M);
    }
    assert_memory_equal(y[0], y[1], sizeof(float) * M * N);
    assert_memory_equal(ln[0], ln[1], sizeof(float) * M * K);
    assert_memory_equal(lse[0], lse[1], sizeof(float) * 2 * M);
    for (int t = 0; t < 2; t++) free(y[t]), free(ln[t]), free(lse[t]);
    free(x), free(w);
}

/* ---- every op through a backend's own buffers ------------------------------------------- */

/* Shapes that reach every vector loop's body and its tail: rows of 77 (no multiple of 8 or
 * 16), heads of 40 with 1 to 40 keys, 9000 activations (two 4096-element spans and a rest). */
enum { OP_ROWS = 37, OP_DIM = 77, OP_N = 9000, ROPE_HEADS = 3, ROPE_HD = 26, ROPE_POS = 50, LSE_A = 300, LSE_B = 413, MM_N = 45 };
enum { ATT_B = 3, ATT_NEW = 21, ATT_T = 40, ATT_H = 4, ATT_KV = 2, ATT_HD = 40 };
enum { SLOT_ROWS = 2 * OP_ROWS + 3 }; /* copy_rows' scatter target */

static const int att_start[ATT_B] = {0, 13, 19}, att_len[ATT_B] = {21, 30, 40}; /* sequence 1 has padding */

/* Host data of every op (the same on every backend). */
typedef struct op_host {
    float *x, *w, *b, *rot, *act, *up, *lse_a, *lse_b, *q, *k, *v, *mm_w, *rope_cs;
    int pos[OP_ROWS], scatter[OP_ROWS], gather[OP_ROWS], targets[OP_ROWS];
} op_host;

/* The same as buffers of backend be. */
typedef struct op_inputs {
    const dz_backend *be;
    const op_host *h;
    float *x, *w, *b, *rot, *act, *up, *lse_a, *lse_b, *q, *k, *v, *mm_w, *rope_cs, *scratch;
    const float *pk[ATT_B], *pv[ATT_B], *ok[ATT_B], *ov[ATT_B];
    dz_attn_args attn;
} op_inputs;

static void op_host_make(op_host *h) {
    h->x = randn(OP_ROWS * OP_DIM, 21, 3), h->w = randn(OP_DIM, 22, 1), h->b = randn(OP_DIM, 23, 1);
    h->rot = randn(OP_ROWS * ROPE_HEADS * ROPE_HD, 31, 1);
    h->act = randn(OP_N, 24, 4), h->up = randn(OP_N, 25, 1);
    h->lse_a = randn(OP_ROWS * LSE_A, 26, 5), h->lse_b = randn(OP_ROWS * LSE_B, 27, 5);
    const size_t slot = (size_t)ATT_T * ATT_KV * ATT_HD;
    h->q = randn((size_t)ATT_B * ATT_NEW * ATT_H * ATT_HD, 28, 1);
    h->k = randn(ATT_B * slot, 29, 1), h->v = randn(ATT_B * slot, 30, 1);
    h->mm_w = randn(MM_N * OP_DIM, 32, 1);
    h->rope_cs = malloc(sizeof(float) * ROPE_POS * ROPE_HD);
    assert_non_null(h->rope_cs);
    dz_rope_table_fill(h->rope_cs, ROPE_POS, ROPE_HD, 10000.0f);
    for (int r = 0; r < OP_ROWS; r++) {
        h->pos[r] = (r * 7) % ROPE_POS;
        h->scatter[r] = (r * 2 + 3) % SLOT_ROWS; /* distinct: 2 is invertible mod 77 */
        h->gather[r] = (r * 5) % OP_ROWS;        /* a permutation */
        h->targets[r] = (r * 97) % (LSE_A + LSE_B);
    }
}

static void op_host_free(op_host *h) {
    float *p[] = {h->x, h->w, h->b, h->rot, h->act, h->up, h->lse_a, h->lse_b, h->q, h->k, h->v, h->mm_w, h->rope_cs};
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++) free(p[i]);
}

static float *upload_floats(const dz_backend *be, const float *host, size_t n) {
    float *buf = be->ops->alloc(be, sizeof(float) * n);
    assert_non_null(buf);
    be->ops->upload(be, buf, host, sizeof(float) * n);
    return buf;
}

static void op_inputs_make(op_inputs *in, const dz_backend *be, const op_host *h) {
    const size_t slot = (size_t)ATT_T * ATT_KV * ATT_HD;
    in->be = be, in->h = h;
    in->x = upload_floats(be, h->x, OP_ROWS * OP_DIM), in->w = upload_floats(be, h->w, OP_DIM);
    in->b = upload_floats(be, h->b, OP_DIM), in->rot = upload_floats(be, h->rot, OP_ROWS * ROPE_HEADS * ROPE_HD);
    in->act = upload_floats(be, h->act, OP_N), in->up = upload_floats(be, h->up, OP_N);
    in->lse_a = upload_floats(be, h->lse_a, OP_ROWS * LSE_A), in->lse_b = upload_floats(be, h->lse_b, OP_ROWS * LSE_B);
    in->q = upload_floats(be, h->q, (size_t)ATT_B * ATT_NEW * ATT_H * ATT_HD);
    in->k = upload_floats(be, h->k, ATT_B * slot), in->v = upload_floats(be, h->v, ATT_B * slot);
    in->mm_w = upload_floats(be, h->mm_w, MM_N * OP_DIM);
    in->rope_cs = upload_floats(be, h->rope_cs, ROPE_POS * ROPE_HD);
    in->scratch = be->ops->alloc(be, sizeof(float) * dz_attn_scratch_floats(ATT_HD, ATT_T) * 2);
    const int prefix_slot[ATT_B] = {0, 1, 0}; /* sequence 2 continues sequence 0's slot */
    for (int b = 0; b < ATT_B; b++) {
        in->ok[b] = in->k + b * slot, in->ov[b] = in->v + b * slot;
        in->pk[b] = in->k + prefix_slot[b] * slot, in->pv[b] = in->v + prefix_slot[b] * slot;
    }
    in->attn = (dz_attn_args){.batch = ATT_B, .n_new = ATT_NEW, .max_keys = ATT_T, .n_heads = ATT_H,
                              .n_kv_heads = ATT_KV, .head_dim = ATT_HD, .start = att_start, .lengths = att_len,
                              .prefix_k = in->pk, .prefix_v = in->pv, .own_k = in->ok, .own_v = in->ov,
                              .scale = 1.0f / sqrtf(ATT_HD), .scratch_threads = 2, .scratch = in->scratch};
}

static void op_inputs_free(op_inputs *in) {
    float *p[] = {in->x, in->w, in->b, in->rot, in->act, in->up, in->lse_a, in->lse_b, in->q, in->k, in->v, in->mm_w,
                  in->rope_cs, in->scratch};
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++) in->be->ops->free(in->be, p[i]);
}

/* Each op writes its result into the buffer out. */
static void run_matmul(const op_inputs *in, float *out) {
    in->be->ops->matmul(in->be, out, in->x, in->mm_w, in->b, OP_ROWS, MM_N, OP_DIM);
}
static void run_layernorm(const op_inputs *in, float *out) {
    in->be->ops->layernorm(in->be, out, in->x, in->w, in->b, OP_ROWS, OP_DIM, 1e-5f);
}
static void run_rmsnorm(const op_inputs *in, float *out) {
    in->be->ops->rmsnorm(in->be, out, in->x, in->w, OP_ROWS, OP_DIM, 1e-6f);
}
static void run_rope(const op_inputs *in, float *out) {
    in->be->ops->upload(in->be, out, in->h->rot, sizeof(float) * OP_ROWS * ROPE_HEADS * ROPE_HD);
    in->be->ops->rope(in->be, out, OP_ROWS, in->h->pos, ROPE_HEADS, ROPE_HD, in->rope_cs);
}
static void run_attention(const op_inputs *in, float *out) { in->be->ops->attention(in->be, out, in->q, &in->attn); }
static void run_relu(const op_inputs *in, float *out) {
    in->be->ops->upload(in->be, out, in->h->act, sizeof(float) * OP_N);
    in->be->ops->relu(in->be, out, OP_N);
}
static void run_swiglu(const op_inputs *in, float *out) {
    in->be->ops->upload(in->be, out, in->h->act, sizeof(float) * OP_N);
    in->be->ops->swiglu(in->be, out, in->up, OP_N);
}
static void run_add(const op_inputs *in, float *out) {
    in->be->ops->upload(in->be, out, in->h->act, sizeof(float) * OP_N);
    in->be->ops->add(in->be, out, in->up, OP_N);
}
static void run_fill(const op_inputs *in, float *out) { in->be->ops->fill(in->be, out, -1.5f, OP_N); }
/* Rows of x scattered into SLOT_ROWS rows (the rest zero), then gathered back permuted. */
static void run_copy_rows(const op_inputs *in, float *out) {
    in->be->ops->fill(in->be, out, 0.0f, (size_t)SLOT_ROWS * OP_DIM);
    in->be->ops->copy_rows(in->be, out, in->h->scatter, in->x, NULL, OP_ROWS, OP_DIM);
    in->be->ops->copy_rows(in->be, out + SLOT_ROWS * OP_DIM, NULL, in->x, in->h->gather, OP_ROWS, OP_DIM);
}
/* out: the running max of each row, then the running sum. */
static void run_logsumexp(const op_inputs *in, float *out) {
    in->be->ops->fill(in->be, out, -INFINITY, OP_ROWS);
    in->be->ops->fill(in->be, out + OP_ROWS, 0.0f, OP_ROWS);
    in->be->ops->logsumexp_update(in->be, in->lse_a, OP_ROWS, LSE_A, out, out + OP_ROWS);
    in->be->ops->logsumexp_update(in->be, in->lse_b, OP_ROWS, LSE_B, out, out + OP_ROWS);
}
/* The head's sequence over two vocabulary chunks: max, sum, target logit, log-prob. */
static void run_logprob(const op_inputs *in, float *out) {
    float *m = out, *s = out + OP_ROWS, *tgt = out + 2 * OP_ROWS, *lp = out + 3 * OP_ROWS;
    in->be->ops->fill(in->be, m, -INFINITY, OP_ROWS);
    in->be->ops->fill(in->be, s, 0.0f, OP_ROWS);
    in->be->ops->fill(in->be, tgt, 7.0f, OP_ROWS);
    in->be->ops->logsumexp_update(in->be, in->lse_a, OP_ROWS, LSE_A, m, s);
    in->be->ops->pick_target(in->be, tgt, in->lse_a, OP_ROWS, LSE_A, in->h->targets, 0);
    in->be->ops->logsumexp_update(in->be, in->lse_b, OP_ROWS, LSE_B, m, s);
    in->be->ops->pick_target(in->be, tgt, in->lse_b, OP_ROWS, LSE_B, in->h->targets, LSE_A);
    in->be->ops->logprob_finish(in->be, lp, tgt, m, s, OP_ROWS);
}

typedef struct backend_op {
    const char *name;
    size_t out_floats;
    void (*run)(const op_inputs *in, float *out);
    double tol;         /* vs the reference backend: max |got - want| / (1 + |want|); 0 = bitwise */
    int across_levels;  /* checked bitwise across levels and thread counts (matmul: the GEMM's tests) */
} backend_op;

static const backend_op ops[] = {
    {"matmul", OP_ROWS * MM_N, run_matmul, 1e-5 * 9, 0},
    {"layernorm", OP_ROWS * OP_DIM, run_layernorm, 1e-5, 1},
    {"rmsnorm", OP_ROWS * OP_DIM, run_rmsnorm, 1e-5, 1},
    {"rope", OP_ROWS * ROPE_HEADS * ROPE_HD, run_rope, 1e-6, 1},
    {"attention", ATT_B * ATT_NEW * ATT_H * ATT_HD, run_attention, 1e-5, 1},
    {"relu", OP_N, run_relu, 0, 1},
    {"swiglu", OP_N, run_swiglu, 1e-6, 1},
    {"add", OP_N, run_add, 0, 1}, /* double rounding is exact for one float add */
    {"fill", OP_N, run_fill, 0, 1},
    {"copy_rows", (SLOT_ROWS + OP_ROWS) * OP_DIM, run_copy_rows, 0, 1},
    {"logsumexp_update", 2 * OP_ROWS, run_logsumexp, 1e-5, 1},
    {"pick_target+logprob_finish", 4 * OP_ROWS, run_logprob, 1e-5, 1},
};
enum { N_OPS = sizeof ops / sizeof ops[0] };

/* op on in's backend into host memory out, through a buffer first filled with NaN so
 * that an element the op fails to write cannot match (0xA5 bytes, -2.9e-16 as a float,
 * would pass a tolerance against a 0 the reference writes). */
static void run_op(const backend_op *op, const op_inputs *in, float *out) {
    const dz_backend *be = in->be;
    float *buf = be->ops->alloc(be, sizeof(float) * op->out_floats);
    assert_non_null(buf);
    for (size_t i = 0; i < op->out_floats; i++) out[i] = NAN;
    be->ops->upload(be, buf, out, sizeof(float) * op->out_floats);
    op->run(in, buf);
    be->ops->synchronize(be);
    be->ops->download(be, out, buf, sizeof(float) * op->out_floats);
    be->ops->free(be, buf);
}

static void run_op_at(const backend_op *op, const op_inputs *in, dz_isa isa, int threads, float *out) {
    assert_int_equal(dz_isa_force(isa, NULL), DZ_OK);
    dz_set_num_threads(threads);
    run_op(op, in, out);
}

static void assert_bitwise_equal(const float *got, const float *want, size_t n, const char *what) {
    for (size_t i = 0; i < n; i++)
        if (memcmp(&got[i], &want[i], sizeof(float)))
            fail_msg("%s: element %zu is %.9g, the reference gives %.9g", what, i, got[i], want[i]);
}

static void assert_close(const float *got, const float *want, size_t n, double tol, const char *what) {
    double worst = 0.0;
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        const double e = fabs((double)got[i] - want[i]) / (1.0 + fabs((double)want[i]));
        if (!(e <= worst)) worst = e, at = i; /* NaN counts as the worst */
    }
    if (!(worst <= tol))
        fail_msg("%s: element %zu is %.9g, the reference gives %.9g (relative error %.2e > %.2e)", what, at, got[at],
                 want[at], worst, tol);
}

/* Every op of every registered backend against the reference backend's result. */
static void every_backend_matches_the_reference(void **s) {
    (void)s;
    op_host h;
    op_host_make(&h);
    op_inputs ref_in;
    op_inputs_make(&ref_in, dz_backend_ref(), &h);
    assert_non_null(dz_backend_by_name("cpu"));
    assert_ptr_equal(dz_backend_by_name("ref"), dz_backend_ref());
    assert_null(dz_backend_by_name("none"));
    assert_null(dz_backend_at(dz_backend_count()));
    for (int bi = 0; bi < dz_backend_count(); bi++) {
        const dz_backend *be = dz_backend_at(bi);
        op_inputs in;
        op_inputs_make(&in, be, &h);
        for (int o = 0; o < N_OPS; o++) {
            const backend_op *op = &ops[o];
            float *want = malloc(sizeof(float) * op->out_floats), *got = malloc(sizeof(float) * op->out_floats);
            run_op(op, &ref_in, want);
            for (dz_isa isa = DZ_ISA_BASELINE; isa <= dz_isa_best(); isa++) {
                char what[96];
                snprintf(what, sizeof what, "%s on %s at %s", op->name, be->name, dz_isa_name(isa));
                run_op_at(op, &in, isa, 2, got);
                if (op->tol == 0) assert_bitwise_equal(got, want, op->out_floats, what);
                else assert_close(got, want, op->out_floats, op->tol, what);
            }
            free(want), free(got);
        }
        op_inputs_free(&in);
        print_message("%s: %d ops match ref\n", be->name, N_OPS);
    }
    assert_int_equal(dz_isa_force(DZ_ISA_AUTO, NULL), DZ_OK);
    dz_set_num_threads(0);
    op_inputs_free(&ref_in);
    op_host_free(&h);
}

/* Every CPU op but matmul, at each level this CPU can run and with 1 and 2 threads, gives
 * the bits of the baseline level with 1 thread. */
static void ops_are_bitwise_equal_across_levels_and_thread_counts(void **s) {
    (void)s;
    op_host h;
    op_host_make(&h);
    op_inputs in;
    op_inputs_make(&in, dz_backend_cpu(), &h);
    for (int o = 0; o < N_OPS; o++) {
        const backend_op *op = &ops[o];
        if (!op->across_levels) continue;
        float *want = malloc(sizeof(float) * op->out_floats), *got = malloc(sizeof(float) * op->out_floats);
        run_op_at(op, &in, DZ_ISA_BASELINE, 1, want);
        for (dz_isa isa = DZ_ISA_BASELINE; isa <= dz_isa_best(); isa++)
            for (int threads = 1; threads <= 2; threads++) {
                if (isa == DZ_ISA_BASELINE && threads == 1) continue; /* the reference itself */
                char what[96];
                snprintf(what, sizeof what, "%s at %s with %d threads", op->name, dz_isa_name(isa), threads);
                run_op_at(op, &in, isa, threads, got);
                assert_bitwise_equal(got, want, op->out_floats, what);
            }
        free(want), free(got);
    }
    print_message("levels checked: baseline to %s\n", dz_isa_name(dz_isa_best()));
    assert_int_equal(dz_isa_force(DZ_ISA_AUTO, NULL), DZ_OK);
    dz_set_num_threads(0);
    op_inputs_free(&in);
    op_host_free(&h);
}

/* ---- the ZO ops: bitwise the reference's on every backend and level ----------------------- */

/* A span that starts inside a Philox block, crosses the CPU's 1024-element chunks and is
 * long enough for its streaming stores of w+ / w- (which zo_run offsets from the buffers'
 * alignment by different amounts, so that both copies start with ordinary stores). */
enum { ZO_N = 20000, ZO_WP_SHIFT = 3, ZO_WM_SHIFT = 6 };
static const uint64_t ZO_I0 = 1000003, ZO_SEED = 0x9E3779B97F4A7C15ull;
static const uint32_t ZO_TENSOR = 17, ZO_DRAW = 41;

/* Results of every ZO op on one backend, downloaded: z (both distributions, v1 and v2), raw
 * words, the pairs from f32 and bf16 masters, the masters after an update (q = 3 with weight
 * decay, v1; q = 1 without, v2) and after a fused update-then-perturb (f32 v1, bf16 v2
 * Rademacher), with that fused call's pairs. */
typedef struct zo_results {
    float z[4][ZO_N];
    uint32_t words[ZO_N];
    float pair_f32[2][ZO_N], pair_bf16[2][ZO_N];
    float upd_f32[2][ZO_N];
    uint16_t upd_bf16[2][ZO_N];
    float fused_f32[3][ZO_N];  /* theta, w+, w- */
    uint16_t fused_bf16[ZO_N];
    float fused_bf16_pair[2][ZO_N];
} zo_results;

static void zo_run(const dz_backend *be, const float *theta, const uint16_t *theta_h, zo_results *r) {
    const size_t fb = sizeof(float) * ZO_N, hb = sizeof(uint16_t) * ZO_N;
    float *th = be->ops->alloc(be, fb), *wp_buf = be->ops->alloc(be, fb + 64), *wm_buf = be->ops->alloc(be, fb + 64);
    uint16_t *h = be->ops->alloc(be, hb);
    uint32_t *x = be->ops->alloc(be, sizeof(uint32_t) * ZO_N);
    assert_true(th && wp_buf && wm_buf && h && x);
    float *wp = wp_buf + ZO_WP_SHIFT, *wm = wm_buf + ZO_WM_SHIFT;
    const float g3[3] = {0.75f, -1.25f, 0.3f}, g1[1] = {-2.0f};
    const dz_zo_update upd3 = {.g = g3, .q = 3, .lr = 1e-2f, .wd = 0.1f, .step = 5};
    const dz_zo_update upd1 = {.g = g1, .q = 1, .lr = 3e-2f, .wd = 0.0f, .step = 9};
    for (int d = 0; d < 4; d++) {
        be->ops->z_fill(be, wp, ZO_SEED, ZO_TENSOR, ZO_DRAW + d, ZO_I0, ZO_N, (dz_zdist)d);
        be->ops->download(be, r->z[d], wp, fb);
    }
    be->ops->philox_fill(be, x, ZO_SEED, DZ_PURPOSE_SR, ZO_TENSOR, ZO_DRAW, ZO_I0, ZO_N);
    be->ops->download(be, r->words, x, sizeof r->words);
    be->ops->upload(be, th, theta, fb);
    be->ops->perturb_pair(be, th, wp, wm, ZO_N, 1e-3f, ZO_SEED, ZO_TENSOR, ZO_DRAW, ZO_I0, DZ_Z_GAUSSIAN);
    be->ops->download(be, r->pair_f32[0], wp, fb), be->ops->download(be, r->pair_f32[1], wm, fb);
    be->ops->upload(be, h, theta_h, hb);
    be->ops->perturb_pair_bf16(be, h, wp, wm, ZO_N, 1e-3f, ZO_SEED, ZO_TENSOR, ZO_DRAW, ZO_I0, DZ_Z_RADEMACHER);
    be->ops->download(be, r->pair_bf16[0], wp, fb), be->ops->download(be, r->pair_bf16[1], wm, fb);
    const dz_zo_update *u[2] = {&upd3, &upd1};
    for (int k = 0; k < 2; k++) {
        be->ops->upload(be, th, theta, fb);
        be->ops->update_f32(be, th, ZO_N, u[k]->g, u[k]->q, u[k]->lr, u[k]->wd, ZO_SEED, ZO_TENSOR, u[k]->step, ZO_I0,
                       k ? DZ_Z_GAUSSIAN_V2 : DZ_Z_GAUSSIAN);
        be->ops->download(be, r->upd_f32[k], th, fb);
        be->ops->upload(be, h, theta_h, hb);
        be->ops->update_bf16(be, h, ZO_N, u[k]->g, u[k]->q, u[k]->lr, u[k]->wd, ZO_SEED, ZO_TENSOR, u[k]->step, ZO_I0,
                        k ? DZ_Z_GAUSSIAN_V2 : DZ_Z_GAUSSIAN);
        be->ops->download(be, r->upd_bf16[k], h, hb);
    }
    be->ops->upload(be, th, theta, fb);
    be->ops->update_then_perturb_f32(be, th, wp, wm, ZO_N, &upd3, 2e-3f, ZO_SEED, ZO_TENSOR, 16, ZO_I0, DZ_Z_GAUSSIAN);
    be->ops->download(be, r->fused_f32[0], th, fb);
    be->ops->download(be, r->fused_f32[1], wp, fb);
    be->ops->download(be, r->fused_f32[2], wm, fb);
    be->ops->upload(be, h, theta_h, hb);
    be->ops->update_then_perturb_bf16(be, h, wp, wm, ZO_N, &upd3, 2e-3f, ZO_SEED, ZO_TENSOR, 16, ZO_I0,
                                      DZ_Z_RADEMACHER_V2);
    be->ops->download(be, r->fused_bf16, h, hb);
    be->ops->download(be, r->fused_bf16_pair[0], wp, fb), be->ops->download(be, r->fused_bf16_pair[1], wm, fb);
    be->ops->free(be, th), be->ops->free(be, wp_buf), be->ops->free(be, wm_buf);
    be->ops->free(be, h), be->ops->free(be, x);
}

/* Which part of zo_results the first difference is in. */
static const char *zo_part(size_t byte) {
    static const struct { size_t end; const char *name; } parts[] = {
        {offsetof(zo_results, words), "z"},
        {offsetof(zo_results, pair_f32), "philox words"},
        {offsetof(zo_results, pair_bf16), "perturb_pair"},
        {offsetof(zo_results, upd_f32), "perturb_pair_bf16"},
        {offsetof(zo_results, upd_bf16), "update_f32"},
        {offsetof(zo_results, fused_f32), "update_bf16"},
        {offsetof(zo_results, fused_bf16), "update_then_perturb_f32"},
        {sizeof(zo_results), "update_then_perturb_bf16"},
    };
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
        if (byte < parts[i].end) return parts[i].name;
    return "?";
}

static void zo_ops_are_bitwise_the_reference_on_every_backend(void **s) {
    (void)s;
    float *theta = randn(ZO_N, 33, 0.05f);
    uint16_t *theta_h = malloc(sizeof(uint16_t) * ZO_N);
    for (int i = 0; i < ZO_N; i++) {
        uint32_t u;
        memcpy(&u, &theta[i], 4);
        theta_h[i] = (uint16_t)(u >> 16);
    }
    zo_results *want = malloc(sizeof *want), *got = malloc(sizeof *got);
    zo_run(dz_backend_ref(), theta, theta_h, want);
    /* the reference is no constant: the update moved theta, the pairs differ */
    assert_true(memcmp(want->upd_f32[0], theta, sizeof(float) * ZO_N) != 0);
    assert_true(memcmp(want->pair_f32[0], want->pair_f32[1], sizeof(float) * ZO_N) != 0);
    for (int bi = 0; bi < dz_backend_count(); bi++)
        for (dz_isa isa = DZ_ISA_BASELINE; isa <= dz_isa_best(); isa++) {
            assert_int_equal(dz_isa_force(isa, NULL), DZ_OK);
            memset(got, 0xA5, sizeof *got);
            zo_run(dz_backend_at(bi), theta, theta_h, got);
            const unsigned char *a = (const unsigned char *)got, *b = (const unsigned char *)want;
            for (size_t i = 0; i < sizeof *got; i++)
                if (a[i] != b[i])
                    fail_msg("%s at %s: %s differs from ref (byte %zu)", dz_backend_at(bi)->name, dz_isa_name(isa),
                             zo_part(i), i);
        }
    assert_int_equal(dz_isa_force(DZ_ISA_AUTO, NULL), DZ_OK);
    free(theta), free(theta_h), free(want), free(got);
}

/* A run's instance by name (--backend): cpu (also NULL) is the registered stateless
 * instance, which free leaves; ref is the reference's ops on guarded buffers (a device
 * stand-in, its own instance); cuda is the CUDA backend where a CUDA build finds a GPU, else
 * refused saying why; an unknown name names the choices. */
static void instances_by_name(void **state) {
    (void)state;
    dz_backend *be = NULL;
    dz_error err = {0};
    assert_int_equal(dz_backend_create(NULL, &be, &err), DZ_OK);
    assert_ptr_equal(be, dz_backend_cpu());
    dz_backend_free(be);
    assert_int_equal(dz_backend_create("ref", &be, &err), DZ_OK);
    assert_true(be != dz_backend_ref() && be->host_buffers == 0);
    assert_string_equal(be->name, "ref");
    dz_backend_free(be);
    assert_string_equal(dz_backend_ref()->name, "ref"); /* still there */
    assert_int_equal(dz_backend_create("cpu", &be, &err), DZ_OK);
    assert_ptr_equal(be, dz_backend_by_name("cpu"));
    assert_int_equal(dz_backend_create("gpu", &be, &err), DZ_ERR_INVALID);
    assert_null(be);
    assert_non_null(strstr(err.msg, "option --backend: 'gpu' is not one of cpu, cuda, ref"));
    /* an unknown name is that, not a misplaced --gpu-math or --gpus-per-node */
    const char *unknown[][2] = {{"", "''"}, {":fp32", "''"}, {"gpu:fp32", "'gpu'"}, {"gpu@1", "'gpu'"},
                                {"cud:tf32@0", "'cud'"}};
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
        char want[96];
        snprintf(want, sizeof want, "option --backend: %s is not one of cpu, cuda, ref", unknown[i][1]);
        assert_int_equal(dz_backend_create(unknown[i][0], &be, &err), DZ_ERR_INVALID);
        assert_null(be);
        if (!strstr(err.msg, want)) fail_msg("%s: %s", unknown[i][0], err.msg);
    }
#ifdef DZ_HAVE_CUDA /* on a GPU the CUDA backend's instance, else refused saying so */
    if (dz_backend_create("cuda:fp32", &be, &err) == DZ_OK) {
        assert_true(!strcmp(be->name, "cuda") && be->host_buffers == 0 && be->ops->attention);
        dz_backend_free(be);
    } else {
        assert_null(be);
        assert_non_null(strstr(err.msg, "no CUDA GPU found"));
    }
#else
    assert_int_equal(dz_backend_create("cuda", &be, &err), DZ_ERR_UNSUPPORTED);
    assert_null(be);
    assert_non_null(strstr(err.msg, "--backend cuda: this distzo was built without CUDA"));
#endif
}

/* A child process that reads a guarded buffer from host code outside the ops faults and
 * never reaches its exit(0): dies of SIGSEGV, or under AddressSanitizer, which handles the
 * fault itself, exits reporting it (so the pipeline's tests on --backend ref catch such
 * reads). */
static int host_read_faults(const float *buf) {
    fflush(NULL);
    const pid_t pid = fork();
    if (pid == 0) {
        signal(SIGSEGV, SIG_DFL); /* not cmocka's handler: the child must die of it */
        volatile float v = buf[0];
        (void)v;
        _exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* --backend ref's instance: every op and the ZO ops bitwise the reference's through its
 * own buffers, which host code cannot touch (while an upload or download reaches them). */
static void guarded_ref_is_ref_on_guarded_buffers(void **s) {
    (void)s;
    dz_backend *be = NULL;
    dz_error err = {0};
    assert_int_equal(dz_backend_create("ref", &be, &err), DZ_OK);
    const float host[4] = {1.5f, -2.0f, 3.25f, 0.0f};
    float back[4] = {0};
    float *buf = be->ops->alloc(be, sizeof host);
    assert_non_null(buf);
    be->ops->upload(be, buf, host, sizeof host);
    assert_true(host_read_faults(buf));
    be->ops->download(be, back, buf, sizeof back);
    assert_memory_equal(back, host, sizeof host);
    assert_false(host_read_faults(host)); /* the check itself: a host array reads fine */
    op_host h;
    op_host_make(&h);
    op_inputs ref_in, in;
    op_inputs_make(&ref_in, dz_backend_ref(), &h);
    op_inputs_make(&in, be, &h);
    for (int o = 0; o < N_OPS; o++) {
        float *want = malloc(sizeof(float) * ops[o].out_floats), *got = malloc(sizeof(float) * ops[o].out_floats);
        run_op(&ops[o], &ref_in, want);
        run_op(&ops[o], &in, got);
        assert_bitwise_equal(got, want, ops[o].out_floats, ops[o].name);
        free(want), free(got);
    }
    op_inputs_free(&in), op_inputs_free(&ref_in), op_host_free(&h);
    float *theta = randn(ZO_N, 34, 0.05f);
    uint16_t theta_h[ZO_N];
    for (int i = 0; i < ZO_N; i++) theta_h[i] = (uint16_t)(i * 977u);
    zo_results *want = malloc(sizeof *want), *got = malloc(sizeof *got);
    zo_run(dz_backend_ref(), theta, theta_h, want);
    zo_run(be, theta, theta_h, got);
    assert_memory_equal(got, want, sizeof *got);
    free(theta), free(want), free(got);
    be->ops->free(be, buf);
    dz_backend_free(be);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(exp_is_accurate),
        cmocka_unit_test(matmul_with_bias),
        cmocka_unit_test(instances_by_name),
        cmocka_unit_test(norms),
        cmocka_unit_test(rope_half_split),
        cmocka_unit_test(attention_gqa_padding_prefix),
        cmocka_unit_test(attention_virtual_rows),
        cmocka_unit_test(activations_and_logsumexp),
        cmocka_unit_test(ops_are_bitwise_equal_across_thread_counts),
        cmocka_unit_test(every_backend_matches_the_reference),
        cmocka_unit_test(ops_are_bitwise_equal_across_levels_and_thread_counts),
        cmocka_unit_test(zo_ops_are_bitwise_the_reference_on_every_backend),
        cmocka_unit_test(guarded_ref_is_ref_on_guarded_buffers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
