/* The per-element ZO code that the CUDA kernels run (backend/zo_element.h, compiled here for
 * the host as plain C) against the CPU backend's ops (dz_backend_cpu(): vectorized Philox,
 * 1024-element chunks) and the reference backend's (element by element), bitwise, over many
 * (seed, tensor, draw, element): seeds and tensor ids with every high bit set, draws that
 * wrap (step * q past 2^32), element indices up to 2^34 - 1 (Philox block 2^32 - 1), spans
 * starting at every alignment and crossing the CPU's chunk boundary, Gaussian and
 * Rademacher, q = 1..64, with and without weight decay, f32 and bf16 masters holding
 * NaN, infinities, signed zeros and subnormals. A last test shows that the comparison sees
 * a contracted multiply-add or a reordered division: the bits the GPU build must not change
 * (-fmad=false, docs/CUDA.md). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/rng.h"
#include "backend/backend.h"
#include "backend/zo_element.h"
#include "distzo/zo.h"

_Static_assert(DZ_ZO_SPAN_MAX_Q == DZ_ZO_MAX_Q, "a span's update carries every sample's g");

#define MAX_N 1100

typedef struct zcase {
    uint64_t seed;
    uint32_t tensor, step, q;
    uint64_t i0;
    size_t n;
    dz_zdist dist;
} zcase;

static const uint64_t seeds[] = {0, 1, 0xFFFFFFFFull, 0x100000000ull, UINT64_MAX, 0x243F6A8885A308D3ull};
static const uint32_t tensors[] = {0, 1, 7, 0x80000000u, UINT32_MAX};
static const uint64_t starts[] = {0, 1, 2, 3, 5, 1021, 0xFFFFFFFFull, 0x100000001ull, (1ull << 34) - 1};
static const size_t lengths[] = {1, 2, 3, 4, 5, 7, 64, 1029};
static const uint32_t qs[] = {1, 2, 3, 64};

/* The i-th case: the edge values above in turn, plus splitmix draws; steps that make
 * step * q wrap past 2^32; the last start ends the span on the last element, 2^34 - 1. */
static zcase case_at(int c) {
    uint64_t st = 0x5EEDull + (uint64_t)c;
    zcase k;
    k.seed = c % 3 == 2 ? dz_splitmix64(&st) : seeds[c % 6];
    k.tensor = tensors[(c / 2) % 5];
    k.q = qs[(c / 3) % 4];
    k.step = c % 4 == 0 ? UINT32_MAX / k.q + 1 : c % 4 == 1 ? (uint32_t)dz_splitmix64(&st) : (uint32_t)c;
    k.i0 = starts[c % 9];
    k.n = lengths[(c / 5) % 8];
    k.dist = (dz_zdist)(c % 4); /* v1 and v2, Gaussian and Rademacher */
    if (k.i0 + k.n > (1ull << 34)) k.i0 = (1ull << 34) - k.n; /* ends on element 2^34 - 1 */
    return k;
}
#define N_CASES 72

static const dz_backend *backend_at(int b) { return b == 0 ? dz_backend_cpu() : dz_backend_ref(); }

static void assert_same_bits(const void *got, const void *want, size_t bytes, const char *what, int c,
                             const char *backend) {
    if (memcmp(got, want, bytes) == 0) return;
    const unsigned char *a = got, *b = want;
    size_t i = 0;
    while (a[i] == b[i]) i++;
    fail_msg("%s, case %d: the element code differs from the %s backend at byte %zu", what, c, backend, i);
}

/* theta: N(0, 0.05^2) with NaN, +-inf, -0, a subnormal and a huge value among them. */
static void fill_theta(float *th, uint16_t *th_h, size_t n, uint64_t salt) {
    static const uint32_t special[] = {0x7FC00123u, 0x7F800000u, 0xFF800000u, 0x80000000u, 0x00000301u, 0x7F7FFFFFu};
    uint64_t st = salt;
    for (size_t i = 0; i < n; i++) th[i] = (float)(0.05 * dz_normal(&st));
    for (size_t k = 0; k < 6; k++)
        if (3 * k + 1 < n) th[3 * k + 1] = dz_zo_u2f(special[k]);
    for (size_t i = 0; i < n; i++) th_h[i] = (uint16_t)(dz_zo_f2u(th[i]) >> 16);
}

static void z_and_words_match(void **s) {
    (void)s;
    float want[MAX_N], got[MAX_N];
    uint32_t want_x[MAX_N], got_x[MAX_N];
    for (int c = 0; c < N_CASES; c++) {
        const zcase k = case_at(c);
        const uint32_t draw = k.step * k.q;
        dz_zo_span sp = {.mode = DZ_SPAN_Z, .seed = k.seed, .tensor = k.tensor, .draw = draw, .dist = k.dist,
                         .i0 = k.i0, .n = k.n, .z = got};
        dz_zo_span_run_host(&sp);
        for (size_t i = 0; i < k.n; i++) /* the single-element form */
            if (dz_zo_f2u(dz_z_at(k.seed, k.tensor, draw, k.i0 + i, k.dist)) != dz_zo_f2u(got[i]))
                fail_msg("case %d: dz_z_at differs from the span at element %zu", c, i);
        sp.mode = DZ_SPAN_WORDS, sp.words = got_x, sp.purpose = (uint32_t)c % 4;
        dz_zo_span_run_host(&sp);
        for (int b = 0; b < 2; b++) {
            const dz_backend *be = backend_at(b);
            be->ops->z_fill(be, want, k.seed, k.tensor, draw, k.i0, k.n, k.dist);
            assert_same_bits(got, want, 4 * k.n, "z_fill", c, be->name);
            be->ops->philox_fill(be, want_x, k.seed, sp.purpose, k.tensor, draw, k.i0, k.n);
            assert_same_bits(got_x, want_x, 4 * k.n, "philox_fill", c, be->name);
        }
    }
}

/* Every PASS op of a case, f32 or bf16 master: the backend's op and the element code on
 * copies of the same theta, compared in theta, w+ and w-. */
typedef enum pass_kind { PAIR, UPDATE, FUSED } pass_kind;

typedef struct pass_out {
    float th[MAX_N], wp[MAX_N], wm[MAX_N];
    uint16_t th_h[MAX_N];
} pass_out;

static void run_backend_pass(const dz_backend *be, const zcase *k, pass_kind kind, int bf16, const float *g,
                             float wd, pass_out *o) {
    const float eps = 1e-3f, lr = 0.0625f;
    const uint32_t next = (k->step + 1) * k->q;
    const dz_zo_update upd = {.g = g, .q = (int)k->q, .lr = lr, .wd = wd, .step = k->step};
    if (kind == PAIR && bf16)
        be->ops->perturb_pair_bf16(be, o->th_h, o->wp, o->wm, k->n, eps, k->seed, k->tensor, next, k->i0, k->dist);
    else if (kind == PAIR)
        be->ops->perturb_pair(be, o->th, o->wp, o->wm, k->n, eps, k->seed, k->tensor, next, k->i0, k->dist);
    else if (kind == UPDATE && bf16)
        be->ops->update_bf16(be, o->th_h, k->n, g, (int)k->q, lr, wd, k->seed, k->tensor, k->step, k->i0, k->dist);
    else if (kind == UPDATE)
        be->ops->update_f32(be, o->th, k->n, g, (int)k->q, lr, wd, k->seed, k->tensor, k->step, k->i0, k->dist);
    else if (bf16)
        be->ops->update_then_perturb_bf16(be, o->th_h, o->wp, o->wm, k->n, &upd, eps, k->seed, k->tensor, next, k->i0,
                                          k->dist);
    else
        be->ops->update_then_perturb_f32(be, o->th, o->wp, o->wm, k->n, &upd, eps, k->seed, k->tensor, next, k->i0,
                                         k->dist);
}

static void run_element_pass(const zcase *k, pass_kind kind, int bf16, const float *g, float wd, pass_out *o) {
    dz_zo_span sp = {.mode = DZ_SPAN_PASS, .seed = k->seed, .tensor = k->tensor, .draw = (k->step + 1) * k->q,
                     .dist = k->dist, .i0 = k->i0, .n = k->n, .eps = 1e-3f, .has_update = kind != PAIR,
                     .q = (int)k->q, .lr = 0.0625f, .wd = wd, .step = k->step};
    memcpy(sp.g, g, sizeof(float) * k->q);
    if (bf16) sp.in_bf16 = o->th_h, sp.out_bf16 = kind == PAIR ? NULL : o->th_h;
    else sp.in_f32 = o->th, sp.out_f32 = kind == PAIR ? NULL : o->th;
    if (kind != UPDATE) sp.w_plus = o->wp, sp.w_minus = o->wm;
    dz_zo_span_run_host(&sp);
}

static void pass_ops_match(void **s) {
    (void)s;
    static const char *names[3][2] = {{"perturb_pair", "perturb_pair_bf16"},
                                      {"update_f32", "update_bf16"},
                                      {"update_then_perturb_f32", "update_then_perturb_bf16"}};
    pass_out *init = malloc(sizeof *init), *want = malloc(sizeof *want), *got = malloc(sizeof *got);
    float g[DZ_ZO_MAX_Q];
    for (int c = 0; c < N_CASES; c++) {
        const zcase k = case_at(c);
        uint64_t st = 77 + (uint64_t)c;
        for (uint32_t j = 0; j < k.q; j++) g[j] = (float)(3.0 * dz_normal(&st));
        const float wd = c % 3 == 0 ? 0.0f : c % 3 == 1 ? -0.0f : 0.01f;
        memset(init, 0, sizeof *init);
        fill_theta(init->th, init->th_h, k.n, (uint64_t)c);
        for (int kind = PAIR; kind <= FUSED; kind++)
            for (int bf16 = 0; bf16 < 2; bf16++) {
                *got = *init;
                run_element_pass(&k, (pass_kind)kind, bf16, g, wd, got);
                for (int b = 0; b < 2; b++) {
                    *want = *init;
                    run_backend_pass(backend_at(b), &k, (pass_kind)kind, bf16, g, wd, want);
                    assert_same_bits(got, want, sizeof *got, names[kind][bf16], c, backend_at(b)->name);
                }
            }
    }
    free(init), free(want), free(got);
}

/* ROUND: the purpose-1 words of the CPU backend's philox_fill, rounded one by one. */
static void stochastic_rounding_matches(void **s) {
    (void)s;
    float v[MAX_N];
    uint16_t got[MAX_N], want[MAX_N], unused[MAX_N];
    uint32_t x[MAX_N];
    for (int c = 0; c < N_CASES; c++) {
        const zcase k = case_at(c);
        fill_theta(v, unused, k.n, 1000 + (uint64_t)c);
        const dz_zo_span sp = {.mode = DZ_SPAN_ROUND, .seed = k.seed, .tensor = k.tensor, .draw = k.step * k.q,
                               .i0 = k.i0, .n = k.n, .in_f32 = v, .out_bf16 = got};
        dz_zo_span_run_host(&sp);
        dz_backend_cpu()->ops->philox_fill(dz_backend_cpu(), x, k.seed, DZ_PURPOSE_SR, k.tensor, k.step * k.q, k.i0,
                                           k.n);
        for (size_t i = 0; i < k.n; i++) want[i] = dz_bf16_round_stochastic(v[i], x[i]);
        assert_same_bits(got, want, 2 * k.n, "stochastic rounding", c, "cpu");
    }
}

/* The comparison is sharp enough to see what the GPU build must avoid: a fused multiply-add
 * in the pair or a multiplication by 1/q in place of the division changes some bits. */
static void contraction_or_reordering_would_be_seen(void **s) {
    (void)s;
    int fma_differs = 0, recip_differs = 0;
    for (uint64_t i = 0; i < 4096; i++) {
        const float z = dz_z_at(1, 2, 3, i, DZ_Z_GAUSSIAN), th = 0.05f * dz_z_at(9, 2, 3, i, DZ_Z_GAUSSIAN);
        float wp, wm;
        dz_zo_pair(th, z, 1e-3f, &wp, &wm);
        fma_differs += dz_zo_f2u(fmaf(1e-3f, z, th)) != dz_zo_f2u(wp);
        volatile float third = 1.0f / 3.0f; /* volatile: the compiler must not fold it back */
        recip_differs += dz_zo_f2u(0.1f - 0.0625f * (z * third)) != dz_zo_f2u(dz_zo_updated(0.1f, z, 3, 0.0625f, 0.0f));
    }
    assert_true(fma_differs > 0);
    assert_true(recip_differs > 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(z_and_words_match),
        cmocka_unit_test(pass_ops_match),
        cmocka_unit_test(stochastic_rounding_matches),
        cmocka_unit_test(contraction_or_reordering_would_be_seen),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
