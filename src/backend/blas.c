#define _GNU_SOURCE /* dladdr, RTLD_DEFAULT */
#include "backend/blas.h"

#include <cblas.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "core/cpu_features.h"
#include "core/threads.h"
#include "core/util.h"
#include "distzo/log.h"

/* Pointer types taken from OpenBLAS's own header so a signature mismatch fails to build. */
typedef __typeof__(cblas_sgemm) sgemm_fn;
typedef __typeof__(openblas_get_corename) corename_fn;
typedef __typeof__(openblas_get_config) config_fn;
typedef __typeof__(openblas_set_num_threads) set_threads_fn;
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
    get_procs_fn *get_procs;
    chooser who;
    bool preloaded;        /* libopenblas was in the process before dz_blas_init */
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
        g.handle = load_library(names, n_names);
        /* OpenBLAS read it in its constructor; restore the environment so child
         * processes see what the user set, not our choice. */
        if (g.who == CHOSEN_BY_DISTZO)
            unsetenv("OPENBLAS_CORETYPE");
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

void dz_sgemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
              int ldb, float beta, float *C, int ldc) {
    if (dz_blas_init(NULL) != DZ_OK) return; /* callers check dz_blas_init first (blas.h) */
    /* OpenBLAS's threads need the cores the pool's idle workers would spin on: a fair
     * reference. */
    dz_parallel_stop_spinning();
    g.sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, M, N, K, alpha,
            A, lda, B, ldb, beta, C, ldc);
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
