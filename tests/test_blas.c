/* OpenBLAS, the benchmarks' reference (the model runs distzo's own GEMM, tests/test_gemm.c):
 * loading, results against a naive double-precision reference with a rigorous rounding
 * bound, the core selection against /proc/cpuinfo and the documented policy, a
 * forced-Prescott child process and a missing-library child. */
#define _GNU_SOURCE /* strcasestr */
#include <math.h>
#include <setjmp.h>
#include <spawn.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "core/cpu_features.h"
#include "backend/blas.h"

extern char **environ;

static void fill(float *x, size_t n, uint32_t seed, float scale) {
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        x[i] = scale * ((float)(seed >> 8) * (2.0f / 16777216.0f) - 1.0f);
    }
}

static float *alloc_filled(size_t n, uint32_t seed, float scale) {
    float *x = malloc((n ? n : 1) * sizeof *x);
    assert_non_null(x);
    fill(x, n, seed, scale);
    return x;
}

/* One sgemm problem in dz_sgemm's terms; A/B/C stored with the given row strides. */
typedef struct gemm_case {
    bool ta, tb;
    int M, N, K;
    float alpha, beta;
    int pad; /* extra elements per stored row, to exercise lda/ldb/ldc */
} gemm_case;

typedef struct gemm_data {
    float *A, *B, *C0, *C;
    int lda, ldb, ldc;
} gemm_data;

static gemm_data make_data(const gemm_case *c, uint32_t seed) {
    gemm_data d;
    int a_rows = c->ta ? c->K : c->M, a_cols = c->ta ? c->M : c->K;
    int b_rows = c->tb ? c->N : c->K, b_cols = c->tb ? c->K : c->N;
    d.lda = a_cols + c->pad;
    d.ldb = b_cols + c->pad;
    d.ldc = c->N + c->pad;
    if (d.lda < 1) d.lda = 1;
    if (d.ldb < 1) d.ldb = 1;
    if (d.ldc < 1) d.ldc = 1;
    d.A = alloc_filled((size_t)a_rows * d.lda, seed, 1.0f);
    d.B = alloc_filled((size_t)b_rows * d.ldb, seed + 1, 0.5f);
    d.C0 = alloc_filled((size_t)c->M * d.ldc, seed + 2, 2.0f);
    d.C = malloc(((size_t)c->M * d.ldc + 1) * sizeof *d.C);
    assert_non_null(d.C);
    memcpy(d.C, d.C0, (size_t)c->M * d.ldc * sizeof *d.C);
    return d;
}

static void free_data(gemm_data *d) {
    free(d->A);
    free(d->B);
    free(d->C0);
    free(d->C);
}

static double a_at(const gemm_case *c, const gemm_data *d, int i, int k) {
    return c->ta ? d->A[(size_t)k * d->lda + i] : d->A[(size_t)i * d->lda + k];
}

static double b_at(const gemm_case *c, const gemm_data *d, int k, int j) {
    return c->tb ? d->B[(size_t)j * d->ldb + k] : d->B[(size_t)k * d->ldb + j];
}

/* Checks rows (every `row_step`-th, plus the last) of d->C against a double reference.
 * Bound: |fl(dot) - dot| <= gamma_K sum|a||b| with gamma_K ~ K u (u = 2^-24), plus the
 * roundings of alpha*, beta* and the final add; `slack` multiplies it (2 when comparing
 * two computed results). Returns the worst error/bound ratio. */
static double check_against_reference(const gemm_case *c, const gemm_data *d, const float *C,
                                      int row_step, double slack) {
    const double u = ldexp(1.0, -24);
    double worst = 0.0;
    for (int i = 0; i < c->M; i += row_step) {
        if (i + row_step >= c->M) i = c->M - 1;
        for (int j = 0; j < c->N; j++) {
            double dot = 0.0, mag = 0.0;
            for (int k = 0; k < c->K; k++) {
                double p = a_at(c, d, i, k) * b_at(c, d, k, j);
                dot += p;
                mag += fabs(p);
            }
            double c0 = c->beta == 0.0f ? 0.0 : d->C0[(size_t)i * d->ldc + j];
            double ref = c->alpha * dot + c->beta * c0;
            double bound = slack * ((c->K + 4) * u * fabs(c->alpha) * mag + 3 * u * fabs(c->beta * c0)) +
                           1e-30;
            double got = C[(size_t)i * d->ldc + j];
            double err = fabs(got - ref);
            if (!(err <= bound)) {
                fail_msg("M=%d N=%d K=%d ta=%d tb=%d alpha=%g beta=%g: C[%d,%d] = %.9g, reference "
                         "%.9g, error %.3g > bound %.3g (core %s)",
                         c->M, c->N, c->K, c->ta, c->tb, c->alpha, c->beta, i, j, got, ref, err,
                         bound, dz_blas_core_name());
            }
            if (err / bound > worst) worst = err / bound;
        }
        if (i == c->M - 1) break;
    }
    return worst;
}

static void run_case(const gemm_case *c, uint32_t seed) {
    gemm_data d = make_data(c, seed);
    dz_sgemm(c->ta, c->tb, c->M, c->N, c->K, c->alpha, d.A, d.lda, d.B, d.ldb, c->beta, d.C, d.ldc);
    /* Large problems: a sample of rows keeps the double reference fast. */
    int step = (double)c->M * c->N * c->K > 5e7 ? c->M / 37 + 1 : 1;
    check_against_reference(c, &d, d.C, step, 1.0);
    /* The row padding must never write outside C's rows' first N columns. */
    for (int i = 0; i < c->M; i++)
        for (int j = c->N; j < d.ldc; j++)
            assert_true(d.C[(size_t)i * d.ldc + j] == d.C0[(size_t)i * d.ldc + j]);
    free_data(&d);
}

/* Shapes: degenerate, odd, K not a multiple of 16, around OpenBLAS's small-matrix
 * thresholds (M*N 1200, K 32, M*N*K 1e6), the OPT-125m shapes, all transpositions. */
static const gemm_case k_cases[] = {
    {false, true, 1, 1, 1, 1.0f, 0.0f, 0},
    {false, true, 1, 768, 768, 1.0f, 0.0f, 0},
    {false, false, 1, 768, 768, 1.0f, 0.0f, 0},
    {false, true, 7, 1, 65, 1.0f, 0.0f, 3},
    {false, true, 13, 17, 19, 1.0f, 0.0f, 0},
    {false, false, 13, 17, 19, -0.5f, 0.75f, 2},
    {true, false, 13, 17, 19, 1.0f, 1.0f, 1},
    {true, true, 13, 17, 19, 2.0f, 0.0f, 0},
    {false, true, 18, 64, 64, 1.0f, 0.0f, 0},
    {false, true, 19, 64, 64, 1.0f, 0.0f, 0},
    {false, true, 5, 240, 31, 1.0f, 0.0f, 0},
    {false, true, 5, 240, 32, 1.0f, 0.0f, 0},
    {false, true, 5, 1201, 40, 1.0f, 0.5f, 0},
    {false, false, 270, 100, 37, 1.0f, 0.0f, 0},
    {false, false, 271, 100, 37, 1.0f, 0.0f, 0},
    {false, true, 33, 100, 1001, 1.0f, 0.0f, 5},
    {true, false, 33, 100, 1001, 1.0f, 0.0f, 0},
    {false, true, 64, 172, 64, 1.0f, 0.0f, 0},
    {false, true, 3, 64, 172, 1.0f, -1.0f, 0},
    {false, true, 2048, 768, 768, 1.0f, 0.0f, 0},
    {false, false, 2048, 768, 768, 1.0f, 0.0f, 0},
    {false, true, 2048, 3072, 768, 1.0f, 0.0f, 0},
    {false, true, 2048, 768, 3072, 1.0f, 0.0f, 0},
    {false, true, 4, 3, 0, 1.0f, 0.5f, 0}, /* K = 0: C = beta C */
};

static void require_blas(void) {
    dz_error err = {0};
    if (dz_blas_init(&err) != DZ_OK)
        fail_msg("dz_blas_init: %s", err.msg);
}

static void sgemm_matches_reference(void **state) {
    (void)state;
    require_blas();
    for (int t = 1; t <= 2; t++) {
        dz_blas_set_threads(t);
        for (size_t i = 0; i < sizeof k_cases / sizeof k_cases[0]; i++)
            run_case(&k_cases[i], (uint32_t)(100 + i));
    }
}

static void beta_zero_ignores_nan_in_c(void **state) {
    (void)state;
    require_blas();
    static const gemm_case cases[] = {
        {false, true, 1, 64, 64, 1.0f, 0.0f, 0}, /* padded small path */
        {false, true, 64, 256, 256, 1.0f, 0.0f, 0},
    };
    for (size_t i = 0; i < 2; i++) {
        gemm_data d = make_data(&cases[i], 7);
        for (int r = 0; r < cases[i].M * d.ldc; r++) d.C[r] = NAN;
        dz_sgemm(false, true, cases[i].M, cases[i].N, cases[i].K, 1.0f, d.A, d.lda, d.B, d.ldb, 0.0f,
                 d.C, d.ldc);
        check_against_reference(&cases[i], &d, d.C, 1, 1.0);
        free_data(&d);
    }
}

/* --- selection ------------------------------------------------------------------ */

/* /proc/cpuinfo's flags line: the kernel's own reading of cpuid and XCR0. */
static int cpuinfo_has(const char *cpuinfo, const char *flag) {
    const char *line = strstr(cpuinfo, "\nflags");
    if (!line) return -1;
    const char *end = strchr(line + 1, '\n');
    size_t n = strlen(flag);
    for (const char *p = strchr(line, ':'); p && p < end; p++)
        if (p[0] == ' ' && !strncmp(p + 1, flag, n) && (p[1 + n] == ' ' || p[1 + n] == '\n'))
            return 1;
    return 0;
}

static void cpu_features_match_proc_cpuinfo(void **state) {
    (void)state;
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) fail_msg("/proc/cpuinfo: cannot open (this project builds for Linux on x86-64)");
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const dz_cpu_features *c = dz_cpu_features_get();
    struct { const char *flag; bool have; } flags[] = {
        {"sse4_2", c->sse42},         {"avx", c->avx && c->os_ymm},
        {"avx2", c->avx2 && c->os_ymm}, {"fma", c->fma && c->os_ymm},
        {"avx512f", c->avx512f && c->os_zmm},   {"avx512bw", c->avx512bw && c->os_zmm},
        {"avx512dq", c->avx512dq && c->os_zmm}, {"avx512vl", c->avx512vl && c->os_zmm},
        {"avx512cd", c->avx512cd && c->os_zmm}, {"avx512_bf16", c->avx512_bf16 && c->os_zmm},
    };
    if (cpuinfo_has(buf, "sse2") != 1) fail_msg("/proc/cpuinfo has no sse2 flag: not an x86-64 cpuinfo");
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++)
        if (cpuinfo_has(buf, flags[i].flag) != (int)flags[i].have)
            fail_msg("flag %s: cpuinfo says %d, dz_cpu_detect says %d", flags[i].flag,
                     cpuinfo_has(buf, flags[i].flag), flags[i].have);
    char want[64];
    snprintf(want, sizeof want, "vendor_id\t: %s\n", c->vendor);
    assert_non_null(strstr(buf, want));
    snprintf(want, sizeof want, "cpu family\t: %d\n", c->family);
    assert_non_null(strstr(buf, want));
    snprintf(want, sizeof want, "\nmodel\t\t: %d\n", c->model);
    assert_non_null(strstr(buf, want));
    char line[512];
    dz_cpu_describe(c, line, sizeof line);
    assert_non_null(strstr(line, c->vendor));
    print_message("cpu: %s\n", line);
}

static void choose_core_policy(void **state) {
    (void)state;
    dz_cpu_features f = {0};
    f.sse42 = f.avx = f.avx2 = f.fma = f.os_ymm = true;
    assert_string_equal(dz_blas_choose_core(&f), "Haswell");
    f.avx512f = f.avx512bw = f.avx512dq = f.avx512vl = f.avx512cd = true;
    assert_string_equal(dz_blas_choose_core(&f), "Haswell"); /* OS does not save ZMM */
    f.os_zmm = true;
    assert_string_equal(dz_blas_choose_core(&f), "SkylakeX");
    f.avx512_bf16 = true;
    assert_string_equal(dz_blas_choose_core(&f), "Cooperlake");
    f.avx512cd = false;
    assert_string_equal(dz_blas_choose_core(&f), "Haswell");
    f.fma = false;
    assert_null(dz_blas_choose_core(&f));
    dz_cpu_features none = {0};
    assert_null(dz_blas_choose_core(&none));
}

static void selected_core_is_reported(void **state) {
    (void)state;
    require_blas();
    const char *core = dz_blas_core_name();
    const char *sel = dz_blas_selection();
    print_message("%s\n%s\n", sel, dz_blas_config());
    assert_true(strlen(core) > 0);
    assert_string_not_equal(core, "unknown");
    assert_non_null(strstr(sel, core));
    assert_non_null(strcasestr(dz_blas_config(), core)); /* OpenBLAS's own build string */
    const char *env = getenv("OPENBLAS_CORETYPE");
    const char *want = dz_blas_choose_core(dz_cpu_features_get());
    if (strstr(sel, "already loaded")) {
        /* Someone loaded OpenBLAS first (e.g. LD_PRELOAD): only honesty is testable. */
        assert_null(strstr(sel, "selected by distzo"));
    } else if (env && *env) {
        assert_non_null(strstr(sel, "environment"));
    } else if (want) {
        assert_non_null(strstr(sel, "selected by distzo"));
        if (strcasecmp(core, want) != 0)
            fail_msg("distzo chose %s but OpenBLAS runs %s (%s)", want, core, sel);
        /* Our choice must not leak into child processes' environment. */
        assert_null(getenv("OPENBLAS_CORETYPE"));
    } else {
        assert_non_null(strstr(sel, "own detection"));
    }
}

/* --- child processes --------------------------------------------------------------- */

/* A fixed set of problems both parent and child compute; results concatenated. */
static const gemm_case k_cross[] = {
    {false, true, 64, 768, 768, 1.0f, 0.0f, 0},
    {false, true, 1, 768, 768, 1.0f, 0.0f, 0},
    {false, false, 37, 100, 1001, 1.0f, 0.0f, 0},
    {true, false, 5, 3, 4, 1.0f, 0.5f, 0},
    {false, true, 9, 50, 33, -1.0f, 1.0f, 0},
};

static int write_cross_results(const char *path) {
    FILE *f = fopen(path, "wb");
    if (!f) return 3;
    dz_error err = {0};
    dz_status st = dz_blas_init(&err);
    fprintf(f, "%d\n%s\n%s\n", (int)st, st == DZ_OK ? dz_blas_core_name() : "-",
            st == DZ_OK ? dz_blas_selection() : err.msg);
    for (size_t i = 0; st == DZ_OK && i < sizeof k_cross / sizeof k_cross[0]; i++) {
        gemm_data d = make_data(&k_cross[i], (uint32_t)(500 + i));
        const gemm_case *c = &k_cross[i];
        dz_sgemm(c->ta, c->tb, c->M, c->N, c->K, c->alpha, d.A, d.lda, d.B, d.ldb, c->beta, d.C, d.ldc);
        fwrite(d.C, sizeof(float), (size_t)c->M * d.ldc, f);
        free_data(&d);
    }
    return fclose(f) == 0 ? 0 : 3;
}

/* Runs this test binary as a child with one variable set; the other one and LD_PRELOAD
 * (which would load OpenBLAS before distzo can act) are dropped. */
static void spawn_child(const char *mode, const char *var, const char *value, const char *out) {
    char *envp[512];
    char setting[512];
    int n = 0;
    for (char **e = environ; *e && n < 500; e++)
        if (strncmp(*e, "OPENBLAS_CORETYPE=", 18) && strncmp(*e, "DISTZO_OPENBLAS=", 16) &&
            strncmp(*e, "LD_PRELOAD=", 11))
            envp[n++] = *e;
    snprintf(setting, sizeof setting, "%s=%s", var, value);
    envp[n++] = setting;
    envp[n] = NULL;
    char *argv[] = {"test_blas", (char *)mode, (char *)out, NULL};
    pid_t pid;
    int rc = posix_spawn(&pid, "/proc/self/exe", NULL, NULL, argv, envp);
    assert_int_equal(rc, 0);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

typedef struct child_result {
    int status;
    char core[64], selection[1024];
    FILE *f;            /* at the child's results after the header */
    char path[32];      /* the temporary file they are in */
} child_result;

/* The child (spawn_child --child) with var=value: its header read, its results next in r.f;
 * child_done closes and removes the file. */
static child_result run_child(const char *var, const char *value) {
    child_result r = {0};
    snprintf(r.path, sizeof r.path, "/tmp/dz_test_blas_XXXXXX");
    int fd = mkstemp(r.path);
    assert_true(fd >= 0);
    close(fd);
    spawn_child("--child", var, value, r.path);
    r.f = fopen(r.path, "rb");
    assert_non_null(r.f);
    assert_int_equal(fscanf(r.f, "%d\n", &r.status), 1);
    assert_non_null(fgets(r.core, sizeof r.core, r.f));
    assert_non_null(fgets(r.selection, sizeof r.selection, r.f));
    r.core[strcspn(r.core, "\n")] = '\0';
    r.selection[strcspn(r.selection, "\n")] = '\0';
    return r;
}

static void child_done(child_result *r) {
    fclose(r->f);
    unlink(r->path);
}

static void forced_prescott_agrees(void **state) {
    (void)state;
    require_blas();
    child_result r = run_child("OPENBLAS_CORETYPE", "Prescott");
    print_message("child: %s\n", r.selection);
    assert_int_equal(r.status, DZ_OK);
    assert_string_equal(r.core, "Prescott");
    assert_non_null(strstr(r.selection, "environment"));
    assert_non_null(strstr(r.selection, "OPENBLAS_CORETYPE=Prescott"));
    for (size_t i = 0; i < sizeof k_cross / sizeof k_cross[0]; i++) {
        const gemm_case *c = &k_cross[i];
        gemm_data d = make_data(c, (uint32_t)(500 + i));
        size_t n = (size_t)c->M * d.ldc;
        float *theirs = malloc(n * sizeof *theirs);
        assert_non_null(theirs);
        assert_int_equal(fread(theirs, sizeof(float), n, r.f), n);
        /* Both within the rounding bound of the exact value, hence within twice that
         * bound of each other: Prescott is right, and agrees with the selected core. */
        check_against_reference(c, &d, theirs, 1, 1.0);
        dz_sgemm(c->ta, c->tb, c->M, c->N, c->K, c->alpha, d.A, d.lda, d.B, d.ldb, c->beta, d.C, d.ldc);
        check_against_reference(c, &d, d.C, 1, 1.0);
        bool identical = !memcmp(theirs, d.C, n * sizeof *theirs);
        print_message("case %zu (M=%d N=%d K=%d): Prescott and %s %s\n", i, c->M, c->N, c->K,
                      dz_blas_core_name(), identical ? "bitwise identical" : "agree within the bound");
        free(theirs);
        free_data(&d);
    }
    child_done(&r);
}

static void missing_library_is_reported(void **state) {
    (void)state;
    child_result r = run_child("DISTZO_OPENBLAS", "/nonexistent/libopenblas.so.0");
    print_message("child error: %s\n", r.selection);
    assert_int_equal(r.status, DZ_ERR_NOT_FOUND);
    assert_non_null(strstr(r.selection, "/nonexistent/libopenblas.so.0"));
    assert_non_null(strstr(r.selection, "DISTZO_OPENBLAS"));
    child_done(&r);
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "--child"))
        return write_cross_results(argv[2]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(cpu_features_match_proc_cpuinfo),
        cmocka_unit_test(choose_core_policy),
        cmocka_unit_test(selected_core_is_reported),
        cmocka_unit_test(sgemm_matches_reference),
        cmocka_unit_test(beta_zero_ignores_nan_in_c),
        cmocka_unit_test(forced_prescott_agrees),
        cmocka_unit_test(missing_library_is_reported),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
