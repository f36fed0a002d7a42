/* ZO_RNG v2's statistics (docs/ZO_RNG.md section 10), over 10^7 z from the CPU backend:
 *  - the quantile table against an independent inverse: Phi(T[m] / c) (libm's erfc) is the
 *    cell midpoint 1/2 + (m + 1/2) 2^-16, T increases, and the 2^16 values have E z^2 = 1;
 *  - moments: mean, variance, skew, kurtosis within 5 standard errors of N(0, 1)'s (the
 *    kurtosis of the 2^16 values is 2.99925, inside the tolerance of 0.016);
 *  - Kolmogorov-Smirnov against N(0, 1), exact (the sample's atoms are the table's values);
 *  - correlations of neighbours (lags 1..8: inside a word, a block, across blocks), of the
 *    next tensor, draw, step (draw + q) and seed: |E[z z']| within 5 standard errors;
 *  - Rademacher v2: balance overall and per bit position of the 128-element block,
 *    neighbours and the next draw.
 * The golden bits against the numpy reference are in test_zo_rng (golden_z, golden_ops). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>

#include "backend/backend.h"
#include "backend/zo_rng_v2.h"

#define N_Z 10000000u

static float *fill(uint64_t seed, uint32_t tensor, uint32_t draw, dz_zdist dist) {
    float *z = malloc(sizeof(float) * N_Z);
    assert_non_null(z);
    dz_backend_cpu()->ops->z_fill(dz_backend_cpu(), z, seed, tensor, draw, 0, N_Z, dist);
    return z;
}

static double corr(const float *a, const float *b, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) s += (double)a[i] * b[i];
    return s / (double)n; /* E[ab] for zero-mean unit-variance a, b */
}

static double phi_cdf(double x) { return 0.5 * erfc(-x / sqrt(2.0)); }

static void quantile_table(void **state) {
    (void)state;
    double s2 = 0, worst = 0;
    for (uint32_t m = 0; m < 32768; m++) {
        const double t = dz_zo_u2f(dz_zv2_quantile_bits(m));
        s2 += t * t;
        if (m) assert_true(t > dz_zo_u2f(dz_zv2_quantile_bits(m - 1)));
    }
    const double c = 1.0000101408279614; /* the table's scale (docs/ZO_RNG.md section 10) */
    for (uint32_t m = 0; m < 32768; m++) {
        const double p = phi_cdf(dz_zo_u2f(dz_zv2_quantile_bits(m)) / c), want = 0.5 + (m + 0.5) * 0x1p-16;
        const double err = fabs(p - want) / 0x1p-16; /* in cells */
        worst = err > worst ? err : worst;
    }
    print_message("v2 table: scale %.9f, E z^2 - 1 = %.2e, worst |Phi(T/c) - midpoint| %.2e cells\n", c, s2 / 32768 - 1,
                  worst);
    assert_true(fabs(s2 / 32768 - 1) < 1e-6);
    assert_true(worst < 2e-3); /* T is Phi^-1 rounded to float: half an ulp of T, in cells */
}

/* m with T[m]'s bits = a (positive floats order as their bits; T increases). */
static uint32_t atom_of(uint32_t a) {
    uint32_t lo = 0, hi = 32767;
    while (lo < hi) {
        const uint32_t mid = (lo + hi) / 2;
        if (dz_zv2_quantile_bits(mid) < a) lo = mid + 1;
        else hi = mid;
    }
    assert_int_equal(dz_zv2_quantile_bits(lo), a); /* every z is a table value */
    return lo;
}

/* Exact KS distance of the sample from N(0, 1): counts per atom, walked in increasing value. */
static double ks_distance(const float *z, size_t n) {
    uint32_t *count = calloc(65536, sizeof *count); /* index: sign 1 (negative) at 32767 - m, else 32768 + m */
    assert_non_null(count);
    for (size_t i = 0; i < n; i++) {
        const uint32_t b = dz_zo_f2u(z[i]);
        const uint32_t m = atom_of(b & 0x7FFFFFFFu);
        count[(b >> 31) ? 32767 - m : 32768 + m]++;
    }
    double d = 0, below = 0;
    for (uint32_t k = 0; k < 65536; k++) {
        const uint32_t m = k < 32768 ? 32767 - k : k - 32768;
        const double x = (k < 32768 ? -1.0 : 1.0) * dz_zo_u2f(dz_zv2_quantile_bits(m)), f = phi_cdf(x);
        const double lo = below / n, hi = (below + count[k]) / n;
        d = fmax(d, fmax(fabs(f - lo), fabs(f - hi)));
        below += count[k];
    }
    free(count);
    return d;
}

static void gaussian_moments_and_ks(void **state) {
    (void)state;
    float *z = fill(2024, 10, 3, DZ_Z_GAUSSIAN_V2);
    double m1 = 0, m2 = 0, m3 = 0, m4 = 0, zmax = 0;
    for (size_t i = 0; i < N_Z; i++) {
        const double v = z[i], v2 = v * v;
        m1 += v, m2 += v2, m3 += v2 * v, m4 += v2 * v2;
        zmax = fabs(v) > zmax ? fabs(v) : zmax;
    }
    m1 /= N_Z, m2 /= N_Z, m3 /= N_Z, m4 /= N_Z;
    const double sn = sqrt((double)N_Z), ks = ks_distance(z, N_Z);
    print_message("v2 gaussian: mean %.2e var %.6f skew %.2e kurtosis %.5f max|z| %.3f KS %.2e (1%% level %.2e)\n", m1,
                  m2, m3, m4, zmax, ks, 1.63 / sn);
    assert_true(fabs(m1) < 5 / sn);
    assert_true(fabs(m2 - 1) < 5 * sqrt(2.0) / sn);
    assert_true(fabs(m3) < 5 * sqrt(15.0) / sn);
    assert_true(fabs(m4 - 3) < 5 * sqrt(96.0) / sn);
    assert_true(zmax < 4.33);
    assert_true(ks < 1.63 / sn);
    free(z);
}

static void gaussian_independence(void **state) {
    (void)state;
    float *z = fill(2024, 10, 12, DZ_Z_GAUSSIAN_V2), *w;
    const double tol = 5 / sqrt((double)N_Z);
    for (size_t lag = 1; lag <= 8; lag++) assert_true(fabs(corr(z, z + lag, N_Z - lag)) < tol);
    assert_true(fabs(corr(z, z + 128, N_Z - 128)) < tol);
    /* squares too: the halves of one word must not share magnitude */
    double s = 0;
    for (size_t i = 0; i + 1 < N_Z; i += 2) s += ((double)z[i] * z[i] - 1) * ((double)z[i + 1] * z[i + 1] - 1);
    assert_true(fabs(s / (N_Z / 2)) < 5 * 2 / sqrt(N_Z / 2.0)); /* sd of (z^2 - 1)(z'^2 - 1) is 2 */
    const struct { uint64_t seed; uint32_t tensor, draw; const char *what; } other[] = {
        {2024, 11, 12, "next tensor"}, {2024, 10, 13, "next draw"}, {2024, 10, 16, "next step (q = 4)"},
        {2025, 10, 12, "next seed"}};
    for (size_t k = 0; k < sizeof other / sizeof other[0]; k++) {
        w = fill(other[k].seed, other[k].tensor, other[k].draw, DZ_Z_GAUSSIAN_V2);
        const double r = corr(z, w, N_Z);
        print_message("v2 gaussian: E[z z'] with the %s %.2e (tolerance %.2e)\n", other[k].what, r, tol);
        assert_true(fabs(r) < tol);
        free(w);
    }
    free(z);
}

static void rademacher_balance(void **state) {
    (void)state;
    float *z = fill(7, 0, 0, DZ_Z_RADEMACHER_V2), *w = fill(7, 0, 1, DZ_Z_RADEMACHER_V2);
    double s = 0;
    long *pos = calloc(128, sizeof *pos);
    for (size_t i = 0; i < N_Z; i++) {
        assert_true(z[i] == 1.0f || z[i] == -1.0f);
        s += z[i];
        pos[i & 127] += z[i] > 0;
    }
    const double sn = sqrt((double)N_Z), per = N_Z / 128.0;
    assert_true(fabs(s) < 5 * sn);
    for (int k = 0; k < 128; k++) assert_true(fabs(pos[k] - per / 2) < 5 * sqrt(per) / 2);
    for (size_t lag = 1; lag <= 64; lag *= 2) assert_true(fabs(corr(z, z + lag, N_Z - lag)) < 5 / sn);
    assert_true(fabs(corr(z, w, N_Z)) < 5 / sn);
    free(pos);
    free(z);
    free(w);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(quantile_table),
        cmocka_unit_test(gaussian_moments_and_ks),
        cmocka_unit_test(gaussian_independence),
        cmocka_unit_test(rademacher_balance),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
