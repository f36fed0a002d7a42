#define _GNU_SOURCE /* dladdr, RTLD_DEFAULT */
#include "kernels/blas.h"

#include <cblas.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "core/cpu_features.h"
#include "core/parallel.h"
#include "core/util.h"
#include "distzo/log.h"

/* libgomp's idle spin for OpenBLAS's threads, in pauses, when the user set none (see
 * bound_libgomp_spin). Measured in bench/README.md ("Thread pool under load"). */
#define DZ_GOMP_SPINCOUNT "0"

/* Pointer types taken from OpenBLAS's own header so a signature mismatch fails to build. */
typedef __typeof__(cblas_sgemm) sgemm_fn;
typedef __typeof__(openblas_get_corename) corename_fn;
typedef __typeof__(openblas_get_config) config_fn;
typedef __typeof__(openblas_set_num_threads) set_threads_fn;
typedef __typeof__(openblas_get_num_threads) get_threads_fn;
typedef __typeof__(openblas_get_num_procs) get_procs_fn;

typedef enum chooser {
    CHOSEN_BY_DISTZO,   /* we set OPENBLAS_CORETYPE from cpuid */
    CHOSEN_BY_ENV,      /* OPENBLAS_CORETYPE was set before we ran */
    CHOSEN_BY_OPENBLAS, /* nothing set: OpenBLAS's own detection */
} chooser;

static struct {
    dz_status status;
    dz_error err;
    void *handle;
    sgemm_fn *sgemm;
    corename_fn *corename;
    config_fn *config;
    set_threads_fn *set_threads;
    get_threads_fn *get_threads;
    get_procs_fn *get_procs;
    chooser who;
    bool preloaded;        /* libopenblas was in the process before dz_blas_init */
    bool has_small_kernels; /* an AVX-512 core: see takes_small_path() */
    char requested[64];    /* the OPENBLAS_CORETYPE in force at load ("" if none) */
    char core[64];
    char path[512];
    char selection[1024];
} g = {.status = DZ_ERR_INVALID};

static pthread_once_t g_once = PTHREAD_ONCE_INIT;

const char *dz_blas_choose_core(const dz_cpu_features *f) {
    if (dz_cpu_usable_avx512_core(f))
        return f->avx512_bf16 ? "Cooperlake" : "SkylakeX";
    if (dz_cpu_usable_avx2_fma(f))
        return "Haswell";
    return NULL;
}

/* Library names to try, most specific first. Debian's alternatives symlink
 * libopenblas.so.0 to the chosen variant; the explicit paths cover a broken or
 * missing alternative; libopenblaso/p are Fedora's OpenMP/pthreads builds.
 * DISTZO_OPENBLAS replaces the list: a user who names a file wants that one, not a
 * silent fallback. */
static int candidate_names(const char *out[], int cap) {
    static const char *const fixed[] = {
        "libopenblas.so.0",
        "libopenblas.so",
        "/usr/lib/x86_64-linux-gnu/openblas-openmp/libopenblas.so.0",
        "/usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.so.0",
        "libopenblaso.so.0",
        "libopenblasp.so.0",
    };
    const char *user = getenv("DISTZO_OPENBLAS");
    if (user && *user) {
        out[0] = user;
        return 1;
    }
    int n = 0;
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0] && n < cap; i++)
        out[n++] = fixed[i];
    return n;
}

/* A library already in the process, found by name (even if loaded RTLD_LOCAL) or by its
 * exported symbols (linked in, or loaded RTLD_GLOBAL under another name). *handle may
 * then be RTLD_DEFAULT, which is NULL, hence the separate return value. */
static bool find_preloaded(const char *names[], int n, void **handle) {
    for (int i = 0; i < n; i++) {
        void *h = dlopen(names[i], RTLD_NOW | RTLD_NOLOAD);
        if (h) {
            *handle = h;
            return true;
        }
    }
    if (dlsym(RTLD_DEFAULT, "openblas_get_corename") && dlsym(RTLD_DEFAULT, "cblas_sgemm")) {
        *handle = RTLD_DEFAULT;
        return true;
    }
    return false;
}

/* Loads the first candidate that opens; fills g.err with every attempt on failure. */
static void *load_library(const char *names[], int n) {
    char tried[900] = "";
    size_t used = 0;
    for (int i = 0; i < n; i++) {
        void *h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (h) {
            snprintf(g.path, sizeof g.path, "%s", names[i]);
            return h;
        }
        const char *why = dlerror();
        int w = snprintf(tried + used, sizeof tried - used, "%s%s (%s)", i ? "; " : "", names[i],
                         why ? why : "unknown error");
        used = w < 0 ? sizeof tried - 1 : used + (size_t)w;
        if (used >= sizeof tried)
            used = sizeof tried - 1;
    }
    dz_fail(&g.err, DZ_ERR_NOT_FOUND,
            "OpenBLAS: cannot load the library; tried %s. Install libopenblas0 "
            "(Debian: libopenblas0-openmp) or set DISTZO_OPENBLAS to the file's path",
            tried);
    return NULL;
}

static void resolve_symbols(void) {
    g.sgemm = (sgemm_fn *)dlsym(g.handle, "cblas_sgemm");
    g.corename = (corename_fn *)dlsym(g.handle, "openblas_get_corename");
    g.config = (config_fn *)dlsym(g.handle, "openblas_get_config");
    g.set_threads = (set_threads_fn *)dlsym(g.handle, "openblas_set_num_threads");
    g.get_threads = (get_threads_fn *)dlsym(g.handle, "openblas_get_num_threads");
    g.get_procs = (get_procs_fn *)dlsym(g.handle, "openblas_get_num_procs");
}

static void describe_selection(const char *features) {
    const char *lib = g.path[0] ? g.path : "libopenblas";
    int n = 0;
    size_t cap = sizeof g.selection;
    if (g.preloaded) {
        n = snprintf(g.selection, cap,
                     "OpenBLAS core %s (%s): OpenBLAS was already loaded in this process before "
                     "distzo could choose, so the core came from %s%s%s",
                     g.core, lib,
                     g.requested[0] ? "the environment (OPENBLAS_CORETYPE=" : "OpenBLAS's own detection",
                     g.requested[0] ? g.requested : "", g.requested[0] ? " if it was set then)" : "");
    } else if (g.who == CHOSEN_BY_ENV) {
        n = snprintf(g.selection, cap,
                     "OpenBLAS core %s (%s): chosen by the user/environment "
                     "(OPENBLAS_CORETYPE=%s was already set, distzo left it alone)",
                     g.core, lib, g.requested);
    } else if (g.who == CHOSEN_BY_DISTZO) {
        n = snprintf(g.selection, cap,
                     "OpenBLAS core %s (%s): selected by distzo (OPENBLAS_CORETYPE=%s) from the "
                     "CPU features [%s]",
                     g.core, lib, g.requested, features);
    } else {
        n = snprintf(g.selection, cap,
                     "OpenBLAS core %s (%s): chosen by OpenBLAS's own detection (no usable "
                     "AVX2+FMA or AVX-512, so distzo did not choose) [%s]",
                     g.core, lib, features);
    }
    /* Say so when OpenBLAS did not take the requested core (unknown name, or a build
     * without that kernel): the speed people expect would then not be there. */
    if (g.requested[0] && !g.preloaded && strcasecmp(g.requested, g.core) != 0 && n >= 0 &&
        (size_t)n < cap)
        snprintf(g.selection + n, cap - (size_t)n,
                 "; note: OpenBLAS did not take the requested core %s", g.requested);
}

/* OpenBLAS's OpenMP build runs its threads on libgomp, whose idle threads spin for
 * 300000 pauses (milliseconds) after every GEMM unless told otherwise: beside distzo's own
 * pool, and beside any other busy process, that spinning holds a core someone else needs
 * (a 2-core machine with one busy process ran the default job 3.7x slower). libgomp reads
 * its settings once, when it is loaded, which is our dlopen. Unless the user chose
 * (OMP_WAIT_POLICY or GOMP_SPINCOUNT set), ask it for a spin as short as the pool's
 * (GOMP_SPINCOUNT counts pauses). Returns whether the variable must be removed again. */
static bool bound_libgomp_spin(void) {
    if (getenv("OMP_WAIT_POLICY") || getenv("GOMP_SPINCOUNT")) return false;
    setenv("GOMP_SPINCOUNT", DZ_GOMP_SPINCOUNT, 1);
    return true;
}

static void init_once(void) {
    const char *names[8];
    int n_names = candidate_names(names, 8);
    char features[512];
    dz_cpu_describe(dz_cpu_features_get(), features, sizeof features);

    const char *env = getenv("OPENBLAS_CORETYPE");
    g.who = env && *env ? CHOSEN_BY_ENV : CHOSEN_BY_OPENBLAS;
    if (env && *env)
        snprintf(g.requested, sizeof g.requested, "%s", env);

    g.preloaded = find_preloaded(names, n_names, &g.handle);
    if (!g.preloaded) {
        const char *choice = g.who == CHOSEN_BY_ENV ? NULL : dz_blas_choose_core(dz_cpu_features_get());
        if (choice) {
            g.who = CHOSEN_BY_DISTZO;
            snprintf(g.requested, sizeof g.requested, "%s", choice);
            setenv("OPENBLAS_CORETYPE", choice, 1);
        }
        const bool set_spin = bound_libgomp_spin();
        g.handle = load_library(names, n_names);
        /* OpenBLAS (and libgomp) read them in their constructors; restore the environment
         * so child processes see what the user set, not our choice. */
        if (g.who == CHOSEN_BY_DISTZO)
            unsetenv("OPENBLAS_CORETYPE");
        if (set_spin)
            unsetenv("GOMP_SPINCOUNT");
        if (!g.handle) {
            g.status = g.err.code;
            return;
        }
    }

    resolve_symbols();
    if (!g.sgemm) {
        g.status = dz_fail(&g.err, DZ_ERR_UNSUPPORTED,
                           "OpenBLAS: %s has no cblas_sgemm symbol (not a CBLAS library?)",
                           g.path[0] ? g.path : "the library already loaded in this process");
        return;
    }
    Dl_info info;
    if (dladdr((void *)g.sgemm, &info) && info.dli_fname) {
        /* The resolved file says which variant (openmp/pthread) the alternatives chose. */
        char *real = realpath(info.dli_fname, NULL);
        snprintf(g.path, sizeof g.path, "%s", real ? real : info.dli_fname);
        free(real);
    }
    const char *core = g.corename ? g.corename() : NULL;
    snprintf(g.core, sizeof g.core, "%s", core && *core ? core : "unknown");
    /* openblas_get_corename pads some names; keep only the first word. */
    g.core[strcspn(g.core, " \t\n")] = '\0';
    g.has_small_kernels = !strcasecmp(g.core, "SkylakeX") || !strcasecmp(g.core, "Cooperlake");
    describe_selection(features);
    dz_log(DZ_LOG_DEBUG, "%s", g.selection);
    g.status = DZ_OK;
}

dz_status dz_blas_init(dz_error *err) {
    pthread_once(&g_once, init_once);
    if (g.status != DZ_OK && err)
        *err = g.err;
    return g.status;
}

/* Plain loops, used only if OpenBLAS is missing and a caller ignored dz_blas_init's
 * error: slow, but never a wrong (untouched) C. */
static void sgemm_fallback(bool ta, bool tb, int M, int N, int K, float alpha, const float *A,
                           int lda, const float *B, int ldb, float beta, float *C, int ldc) {
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            float acc = 0.0f;
            for (int k = 0; k < K; k++)
                acc += (ta ? A[(size_t)k * lda + i] : A[(size_t)i * lda + k]) *
                       (tb ? B[(size_t)j * ldb + k] : B[(size_t)k * ldb + j]);
            float *c = &C[(size_t)i * ldc + j];
            *c = alpha * acc + (beta == 0.0f ? 0.0f : beta * *c);
        }
}

/* Row stability. On the AVX-512 cores OpenBLAS 0.3.21 sends "small" products to
 * separate small-matrix kernels (interface/gemm.c, sgemm_small_kernel_permit_skylakex.c)
 * whose bits differ from its blocked kernels', so row r of C would change with M.
 * This mirrors that permit rule in row-major terms (cblas swaps A/B and M/N); measured
 * to match exactly on SkylakeX and Cooperlake (tests/test_blas.c checks it). */
static bool takes_small_path(bool ta, bool tb, int M, int N, int K) {
    if ((double)M * N * K > 1e6)
        return false;
    if (tb)
        return !ta && (long)M * N <= 1200 && K >= 32; /* NT; TT has no small kernel */
    return true;                                      /* NN and TN */
}

/* Fewest rows >= M that keep the call on the blocked kernels. */
static int rows_for_blocked_path(bool ta, bool tb, int M, int N, int K) {
    long m = (long)(1e6 / ((double)N * K)) + 1; /* M*N*K > 1e6 */
    if (tb && !ta && 1200L / N + 1 < m)
        m = 1200L / N + 1;                      /* M*N > 1200 */
    if (m < M)
        m = M;
    while (takes_small_path(ta, tb, (int)m, N, K))
        m++;
    return (int)m;
}

/* C = alpha op(A) op(B) + beta C computed as the first M rows of an Mp-row product
 * whose extra rows of A are zero, so OpenBLAS takes its blocked path. */
static bool sgemm_padded(bool ta, bool tb, int M, int N, int K, float alpha, const float *A,
                         int lda, const float *B, int ldb, float beta, float *C, int ldc, int Mp) {
    float *ap = calloc((size_t)Mp * K, sizeof *ap);
    float *cp = calloc((size_t)Mp * N, sizeof *cp);
    if (!ap || !cp) {
        free(ap);
        free(cp);
        return false;
    }
    for (int i = 0; i < M; i++)
        for (int k = 0; k < K; k++)
            ap[(size_t)i * K + k] = ta ? A[(size_t)k * lda + i] : A[(size_t)i * lda + k];
    if (beta != 0.0f) /* beta == 0 means C is not read (NaNs there must not leak) */
        for (int i = 0; i < M; i++)
            memcpy(cp + (size_t)i * N, C + (size_t)i * ldc, (size_t)N * sizeof *cp);
    g.sgemm(CblasRowMajor, CblasNoTrans, tb ? CblasTrans : CblasNoTrans, Mp, N, K, alpha, ap, K, B,
            ldb, beta, cp, N);
    for (int i = 0; i < M; i++)
        memcpy(C + (size_t)i * ldc, cp + (size_t)i * N, (size_t)N * sizeof *cp);
    free(ap);
    free(cp);
    return true;
}

void dz_sgemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float *A,
              int lda, const float *B, int ldb, float beta, float *C, int ldc) {
    if (dz_blas_init(NULL) != DZ_OK) {
        static int warned;
        if (!__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED))
            dz_log(DZ_LOG_WARN, "%s; using slow reference loops", g.err.msg);
        sgemm_fallback(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    /* OpenBLAS's threads (libgomp's or its own) need the cores the pool's idle workers
     * would spin on. */
    if (dz_blas_get_threads() > 1)
        dz_parallel_stop_spinning();
    if (g.has_small_kernels && M > 0 && N > 0 && K > 0 &&
        takes_small_path(trans_a, trans_b, M, N, K)) {
        /* The padded call is NoTrans-A, so its row count follows the NN/NT rule. */
        int Mp = rows_for_blocked_path(false, trans_b, M, N, K);
        if (sgemm_padded(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, Mp))
            return;
        /* Out of memory for a few KB: still correct, just not row-stable. */
    }
    g.sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
            M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

/* Thread stability. The single-threaded driver (level3.c) and the threaded one
 * (level3_thread.c) cut K into blocks of GEMM_Q alike, except that a remainder r in
 * (Q, 2Q) is halved differently (rounded up to 16 vs (r+1)/2); the halves agree only
 * when r % 32 is 0 or 31. Q = 320 (Cooperlake), 448 (SkylakeX), both multiples of 32,
 * so K % 32 decides. Measured by K sweeps; tests/test_blas.c re-checks the rule. */
bool dz_blas_rows_stable(int K) {
    if (dz_blas_init(NULL) != DZ_OK || !g.has_small_kernels)
        return false;
    int q = !strcasecmp(g.core, "SkylakeX") ? 448 : 320;
    return K <= q || K % 32 == 0 || K % 32 == 31;
}

const char *dz_blas_core_name(void) {
    return dz_blas_init(NULL) == DZ_OK ? g.core : "unavailable";
}

const char *dz_blas_selection(void) {
    return dz_blas_init(NULL) == DZ_OK ? g.selection : g.err.msg;
}

const char *dz_blas_config(void) {
    if (dz_blas_init(NULL) != DZ_OK || !g.config)
        return "";
    const char *c = g.config();
    return c ? c : "";
}

void dz_blas_set_threads(int n) {
    if (dz_blas_init(NULL) != DZ_OK || !g.set_threads)
        return;
    if (n <= 0) {
        long procs = g.get_procs ? g.get_procs() : sysconf(_SC_NPROCESSORS_ONLN);
        n = procs > 0 ? (int)procs : 1;
    }
    g.set_threads(n);
}

int dz_blas_get_threads(void) {
    if (dz_blas_init(NULL) != DZ_OK || !g.get_threads)
        return 1;
    return g.get_threads();
}

static void fill_uniform(float *x, size_t n, uint32_t seed) {
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        x[i] = (float)(seed >> 8) * (2.0f / 16777216.0f) - 1.0f;
    }
}

double dz_blas_sgemm_gflops(int M, int N, int K, double min_seconds) {
    if (M <= 0 || N <= 0 || K <= 0 || dz_blas_init(NULL) != DZ_OK)
        return -1.0;
    float *a = dz_alloc((size_t)M * K * sizeof(float));
    float *b = dz_alloc((size_t)N * K * sizeof(float));
    float *c = dz_alloc((size_t)M * N * sizeof(float));
    double gflops = -1.0;
    if (a && b && c) {
        fill_uniform(a, (size_t)M * K, 1);
        fill_uniform(b, (size_t)N * K, 2);
        dz_sgemm(false, true, M, N, K, 1.0f, a, K, b, K, 0.0f, c, N); /* warm-up: pages, threads */
        int calls = 0;
        double t0 = dz_now(), dt;
        do {
            dz_sgemm(false, true, M, N, K, 1.0f, a, K, b, K, 0.0f, c, N);
            calls++;
            dt = dz_now() - t0;
        } while (dt < min_seconds || calls < 2);
        gflops = 2.0 * M * N * (double)K * calls / dt * 1e-9;
    }
    dz_free(a);
    dz_free(b);
    dz_free(c);
    return gflops;
}
