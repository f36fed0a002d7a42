/* Every op of the CPU backend against a plain double-precision reference written here
 * (in the spirit of ggml's test-backend-ops), on odd shapes; and each op's result is
 * bitwise the same with 1 and 2 threads, and at every instruction-set level (core/isa.h)
 * this CPU can run. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/isa.h"
#include "core/rng.h"
#include "backend/backend.h"
#include "backend/cpu_simd.h"

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
}

static void matmul_with_bias(void **s) {
    (void)s;
    const dz_backend *be = dz_backend_cpu();
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
        be->matmul(y, x, w, b, M, N, K);
        assert_true(max_rel_err(y, want, (size_t)M * N) < 1e-5 * sqrt(K));
        free(x), free(w), free(b), free(y), free(want);
    }
}

static void norms(void **s) {
    (void)s;
    const dz_backend *be = dz_backend_cpu();
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
    be->layernorm(y, x, w, b, rows, dim, 1e-5f);
    assert_true(max_rel_err(y, want, rows * dim) < 1e-5);
    for (int r = 0; r < rows; r++) {
        double sq = 0;
        for (int i = 0; i < dim; i++) sq += pow(x[r * dim + i], 2);
        for (int i = 0; i < dim; i++) want[r * dim + i] = x[r * dim + i] / sqrt(sq / dim + 1e-6) * w[i];
    }
    be->rmsnorm(y, x, w, rows, dim, 1e-6f);
    assert_true(max_rel_err(y, want, rows * dim) < 1e-5);
    free(x), free(w), free(b), free(y), free(want);
}

/* Rotary embedding, HF layout: pairs (i, i + head_dim/2) of each head. */
static void rope_half_split(void **s) {
    (void)s;
    const dz_backend *be = dz_backend_cpu();
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
    be->rope(x, rows, pos, heads, hd, 10000.0f);
    assert_true(max_rel_err(x, want, rows * heads * hd) < 1e-6);
    free(x), free(want);
}

/* Causal attention with GQA, padding and key prefixes, against a direct softmax:
 * sequence 0 and 1 read their own earlier positions (a KV cache), sequence 2 continues
 * sequence 0's slot (a shared prompt) from its own slot. Padding query rows give zeros. */
static void attention_gqa_padding_prefix(void **s) {
    (void)s;
    const dz_backend *be = dz_backend_cpu();
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
    be->attention(out, q, &a);
    assert_true(max_rel_err(out, want, B * n_new * H * hd) < 1e-5);
    free(q), free(k), free(v), free(out), free(scratch), free(want);
}

static void activations_and_logsumexp(void **s) {
    (void)s;
    const dz_backend *be = dz_backend_cpu();
    const size_t n = 1000;
    float *g = randn(n, 11, 4), *u = randn(n, 12, 1), *r = malloc(sizeof(float) * n);
    double *want = malloc(sizeof(double) * n);
    memcpy(r, g, sizeof(float) * n);
    for (size_t i = 0; i < n; i++) want[i] = g[i] / (1.0 + exp(-(double)g[i])) * u[i];
    be->swiglu(g, u, n);
    assert_true(max_rel_err(g, want, n) < 1e-6);
    for (size_t i = 0; i < n; i++) want[i] = r[i] > 0 ? r[i] : 0;
    be->relu(r, n);
    assert_true(max_rel_err(r, want, n) < 1e-12);
    /* two chunks of a 3 x 700 row block, folded online */
    float *l = randn(3 * 700, 13, 5), m[3] = {-INFINITY, -INFINITY, -INFINITY}, sum[3] = {0};
    float *c1 = malloc(sizeof(float) * 3 * 300), *c2 = malloc(sizeof(float) * 3 * 400);
    for (int row = 0; row < 3; row++) {
        memcpy(c1 + row * 300, l + row * 700, sizeof(float) * 300);
        memcpy(c2 + row * 400, l + row * 700 + 300, sizeof(float) * 400);
    }
    be->logsumexp_update(c1, 3, 300, m, sum);
    be->logsumexp_update(c2, 3, 400, m, sum);
    for (int row = 0; row < 3; row++) {
        double acc = 0;
        for (int i = 0; i < 700; i++) acc += exp((double)l[row * 700 + i]);
        assert_true(fabs((m[row] + log(sum[row])) - log(acc)) < 1e-5);
    }
    free(g), free(u), free(r), free(want), free(l), free(c1), free(c2);
}

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
        be->matmul(y[t], x, w, w, M, N, K);
        be->layernorm(ln[t], x, w, w + K, M, K, 1e-5f);
        for (int i = 0; i < M; i++) lse[t][i] = -INFINITY;
        be->logsumexp_update(y[t], M, N, lse[t], lse[t] + M);
    }
    assert_memory_equal(y[0], y[1], sizeof(float) * M * N);
    assert_memory_equal(ln[0], ln[1], sizeof(float) * M * K);
    assert_memory_equal(lse[0], lse[1], sizeof(float) * 2 * M);
    for (int t = 0; t < 2; t++) free(y[t]), free(ln[t]), free(lse[t]);
    free(x), free(w);
}

/* ---- every op but matmul at every level and thread count ------------------------------- */

/* Shapes that reach every vector loop's body and its tail: rows of 77 (no multiple of 8 or
 * 16), heads of 40 with 1 to 40 keys, 9000 activations (two 4096-element spans and a rest). */
enum { OP_ROWS = 37, OP_DIM = 77, OP_N = 9000, ROPE_HEADS = 3, ROPE_HD = 26, LSE_A = 300, LSE_B = 413 };
enum { ATT_B = 3, ATT_NEW = 21, ATT_T = 40, ATT_H = 4, ATT_KV = 2, ATT_HD = 40 };

static const int att_start[ATT_B] = {0, 13, 19}, att_len[ATT_B] = {21, 30, 40}; /* sequence 1 has padding */

typedef struct op_inputs {
    float *x, *w, *b;        /* norms: OP_ROWS x OP_DIM */
    float *rot;              /* rope: OP_ROWS x ROPE_HEADS x ROPE_HD */
    int pos[OP_ROWS];
    float *act, *up;         /* relu, swiglu, add: OP_N */
    float *lse_a, *lse_b;    /* logsumexp: two chunks of OP_ROWS rows, folded */
    float *q, *k, *v;        /* attention; sequence 2 continues sequence 0's slot */
    const float *pk[ATT_B], *pv[ATT_B], *ok[ATT_B], *ov[ATT_B];
    dz_attn_args attn;
} op_inputs;

static void op_inputs_make(op_inputs *in) {
    in->x = randn(OP_ROWS * OP_DIM, 21, 3), in->w = randn(OP_DIM, 22, 1), in->b = randn(OP_DIM, 23, 1);
    in->rot = randn(OP_ROWS * ROPE_HEADS * ROPE_HD, 31, 1);
    for (int r = 0; r < OP_ROWS; r++) in->pos[r] = (r * 7) % 50;
    in->act = randn(OP_N, 24, 4), in->up = randn(OP_N, 25, 1);
    in->lse_a = randn(OP_ROWS * LSE_A, 26, 5), in->lse_b = randn(OP_ROWS * LSE_B, 27, 5);
    const size_t slot = (size_t)ATT_T * ATT_KV * ATT_HD;
    in->q = randn((size_t)ATT_B * ATT_NEW * ATT_H * ATT_HD, 28, 1);
    in->k = randn(ATT_B * slot, 29, 1), in->v = randn(ATT_B * slot, 30, 1);
    const int prefix_slot[ATT_B] = {0, 1, 0};
    for (int b = 0; b < ATT_B; b++) {
        in->ok[b] = in->k + b * slot, in->ov[b] = in->v + b * slot;
        in->pk[b] = in->k + prefix_slot[b] * slot, in->pv[b] = in->v + prefix_slot[b] * slot;
    }
    in->attn = (dz_attn_args){.batch = ATT_B, .n_new = ATT_NEW, .max_keys = ATT_T, .n_heads = ATT_H,
                              .n_kv_heads = ATT_KV, .head_dim = ATT_HD, .start = att_start, .lengths = att_len,
                              .prefix_k = in->pk, .prefix_v = in->pv, .own_k = in->ok, .own_v = in->ov,
                              .scale = 1.0f / sqrtf(ATT_HD), .scratch_threads = 2,
                              .scratch = malloc(sizeof(float) * dz_attn_scratch_floats(ATT_HD, ATT_T) * 2)};
}

static void op_inputs_free(op_inputs *in) {
    free(in->x), free(in->w), free(in->b), free(in->rot), free(in->act), free(in->up), free(in->lse_a), free(in->lse_b);
    free(in->q), free(in->k), free(in->v), free(in->attn.scratch);
}

static void run_layernorm(const dz_backend *be, const op_inputs *in, float *out) {
    be->layernorm(out, in->x, in->w, in->b, OP_ROWS, OP_DIM, 1e-5f);
}
static void run_rmsnorm(const dz_backend *be, const op_inputs *in, float *out) {
    be->rmsnorm(out, in->x, in->w, OP_ROWS, OP_DIM, 1e-6f);
}
static void run_rope(const dz_backend *be, const op_inputs *in, float *out) {
    memcpy(out, in->rot, sizeof(float) * OP_ROWS * ROPE_HEADS * ROPE_HD);
    be->rope(out, OP_ROWS, in->pos, ROPE_HEADS, ROPE_HD, 10000.0f);
}
static void run_attention(const dz_backend *be, const op_inputs *in, float *out) {
    be->attention(out, in->q, &in->attn);
}
static void run_relu(const dz_backend *be, const op_inputs *in, float *out) {
    memcpy(out, in->act, sizeof(float) * OP_N);
    be->relu(out, OP_N);
}
static void run_swiglu(const dz_backend *be, const op_inputs *in, float *out) {
    memcpy(out, in->act, sizeof(float) * OP_N);
    be->swiglu(out, in->up, OP_N);
}
static void run_add(const dz_backend *be, const op_inputs *in, float *out) {
    memcpy(out, in->act, sizeof(float) * OP_N);
    be->add(out, in->up, OP_N);
}
/* out: the running max of each row, then the running sum. */
static void run_logsumexp(const dz_backend *be, const op_inputs *in, float *out) {
    for (int r = 0; r < OP_ROWS; r++) out[r] = -INFINITY, out[OP_ROWS + r] = 0.0f;
    be->logsumexp_update(in->lse_a, OP_ROWS, LSE_A, out, out + OP_ROWS);
    be->logsumexp_update(in->lse_b, OP_ROWS, LSE_B, out, out + OP_ROWS);
}

typedef struct backend_op {
    const char *name;
    size_t out_floats;
    void (*run)(const dz_backend *be, const op_inputs *in, float *out);
} backend_op;

static const backend_op row_ops[] = {
    {"layernorm", OP_ROWS * OP_DIM, run_layernorm},
    {"rmsnorm", OP_ROWS * OP_DIM, run_rmsnorm},
    {"rope", OP_ROWS * ROPE_HEADS * ROPE_HD, run_rope},
    {"attention", ATT_B * ATT_NEW * ATT_H * ATT_HD, run_attention},
    {"relu", OP_N, run_relu},
    {"swiglu", OP_N, run_swiglu},
    {"add", OP_N, run_add},
    {"logsumexp_update", 2 * OP_ROWS, run_logsumexp},
};

/* op at `isa` with `threads` threads into out, which is first filled with garbage so that an
 * element the op fails to write cannot match. */
static void run_op_at(const backend_op *op, const op_inputs *in, dz_isa isa, int threads, float *out) {
    assert_int_equal(dz_isa_force(isa, NULL), DZ_OK);
    dz_set_num_threads(threads);
    memset(out, 0xA5, sizeof(float) * op->out_floats);
    op->run(dz_backend_cpu(), in, out);
}

static void assert_bitwise_equal(const float *got, const float *want, size_t n, const char *what) {
    for (size_t i = 0; i < n; i++)
        if (memcmp(&got[i], &want[i], sizeof(float)))
            fail_msg("%s: element %zu is %.9g, the baseline with 1 thread gives %.9g", what, i, got[i], want[i]);
}

/* Every op but matmul, at each level this CPU can run and with 1 and 2 threads, gives the
 * bits of the baseline level with 1 thread. (matmul: the GEMM's own tests.) */
static void ops_are_bitwise_equal_across_levels_and_thread_counts(void **s) {
    (void)s;
    op_inputs in;
    op_inputs_make(&in);
    for (size_t o = 0; o < sizeof row_ops / sizeof row_ops[0]; o++) {
        const backend_op *op = &row_ops[o];
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
    op_inputs_free(&in);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(exp_is_accurate),
        cmocka_unit_test(matmul_with_bias),
        cmocka_unit_test(norms),
        cmocka_unit_test(rope_half_split),
        cmocka_unit_test(attention_gqa_padding_prefix),
        cmocka_unit_test(activations_and_logsumexp),
        cmocka_unit_test(ops_are_bitwise_equal_across_thread_counts),
        cmocka_unit_test(ops_are_bitwise_equal_across_levels_and_thread_counts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
