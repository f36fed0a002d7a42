/* The ZO perturbation RNG and the fused perturbation/update kernels (the CPU backend's ZO
 * ops through dz_backend_cpu(): src/backend/cpu_philox.c and cpu_zo.c; the per-element
 * scalar path is the reference backend's, dz_backend_ref()), checked
 * against:
 *  - Random123's Philox4x32-10 known-answer vectors;
 *  - tests/data/zo/rng_golden.json, written by an independent numpy implementation
 *    (tools/ref_zo_rng.py): z, stochastic-rounding words, f32/bf16 update + perturb, and
 *    checksums of dz_logf / dz_sincos2pi over every input Box-Muller can give them;
 *  - statistics with CLT tolerances (5 sigma), and invariances: every instruction-set level
 *    (core/isa.h) and the per-element scalar path agree, slicing a span in odd pieces changes
 *    nothing, fused == unfused. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <cjson/cJSON.h>

#include "core/isa.h"
#include "distzo/dtype.h"
#include "backend/backend.h"

/* Runs body once per level this CPU can execute, from the baseline up, forced. */
#define FOR_EACH_ISA(isa)                                                   \
    for (dz_isa isa = DZ_ISA_BASELINE; isa < DZ_ISA_COUNT; isa++)           \
        if (dz_isa_force(isa, NULL) == DZ_OK)

/* The same, without the baseline: the levels to compare with it. */
#define FOR_EACH_ISA_ABOVE_BASELINE(isa)                                    \
    for (dz_isa isa = DZ_ISA_BASELINE + 1; isa < DZ_ISA_COUNT; isa++)       \
        if (dz_isa_force(isa, NULL) == DZ_OK)

static void force_isa(dz_isa isa) { assert_int_equal(dz_isa_force(isa, NULL), DZ_OK); }
static void reset_isa(void) { force_isa(DZ_ISA_AUTO); }

static uint32_t fbits(float f) { return dz_zo_f2u(f); }

static void assert_same_f32(const float *a, const float *b, size_t n, const char *what) {
    for (size_t i = 0; i < n; i++)
        if (fbits(a[i]) != fbits(b[i]))
            fail_msg("%s: element %zu differs: %.9g (%08x) vs %.9g (%08x)", what, i, a[i], fbits(a[i]), b[i],
                     fbits(b[i]));
}

/* ---- Philox known answers (Random123 tests/kat_vectors, "philox4x32 10") ---------------- */

static const uint32_t kats[3][10] = {
    {0, 0, 0, 0, 0, 0, 0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8},
    {0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0x408f276d, 0x41c83b0e, 0xa20bc7c6,
     0x6d5451fd},
    {0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0, 0xd16cfe09, 0x94fdcceb, 0x5001e420,
     0x24126ea1},
};

static void philox_known_answers(void **state) {
    (void)state;
    for (int k = 0; k < 3; k++) {
        const uint32_t *v = kats[k];
        uint32_t out[4];
        dz_philox4x32_10(v, v + 4, out);
        for (int w = 0; w < 4; w++) assert_int_equal(out[w], v[6 + w]);
        /* The bulk path maps counter (j, purpose, tensor, draw) and key (seed lo, hi) the same way. */
        const uint64_t seed = v[4] | (uint64_t)v[5] << 32;
        FOR_EACH_ISA(isa) {
            uint32_t x[6];
            dz_backend_cpu()->ops->philox_fill(dz_backend_cpu(), x, seed, v[1], v[2], v[3], 4 * (uint64_t)v[0], 4);
            for (int w = 0; w < 4; w++) assert_int_equal(x[w], v[6 + w]);
            dz_backend_cpu()->ops->philox_fill(dz_backend_cpu(), x, seed, v[1], v[2], v[3], 4 * (uint64_t)v[0] + 1,
                                               3); /* partial block */
            for (int w = 0; w < 3; w++) assert_int_equal(x[w], v[7 + w]);
        }
        reset_isa();
    }
}

/* ---- golden file from tools/ref_zo_rng.py ------------------------------------------------ */

static cJSON *golden;

static int load_golden(void **state) {
    (void)state;
    const char *path = DZ_TEST_DATA "/zo/rng_golden.json";
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "cannot open %s (run tools/ref_zo_rng.py)\n", path);
        return -1;
    }
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = malloc((size_t)len + 1);
    size_t got = fread(text, 1, (size_t)len, f);
    fclose(f);
    text[got] = 0;
    golden = cJSON_Parse(text);
    free(text);
    return golden ? 0 : -1;
}

static int free_golden(void **state) {
    (void)state;
    cJSON_Delete(golden);
    return 0;
}

static double num(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    assert_non_null(v);
    return v->valuedouble;
}

static uint64_t hex64(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    assert_true(cJSON_IsString(v));
    return strtoull(v->valuestring, NULL, 16);
}

/* Integer array `key` of o into a new buffer of 32-bit words. */
static uint32_t *words(const cJSON *o, const char *key, size_t *n) {
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, key);
    assert_true(cJSON_IsArray(a));
    *n = (size_t)cJSON_GetArraySize(a);
    uint32_t *w = malloc(sizeof(uint32_t) * (*n + 1));
    size_t i = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, a) w[i++] = (uint32_t)e->valuedouble;
    return w;
}

static void golden_z(void **state) {
    (void)state;
    const cJSON *c;
    int cases = 0;
    cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(golden, "z")) {
        size_t n;
        uint32_t *want = words(c, "z", &n);
        assert_int_equal(n, (size_t)num(c, "n"));
        float *got = malloc(sizeof(float) * n);
        const uint64_t seed = hex64(c, "seed"), i0 = (uint64_t)num(c, "i0");
        const uint32_t tensor = (uint32_t)num(c, "tensor"), draw = (uint32_t)num(c, "draw");
        const dz_zdist dist = (dz_zdist)num(c, "dist");
        dz_backend_ref()->ops->z_fill(dz_backend_ref(), got, seed, tensor, draw, i0, n, dist);
        for (size_t i = 0; i < n; i++) assert_int_equal(fbits(got[i]), want[i]);
        FOR_EACH_ISA(isa) {
            memset(got, 0, sizeof(float) * n);
            dz_backend_cpu()->ops->z_fill(dz_backend_cpu(), got, seed, tensor, draw, i0, n, dist);
            for (size_t i = 0; i < n; i++)
                if (fbits(got[i]) != want[i])
                    fail_msg("case %d (%s) element %zu: %08x, numpy %08x", cases, dz_isa_name(isa), i,
                             fbits(got[i]), want[i]);
        }
        reset_isa();
        free(got);
        free(want);
        cases++;
    }
    assert_true(cases >= 8);

    const cJSON *s = cJSON_GetObjectItemCaseSensitive(golden, "sr_bits");
    size_t n;
    uint32_t *want = words(s, "x", &n), got[64];
    assert_true(n <= 64);
    dz_backend_cpu()->ops->philox_fill(dz_backend_cpu(), got, hex64(s, "seed"), DZ_PURPOSE_SR,
                                       (uint32_t)num(s, "tensor"), (uint32_t)num(s, "draw"), (uint64_t)num(s, "i0"), n);
    for (size_t i = 0; i < n; i++) assert_int_equal(got[i], want[i]);
    free(want);
}

static uint64_t checksum(const float *v, size_t n) {
    uint64_t h = 0;
    for (size_t i = 0; i < n; i++) h += (uint64_t)fbits(v[i]) * (2 * (uint64_t)i + 1);
    return h;
}

/* dz_logf on every u1 = k 2^-24 (k = 1..2^24) and dz_sincos2pi on every u2 = k 2^-24
 * (k = 0..2^24-1), against numpy's checksums; also the range properties Box-Muller needs. */
static void golden_polynomials_exhaustive(void **state) {
    (void)state;
    const size_t N = (size_t)1 << 24;
    float *a = malloc(sizeof(float) * N), *b = malloc(sizeof(float) * N);
    for (size_t k = 0; k < N; k++) {
        a[k] = dz_logf((float)(int32_t)(k + 1) * 0x1p-24f);
        assert_true(a[k] <= 0.0f);
    }
    assert_int_equal(checksum(a, N), hex64(golden, "checksum_logf_all_u1"));
    for (size_t k = 0; k < N; k++) dz_sincos2pi((float)(int32_t)k * 0x1p-24f, &a[k], &b[k]);
    assert_int_equal(checksum(a, N), hex64(golden, "checksum_sin_all_u2"));
    assert_int_equal(checksum(b, N), hex64(golden, "checksum_cos_all_u2"));
    /* Spot values against libm (the full accuracy scan is tools/ref_zo_rng.py --accuracy). */
    for (size_t k = 1; k < N; k += 4099) {
        const double u = (double)k * 0x1p-24;
        float s, c;
        dz_sincos2pi((float)u, &s, &c);
        assert_true(fabs(s - sin(2 * M_PI * u)) < 2e-7 && fabs(c - cos(2 * M_PI * u)) < 2e-7);
        assert_true(fabs(dz_logf((float)u) - log(u)) <= 2e-7 * fabs(log(u)));
    }
    free(a);
    free(b);
}

/* The fused update + perturb of f32 and bf16 masters against numpy, at every level. */
static void golden_ops(void **state) {
    (void)state;
    const cJSON *c;
    int cases = 0;
    cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(golden, "ops")) {
        size_t n, q = 0;
        float g[8]; /* float32 values, exact as JSON doubles */
        const cJSON *e;
        cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(c, "g")) {
            assert_true(q < 8);
            g[q++] = (float)e->valuedouble;
        }
        const dz_zo_update upd = {.g = g, .q = (int)num(c, "q"), .lr = (float)num(c, "lr"), .wd = (float)num(c, "wd"),
                                  .step = (uint32_t)num(c, "step")};
        assert_int_equal((size_t)upd.q, q);
        const uint64_t seed = hex64(c, "seed"), i0 = (uint64_t)num(c, "i0");
        const uint32_t tensor = (uint32_t)num(c, "tensor"), next = (upd.step + 1) * (uint32_t)upd.q;
        const dz_zdist dist = (dz_zdist)num(c, "dist");
        const float eps = (float)num(c, "eps");

        const cJSON *f = cJSON_GetObjectItemCaseSensitive(c, "f32");
        uint32_t *th = words(f, "theta", &n), *up = words(f, "updated", &n), *wp = words(f, "w_plus", &n),
                 *wm = words(f, "w_minus", &n);
        float *theta = malloc(4 * n), *p = malloc(4 * n), *m = malloc(4 * n);
        FOR_EACH_ISA(isa) {
            memcpy(theta, th, 4 * n);
            dz_backend_cpu()->ops->update_then_perturb_f32(dz_backend_cpu(), theta, p, m, n, &upd, eps, seed, tensor,
                                                           next, i0, dist);
            for (size_t i = 0; i < n; i++) {
                assert_int_equal(fbits(theta[i]), up[i]);
                assert_int_equal(fbits(p[i]), wp[i]);
                assert_int_equal(fbits(m[i]), wm[i]);
            }
        }
        free(th), free(up), free(wp), free(wm);

        const cJSON *b = cJSON_GetObjectItemCaseSensitive(c, "bf16");
        th = words(b, "theta", &n), up = words(b, "updated", &n), wp = words(b, "w_plus", &n),
        wm = words(b, "w_minus", &n);
        uint16_t *h = malloc(2 * n);
        FOR_EACH_ISA(isa) {
            for (size_t i = 0; i < n; i++) h[i] = (uint16_t)th[i];
            dz_backend_cpu()->ops->update_then_perturb_bf16(dz_backend_cpu(), h, p, m, n, &upd, eps, seed, tensor, next,
                                                            i0, dist);
            for (size_t i = 0; i < n; i++) {
                assert_int_equal(h[i], up[i]);
                assert_int_equal(fbits(p[i]), wp[i]);
                assert_int_equal(fbits(m[i]), wm[i]);
            }
        }
        reset_isa();
        free(th), free(up), free(wp), free(wm), free(h), free(theta), free(p), free(m);
        cases++;
    }
    assert_int_equal(cases, 6);
}

/* ---- invariances ------------------------------------------------------------------------- */

/* Every SIMD variant == the per-element scalar path, over many blocks at unaligned starts. */
static void simd_variants_match_scalar(void **state) {
    (void)state;
    const size_t n = 150001;
    float *want = malloc(4 * n), *got = malloc(4 * n);
    char ran[64] = "";
    for (int dist = 0; dist < 4; dist++) {
        dz_backend_ref()->ops->z_fill(dz_backend_ref(), want, 0x9E3779B97F4A7C15ull, 31, 77 + dist, 5, n,
                                      (dz_zdist)dist);
        FOR_EACH_ISA(isa) {
            dz_backend_cpu()->ops->z_fill(dz_backend_cpu(), got, 0x9E3779B97F4A7C15ull, 31, 77 + dist, 5, n,
                                          (dz_zdist)dist);
            assert_same_f32(got, want, n, dz_isa_name(isa));
            if (dist == 0) strcat(strcat(ran, " "), dz_isa_name(isa));
        }
    }
    reset_isa();
    print_message("SIMD variants checked:%s (AUTO picks %s)\n", ran, dz_isa_name(dz_isa_active()));
    free(want);
    free(got);
}

static const size_t pieces[] = {1, 3, 5, 7, 1021, 2, 1029, 4093, 11, 6000};

static void slicing_invariance(void **state) {
    (void)state;
    const size_t n = 20000;
    float *whole = malloc(4 * n), *sliced = malloc(4 * n);
    for (int dist = 0; dist < 4; dist++) {
        dz_backend_cpu()->ops->z_fill(dz_backend_cpu(), whole, 42, 3, 9, 1000003, n, (dz_zdist)dist);
        for (size_t at = 0, k = 0; at < n; k++) {
            size_t m = pieces[k % 10] < n - at ? pieces[k % 10] : n - at;
            dz_backend_cpu()->ops->z_fill(dz_backend_cpu(), sliced + at, 42, 3, 9, 1000003 + at, m, (dz_zdist)dist);
            at += m;
        }
        assert_same_f32(sliced, whole, n, "z sliced");
    }
    free(whole), free(sliced);
}

/* A fused update + perturb over span [i0, i0+n) of one tensor, f32 and bf16 masters. */
typedef struct span_out {
    float *theta, *wp, *wm, *bwp, *bwm;
    uint16_t *h;
} span_out;

static span_out span_alloc(size_t n) {
    span_out o = {malloc(4 * n), malloc(4 * n), malloc(4 * n), malloc(4 * n), malloc(4 * n), malloc(2 * n)};
    for (size_t i = 0; i < n; i++) {
        o.theta[i] = 0.01f * (float)((int)(i % 201) - 100);
        o.h[i] = dz_f32_to_bf16(o.theta[i] * 3.0f);
    }
    return o;
}

static void span_free(span_out *o) { free(o->theta), free(o->wp), free(o->wm), free(o->bwp), free(o->bwm), free(o->h); }

static void span_assert_equal(const span_out *a, const span_out *b, size_t n, const char *what) {
    assert_same_f32(a->theta, b->theta, n, what);
    assert_same_f32(a->wp, b->wp, n, what);
    assert_same_f32(a->wm, b->wm, n, what);
    assert_same_f32(a->bwp, b->bwp, n, what);
    assert_same_f32(a->bwm, b->bwm, n, what);
    assert_memory_equal(a->h, b->h, 2 * n);
}

static const float g3[3] = {0.7f, -1.3f, 2.1f};

static void fused_slices(span_out *o, size_t off, size_t m, const dz_zo_update *upd, uint64_t i0) {
    const dz_backend *cpu = dz_backend_cpu();
    cpu->ops->update_then_perturb_f32(cpu, o->theta + off, o->wp + off, o->wm + off, m, upd, 1e-3f, 7, 5, 39, i0 + off,
                                 DZ_Z_GAUSSIAN);
    cpu->ops->update_then_perturb_bf16(cpu, o->h + off, o->bwp + off, o->bwm + off, m, upd, 1e-3f, 7, 5, 39, i0 + off,
                                  DZ_Z_GAUSSIAN);
}

static void slicing_invariance_fused(void **state) {
    (void)state;
    const size_t n = 20000;
    const dz_zo_update upd = {.g = g3, .q = 3, .lr = 1e-3f, .wd = 0.01f, .step = 12};
    span_out whole = span_alloc(n), sliced = span_alloc(n);
    fused_slices(&whole, 0, n, &upd, 13);
    for (size_t at = 0, k = 3; at < n; k++) {
        const size_t m = pieces[k % 10] < n - at ? pieces[k % 10] : n - at;
        fused_slices(&sliced, at, m, &upd, 13);
        at += m;
    }
    span_assert_equal(&sliced, &whole, n, "fused sliced");
    span_free(&whole);
    span_free(&sliced);
}

/* update_* then perturb_pair* (upd non-NULL), or perturb_pair* alone, on a fresh
 * span of n elements at i0 (seed 99, tensor 4, eps 2e-3). */
static span_out unfused_step(size_t n, uint64_t i0, const dz_zo_update *upd, uint32_t next, dz_zdist dist) {
    span_out o = span_alloc(n);
    if (upd) {
        dz_backend_cpu()->ops->update_f32(dz_backend_cpu(), o.theta, n, upd->g, upd->q, upd->lr, upd->wd, 99, 4,
                                          upd->step, i0, dist);
        dz_backend_cpu()->ops->update_bf16(dz_backend_cpu(), o.h, n, upd->g, upd->q, upd->lr, upd->wd, 99, 4, upd->step,
                                           i0, dist);
    }
    dz_backend_cpu()->ops->perturb_pair(dz_backend_cpu(), o.theta, o.wp, o.wm, n, 2e-3f, 99, 4, next, i0, dist);
    dz_backend_cpu()->ops->perturb_pair_bf16(dz_backend_cpu(), o.h, o.bwp, o.bwm, n, 2e-3f, 99, 4, next, i0, dist);
    return o;
}

/* The same through update_then_perturb_*. */
static span_out fused_step(size_t n, uint64_t i0, const dz_zo_update *upd, uint32_t next, dz_zdist dist) {
    span_out o = span_alloc(n);
    dz_backend_cpu()->ops->update_then_perturb_f32(dz_backend_cpu(), o.theta, o.wp, o.wm, n, upd, 2e-3f, 99, 4, next,
                                                   i0, dist);
    dz_backend_cpu()->ops->update_then_perturb_bf16(dz_backend_cpu(), o.h, o.bwp, o.bwm, n, upd, 2e-3f, 99, 4, next, i0,
                                                    dist);
    return o;
}

/* step(...), run at the level in force (isa, for the failure message), equals want. */
typedef span_out (*step_fn)(size_t n, uint64_t i0, const dz_zo_update *upd, uint32_t next, dz_zdist dist);

static void assert_step_matches(step_fn step, const char *step_name, dz_isa isa, const span_out *want, size_t n,
                                uint64_t i0, const dz_zo_update *upd, uint32_t next, dz_zdist dist) {
    char what[64];
    snprintf(what, sizeof what, "%s at %s%s", step_name, dz_isa_name(isa), upd ? "" : ", no update");
    span_out got = step(n, i0, upd, next, dist);
    span_assert_equal(&got, want, n, what);
    span_free(&got);
}

/* update_then_perturb_* == update_* then perturb_pair*, for every update shape
 * (mean or not, decay or not) and without an update; and both at every level give the
 * baseline's unfused bits (every hand-vectorized loop of cpu_zo.c and the RNG). */
static void fused_equals_unfused(void **state) {
    (void)state;
    const size_t n = 5003; /* several 1024-element chunks and a ragged end */
    const uint64_t i0 = 3;
    const struct { int q; float wd; dz_zdist dist; } shapes[] = {
        {1, 0.0f, DZ_Z_GAUSSIAN},    {3, 0.01f, DZ_Z_GAUSSIAN},    {2, 0.1f, DZ_Z_RADEMACHER},
        {3, 0.0f, DZ_Z_RADEMACHER}, {1, 0.0f, DZ_Z_GAUSSIAN_V2}, {3, 0.01f, DZ_Z_GAUSSIAN_V2},
        {2, 0.1f, DZ_Z_RADEMACHER_V2}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const dz_zo_update upd = {.g = g3, .q = shapes[s].q, .lr = 3e-3f, .wd = shapes[s].wd, .step = 1000};
        const uint32_t next = (upd.step + 1) * (uint32_t)upd.q;
        const dz_zdist dist = shapes[s].dist;
        for (int with_update = 1; with_update >= 0; with_update--) {
            const dz_zo_update *u = with_update ? &upd : NULL;
            force_isa(DZ_ISA_BASELINE);
            span_out want = unfused_step(n, i0, u, next, dist);
            FOR_EACH_ISA(isa) assert_step_matches(fused_step, "fused", isa, &want, n, i0, u, next, dist);
            FOR_EACH_ISA_ABOVE_BASELINE(isa)
                assert_step_matches(unfused_step, "unfused", isa, &want, n, i0, u, next, dist);
            span_free(&want);
        }
        reset_isa();
    }
}

/* ---- statistics (tolerances: 5 standard errors of the estimate) ------------------------- */

static double corr(const float *a, const float *b, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) s += (double)a[i] * b[i];
    return s / (double)n; /* E[ab] for zero-mean unit-variance a, b */
}

static void gaussian_moments_and_independence(void **state) {
    (void)state;
    const size_t n = 1000000;
    float *z = malloc(4 * n), *w = malloc(4 * n);
    dz_backend_cpu()->ops->z_fill(dz_backend_cpu(), z, 2024, 10, 3, 0, n, DZ_Z_GAUSSIAN);
    double m1 = 0, m2 = 0, m4 = 0, zmax = 0;
    size_t tail3 = 0;
    for (size_t i = 0; i < n; i++) {
        const double v = z[i];
        assert_true(isfinite(v));
        m1 += v, m2 += v * v, m4 += v * v * v * v;
        zmax = fabs(v) > zmax ? fabs(v) : zmax;
        tail3 += fabs(v) > 3.0;
    }
    m1 /= n, m2 /= n, m4 /= n;
    const double sn = sqrt((double)n);
    print_message("gaussian: mean %.2e var %.5f kurtosis %.4f max|z| %.3f P(|z|>3) %.5f\n", m1, m2, m4, zmax,
                  (double)tail3 / n);
    assert_true(fabs(m1) < 5 / sn);                     /* sd 1 */
    assert_true(fabs(m2 - 1) < 5 * sqrt(2.0) / sn);     /* sd of z^2 is sqrt(2) */
    assert_true(fabs(m4 - 3) < 5 * sqrt(96.0) / sn);    /* var of z^4 = 105 - 9 */
    assert_true(zmax <= 5.7686f);                       /* sqrt(-2 ln 2^-24): the largest radius */
    const double p3 = 0.0026997960632601866;            /* P(|z| > 3) */
    assert_true(fabs((double)tail3 / n - p3) < 5 * sqrt(p3 * (1 - p3)) / sn);
    /* Neighbours: lag 1 (inside a Box-Muller pair), lag 2 (across pairs), lag 4 (next block). */
    for (size_t lag = 1; lag <= 4; lag *= 2) assert_true(fabs(corr(z, z + lag, n - lag)) < 5 / sn);
    /* The next tensor, the next draw, the next seed. (Gaussian and Rademacher z of the same
     * counter share words, so they are dependent; a run uses one distribution.) */
    dz_backend_cpu()->ops->z_fill(dz_backend_cpu(), w, 2024, 11, 3, 0, n, DZ_Z_GAUSSIAN);
    assert_true(fabs(corr(z, w, n)) < 5 / sn);
    dz_backend_cpu()->ops->z_fill(dz_backend_cpu(), w, 2024, 10, 4, 0, n, DZ_Z_GAUSSIAN);
    assert_true(fabs(corr(z, w, n)) < 5 / sn);
    dz_backend_cpu()->ops->z_fill(dz_backend_cpu(), w, 2025, 10, 3, 0, n, DZ_Z_GAUSSIAN);
    assert_true(fabs(corr(z, w, n)) < 5 / sn);
    free(z);
    free(w);
}

static void rademacher_balance(void **state) {
    (void)state;
    const size_t n = 1000000;
    float *z = malloc(4 * n), *w = malloc(4 * n);
    dz_backend_cpu()->ops->z_fill(dz_backend_cpu(), z, 7, 0, 0, 0, n, DZ_Z_RADEMACHER);
    dz_backend_cpu()->ops->z_fill(dz_backend_cpu(), w, 7, 0, 1, 0, n, DZ_Z_RADEMACHER);
    double s = 0;
    long lanes[4] = {0};
    for (size_t i = 0; i < n; i++) {
        assert_true(z[i] == 1.0f || z[i] == -1.0f);
        s += z[i];
        lanes[i & 3] += z[i] > 0;
    }
    const double sn = sqrt((double)n);
    assert_true(fabs(s) < 5 * sn);
    for (int l = 0; l < 4; l++) assert_true(fabs(lanes[l] - n / 8.0) < 5 * sqrt(n / 4.0) / 2);
    assert_true(fabs(corr(z, z + 1, n - 1)) < 5 / sn);
    assert_true(fabs(corr(z, w, n)) < 5 / sn);
    free(z);
    free(w);
}

/* ---- bf16 stochastic rounding -------------------------------------------------------------- */

/* Weight decay alone (g = 0) moves every weight by the same sub-ulp amount: 1.5 -> 1.5 (1 - lr wd)
 * with lr wd chosen so the step is ~1e-3 bf16 ulp. Rounding is unbiased, so the mean moves by
 * the step, within the binomial 5 sigma; and the result is reproducible. */
static void bf16_stochastic_rounding_unbiased(void **state) {
    (void)state;
    const size_t n = 1000000;
    uint16_t *h = malloc(2 * n), *h2 = malloc(2 * n);
    const uint16_t one_half = 0x3FC0; /* 1.5; bf16 ulp in [1, 2) is 2^-7 */
    for (size_t i = 0; i < n; i++) h[i] = h2[i] = one_half;
    const float g = 0.0f, lr = 1e-3f, wd = 0.0078125f * 1e-3f / 1.5f / 1e-3f; /* lr wd 1.5 = 1e-3 ulp */
    dz_backend_cpu()->ops->update_bf16(dz_backend_cpu(), h, n, &g, 1, lr, wd, 555, 8, 21, 0, DZ_Z_GAUSSIAN);
    dz_backend_cpu()->ops->update_bf16(dz_backend_cpu(), h2, n, &g, 1, lr, wd, 555, 8, 21, 0, DZ_Z_GAUSSIAN);
    assert_memory_equal(h, h2, 2 * n);
    /* The f32 value each weight had before rounding, as the spec computes it. */
    const float th = 1.5f, v = th - lr * (0.0f + wd * th);
    const double p = (double)(th - v) / 0x1p-7; /* probability of moving down one ulp */
    size_t down = 0;
    for (size_t i = 0; i < n; i++) {
        assert_true(h[i] == one_half || h[i] == one_half - 1);
        down += h[i] != one_half;
    }
    const double sd = sqrt(n * p * (1 - p));
    print_message("bf16 SR: step %.3g ulp, %zu of %zu weights moved (expected %.1f +- %.1f)\n", p, down, n, n * p, sd);
    assert_true(p > 0.9e-3 && p < 1.1e-3);
    assert_true(fabs((double)down - n * p) < 5 * sd);
    /* A different step draws different words: the moved set changes. */
    for (size_t i = 0; i < n; i++) h2[i] = one_half;
    dz_backend_cpu()->ops->update_bf16(dz_backend_cpu(), h2, n, &g, 1, lr, wd, 555, 8, 22, 0, DZ_Z_GAUSSIAN);
    size_t both = 0;
    for (size_t i = 0; i < n; i++) both += h[i] != one_half && h2[i] != one_half;
    assert_true(both < 20); /* ~ n p^2 = 1 if independent */
    free(h);
    free(h2);
}

/* Spot checks of the rounding rule itself. */
static void bf16_rounding_rule(void **state) {
    (void)state;
    assert_int_equal(dz_bf16_round_stochastic(1.0f, 0xFFFFFFFF), 0x3F80);          /* exact stays */
    assert_int_equal(dz_bf16_round_stochastic(dz_zo_u2f(0x3F800001), 0xFFFF), 0x3F81); /* up iff x >= 2^16 - 1 */
    assert_int_equal(dz_bf16_round_stochastic(dz_zo_u2f(0x3F800001), 0xFFFE), 0x3F80);
    assert_int_equal(dz_bf16_round_stochastic(dz_zo_u2f(0xBF808000), 0x8000), 0xBF81); /* magnitude-wise */
    assert_int_equal(dz_bf16_round_stochastic(dz_zo_u2f(0xBF808000), 0x7FFF), 0xBF80);
    assert_int_equal(dz_bf16_round_stochastic(INFINITY, 0xFFFF), 0x7F80);
    assert_int_equal(dz_bf16_round_stochastic(-INFINITY, 0xFFFF), 0xFF80);
    assert_int_equal(dz_bf16_round_stochastic(dz_zo_u2f(0x7F800001), 0xFFFF) & 0x7FC0, 0x7FC0); /* NaN stays NaN */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(philox_known_answers),
        cmocka_unit_test(golden_z),
        cmocka_unit_test(golden_polynomials_exhaustive),
        cmocka_unit_test(golden_ops),
        cmocka_unit_test(simd_variants_match_scalar),
        cmocka_unit_test(slicing_invariance),
        cmocka_unit_test(slicing_invariance_fused),
        cmocka_unit_test(fused_equals_unfused),
        cmocka_unit_test(gaussian_moments_and_independence),
        cmocka_unit_test(rademacher_balance),
        cmocka_unit_test(bf16_stochastic_rounding_unbiased),
        cmocka_unit_test(bf16_rounding_rule),
    };
    return cmocka_run_group_tests(tests, load_golden, free_golden);
}
