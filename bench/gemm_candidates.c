/* The Linear-layer GEMM candidates side by side: speed and determinism.
 *
 *   bench_gemm_candidates [--seconds S] [--rounds R] [--threads T,...] [--paths P,...] [--json]
 *
 * y[M,N] = x[M,K] . w[N,K]^T on the Linear shapes of OPT-125m and SmolLM2-135M, for
 *   openblas:best, openblas:haswell       cblas_sgemm through distzo's loader (src/backend/blas.h)
 *   blis:skx, blis:haswell                BLIS's typed API bli_sgemm_ex, dlopen()ed RTLD_LOCAL
 *   blis:haswell-nosup                    the same with BLIS's small/unpacked ("sup") path off
 *   distzo:avx512, distzo:avx2, distzo:baseline   dz_gemm_linear under dz_isa_force
 * Each (path, shape) runs in a child process (this program again, --child PATH --shape S),
 * because OpenBLAS reads OPENBLAS_CORETYPE and BLIS reads BLIS_ARCH_TYPE once, when they
 * load. A child times its shape at each thread count and checks, bitwise:
 *   rows     row r of the full call equals row r computed in calls of M = 1, 3, 16, 100,
 *            640 rows at other offsets (first rows, an odd offset, last rows)
 *   threads  the full output at every thread count equals the first thread count's
 *   repeat   every timed call (and every round) gives the reference output again
 * and prints a hash of each output; the parent compares the hashes between the paths of one
 * candidate (its kernel paths: OpenBLAS cores, BLIS sub-configurations, distzo ISA levels).
 * --rounds R runs the grid R times, shape by shape with every path in turn (so that the
 * shared machine's load falls on all alike), keeps each cell's best, and makes the row
 * calls in the first round only. The scalar distzo:baseline runs once. */
#include <dlfcn.h>
#include <inttypes.h>
#include <math.h>
#include <stdalign.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/isa.h"
#include "core/threads.h"
#include "backend/backend.h"
#include "backend/blas.h"
#ifdef DZ_BENCH_HAVE_GEMM_LINEAR
#include "backend/gemm.h"
#endif

/* ---- shapes and workloads ------------------------------------------------------------ */

typedef struct {
    const char *name;
    int M, N, K;
} gemm_shape;

enum {
    S_PEAK,
    S_OPT_QKVO, S_OPT_FC1, S_OPT_FC2, S_OPT_HEAD,
    S_SMOL_QO, S_SMOL_KV, S_SMOL_GATEUP, S_SMOL_DOWN, S_SMOL_HEAD,
    S_SST_QO, S_SST_KV, S_SST_GATEUP, S_SST_DOWN, S_SST_HEAD,
    N_SHAPES
};

/* The head runs as src/model/forward.c calls it: chunks of HEAD_ROW_CHUNK = 512 rows by
 * HEAD_VOCAB_CHUNK = 4096 vocabulary entries. The SST-2 head scores one row per sequence. */
static const gemm_shape k_shapes[N_SHAPES] = {
    [S_PEAK] = {"2048^3", 2048, 2048, 2048},
    [S_OPT_QKVO] = {"qkvo", 2048, 768, 768},
    [S_OPT_FC1] = {"fc1", 2048, 3072, 768},
    [S_OPT_FC2] = {"fc2", 2048, 768, 3072},
    [S_OPT_HEAD] = {"head", 512, 4096, 768},
    [S_SMOL_QO] = {"q,o", 2048, 576, 576},
    [S_SMOL_KV] = {"k,v", 2048, 192, 576},
    [S_SMOL_GATEUP] = {"gate,up", 2048, 1536, 576},
    [S_SMOL_DOWN] = {"down", 2048, 576, 1536},
    [S_SMOL_HEAD] = {"head", 512, 4096, 576},
    [S_SST_QO] = {"q,o", 640, 576, 576},
    [S_SST_KV] = {"k,v", 640, 192, 576},
    [S_SST_GATEUP] = {"gate,up", 640, 1536, 576},
    [S_SST_DOWN] = {"down", 640, 576, 1536},
    [S_SST_HEAD] = {"head", 16, 4096, 576},
};

typedef struct {
    int shape;
    double calls; /* per forward: layers x uses per layer; head: row chunks x vocab / 4096 */
} shape_calls;

enum { MAX_USES = 5 };

typedef struct {
    const char *name, *title;
    int n_uses;
    shape_calls uses[MAX_USES];
} workload;

static const workload k_workloads[] = {
    {"opt125m", "OPT-125m, batch 16 x seq 128 (M=2048, 12 layers; head 4 x 512 rows x 50272/4096 chunks)", 4,
     {{S_OPT_QKVO, 12 * 4}, {S_OPT_FC1, 12}, {S_OPT_FC2, 12}, {S_OPT_HEAD, 4 * 50272 / 4096.0}}},
    {"smollm2", "SmolLM2-135M, batch 16 x seq 128 (M=2048, 30 layers; head 4 x 512 rows x 12 chunks)", 5,
     {{S_SMOL_QO, 30 * 2}, {S_SMOL_KV, 30 * 2}, {S_SMOL_GATEUP, 30 * 2}, {S_SMOL_DOWN, 30},
      {S_SMOL_HEAD, 4 * 12}}},
    {"sst2", "SmolLM2-135M, SST-2 batch 16 x ~40 tokens (M=640, 30 layers; head 16 scored rows x 12 chunks)", 5,
     {{S_SST_QO, 30 * 2}, {S_SST_KV, 30 * 2}, {S_SST_GATEUP, 30 * 2}, {S_SST_DOWN, 30}, {S_SST_HEAD, 12}}},
};
enum { N_WORKLOADS = sizeof k_workloads / sizeof k_workloads[0] };

/* Row counts of the row-stability calls; bit i of a failure mask stands for k_sub_rows[i]. */
static const int k_sub_rows[] = {1, 3, 16, 100, 640};
enum { N_SUB_ROWS = sizeof k_sub_rows / sizeof k_sub_rows[0] };

static double shape_flops(int s) { return 2.0 * k_shapes[s].M * k_shapes[s].N * k_shapes[s].K; }

/* ---- paths --------------------------------------------------------------------------- */

typedef enum { CAND_OPENBLAS, CAND_BLIS, CAND_DISTZO } candidate_kind;

typedef struct {
    candidate_kind kind;
    const char *candidate, *variant;
    bool slow; /* scalar: one round, no 2048^3, row calls of at most SLOW_MAX_SUB_ROWS rows */
} bench_path;

static const bench_path k_paths[] = {
    {CAND_OPENBLAS, "openblas", "best", false},  {CAND_OPENBLAS, "openblas", "haswell", false},
    {CAND_BLIS, "blis", "skx", false},           {CAND_BLIS, "blis", "haswell", false},
    {CAND_BLIS, "blis", "haswell-nosup", false}, {CAND_DISTZO, "distzo", "avx512", false},
    {CAND_DISTZO, "distzo", "avx2", false},      {CAND_DISTZO, "distzo", "baseline", true},
};
enum { N_PATHS = sizeof k_paths / sizeof k_paths[0], MAX_THREADS = 4, NOTE_CAP = 1024, SLOW_MAX_SUB_ROWS = 100 };

/* Whether path p measures shape s in round r (0-based). */
static bool path_runs(int p, int s, int r) { return !k_paths[p].slow || (r == 0 && s != S_PEAK); }

static int find_path(const char *name) {
    for (int p = 0; p < N_PATHS; p++) {
        size_t n = strlen(k_paths[p].candidate);
        if (!strncmp(name, k_paths[p].candidate, n) && name[n] == ':' && !strcmp(name + n + 1, k_paths[p].variant))
            return p;
    }
    return -1;
}

typedef struct {
    double seconds;
    int rounds;
    int n_threads, threads[MAX_THREADS];
    bool selected[N_PATHS];
    bool json;
    int child_path;  /* -1 in the parent */
    int child_shape; /* the one shape a child measures, -1 for all */
    bool checks;     /* the row-stability calls (the parent asks for them in the first round) */
} bench_options;

/* ---- small helpers ------------------------------------------------------------------- */

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t splitmix64(uint64_t *state) {
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in [-1, 1) with a full 24-bit mantissa, the same in every process. */
static void fill_uniform(float *v, size_t n, uint64_t seed) {
    uint64_t state = seed;
    for (size_t i = 0; i < n; i++) v[i] = (float)((double)(splitmix64(&state) >> 40) / 8388608.0 - 1.0);
}

static uint64_t fnv1a64(const void *data, size_t bytes) {
    const unsigned char *p = data;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < bytes; i++) h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

static bool same_floats(const float *a, const float *b, size_t n) { return !memcmp(a, b, n * sizeof(float)); }

/* Writes the reason into note; returns false (for "return fail_note(...)"). */
__attribute__((format(printf, 3, 4))) static bool fail_note(char *note, size_t cap, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(note, cap, fmt, ap);
    va_end(ap);
    return false;
}

/* ---- backends (child side) ----------------------------------------------------------- */

typedef void (*gemm_fn)(float *y, const float *x, const float *w, int M, int N, int K);

typedef struct {
    void (*set_threads)(int n);
    gemm_fn gemm;
    gemm_fn gemm_without_sup; /* BLIS only: the same with sup off, to see where sup is taken */
} backend;

/* OpenBLAS through distzo's loader; OPENBLAS_CORETYPE must be set before it loads. */
static void openblas_gemm(float *y, const float *x, const float *w, int M, int N, int K) {
    dz_sgemm(false, true, M, N, K, 1.0f, x, K, w, K, 0.0f, y, N);
}

static bool openblas_open(const char *variant, backend *be, char *note, size_t cap) {
    bool haswell = !strcmp(variant, "haswell");
    if (haswell && dz_isa_best() < DZ_ISA_AVX2) return fail_note(note, cap, "this CPU has no AVX2+FMA");
    if (haswell) setenv("OPENBLAS_CORETYPE", "Haswell", 1);
    else unsetenv("OPENBLAS_CORETYPE");
    dz_error err;
    if (dz_blas_init(&err) != DZ_OK) return fail_note(note, cap, "OpenBLAS not loaded: %s", err.msg);
    if (haswell && strcasecmp(dz_blas_core_name(), "Haswell"))
        return fail_note(note, cap, "asked OpenBLAS for Haswell, it runs %s", dz_blas_core_name());
    *be = (backend){.set_threads = dz_blas_set_threads, .gemm = openblas_gemm};
    snprintf(note, cap, "%s", dz_blas_selection());
    return true;
}

/* BLIS, without its headers: the few symbols used, with BLIS 0.9's types. dim_t and inc_t
 * are 64-bit in a default build (checked with bli_info_get_int_type_size); trans_t and
 * arch_t are enums. */
typedef int64_t blis_dim;
enum { BLIS_NO_TRANSPOSE_ = 0x0, BLIS_TRANSPOSE_ = 0x8 };

/* BLIS 0.9's rntm_t (frame/include/bli_type_defs.h), to turn sup off per call; used only
 * when the library says it is 0.9.x. */
typedef struct {
    bool auto_factor;
    blis_dim num_threads;
    blis_dim thrloop[6];
    bool pack_a, pack_b, l3_sup;
    void *sba_pool, *pba;
} blis09_rntm;

typedef void blis_init_fn(void);
typedef void blis_sgemm_ex_fn(int transa, int transb, blis_dim m, blis_dim n, blis_dim k, float *alpha, float *a,
                              blis_dim rsa, blis_dim csa, float *b, blis_dim rsb, blis_dim csb, float *beta, float *c,
                              blis_dim rsc, blis_dim csc, void *cntx, void *rntm);
typedef void blis_set_threads_fn(blis_dim n);
typedef int blis_arch_id_fn(void);
typedef const char *blis_arch_string_fn(int id);
typedef const char *blis_version_fn(void);
typedef blis_dim blis_info_fn(void);
typedef void blis_rntm_init_fn(void *rntm);

static struct {
    blis_init_fn *init;
    blis_sgemm_ex_fn *sgemm_ex;
    blis_set_threads_fn *set_num_threads;
    blis_arch_id_fn *arch_query_id;
    blis_arch_string_fn *arch_string;
    blis_version_fn *version;
    blis_info_fn *int_type_size, *enable_openmp;
    blis_rntm_init_fn *rntm_init_from_global; /* BLIS 0.9 only */
    alignas(64) unsigned char rntm_no_sup[512]; /* a blis09_rntm, room to spare */
} g_blis;

static void blis_gemm_with(float *y, const float *x, const float *w, int M, int N, int K, void *rntm) {
    float one = 1.0f, zero = 0.0f;
    g_blis.sgemm_ex(BLIS_NO_TRANSPOSE_, BLIS_TRANSPOSE_, M, N, K, &one, (float *)x, K, 1, (float *)w, K, 1, &zero,
                    y, N, 1, NULL, rntm);
}

static void blis_gemm(float *y, const float *x, const float *w, int M, int N, int K) {
    blis_gemm_with(y, x, w, M, N, K, NULL);
}

static void blis_gemm_no_sup(float *y, const float *x, const float *w, int M, int N, int K) {
    blis_gemm_with(y, x, w, M, N, K, g_blis.rntm_no_sup);
}

/* The rntm carries the thread count, so it is refreshed from the global one each time. */
static void blis_set_threads(int n) {
    g_blis.set_num_threads(n);
    if (!g_blis.rntm_init_from_global) return;
    g_blis.rntm_init_from_global(g_blis.rntm_no_sup);
    ((blis09_rntm *)(void *)g_blis.rntm_no_sup)->l3_sup = false;
}

static void *blis_load(char *note, size_t cap) {
    static const char *const names[] = {"libblis.so.4", "libblis.so",
                                        "/usr/lib/x86_64-linux-gnu/blis-pthread/libblis.so.4",
                                        "/usr/lib/x86_64-linux-gnu/blis-openmp/libblis.so.4"};
    const char *forced = getenv("DISTZO_BLIS");
    if (forced && *forced) {
        void *h = dlopen(forced, RTLD_NOW | RTLD_LOCAL);
        if (!h) snprintf(note, cap, "BLIS not loaded from DISTZO_BLIS=%s: %s", forced, dlerror());
        return h;
    }
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        void *h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (h) return h;
    }
    snprintf(note, cap, "BLIS not installed (tried libblis.so.4, libblis.so and Debian's blis-pthread/openmp; "
                        "apt-get install libblis4-pthread, or DISTZO_BLIS=path)");
    return NULL;
}

static bool blis_bind(void *h, char *note, size_t cap) {
    g_blis.init = (blis_init_fn *)dlsym(h, "bli_init");
    g_blis.sgemm_ex = (blis_sgemm_ex_fn *)dlsym(h, "bli_sgemm_ex");
    g_blis.set_num_threads = (blis_set_threads_fn *)dlsym(h, "bli_thread_set_num_threads");
    g_blis.arch_query_id = (blis_arch_id_fn *)dlsym(h, "bli_arch_query_id");
    g_blis.arch_string = (blis_arch_string_fn *)dlsym(h, "bli_arch_string");
    g_blis.version = (blis_version_fn *)dlsym(h, "bli_info_get_version_str");
    g_blis.int_type_size = (blis_info_fn *)dlsym(h, "bli_info_get_int_type_size");
    g_blis.enable_openmp = (blis_info_fn *)dlsym(h, "bli_info_get_enable_openmp");
    if (!g_blis.init || !g_blis.sgemm_ex || !g_blis.set_num_threads || !g_blis.arch_query_id || !g_blis.arch_string ||
        !g_blis.version || !g_blis.int_type_size || !g_blis.enable_openmp)
        return fail_note(note, cap, "this BLIS lacks bli_sgemm_ex or another symbol the bench uses");
    if (g_blis.int_type_size() != 64)
        return fail_note(note, cap, "this BLIS has %d-bit dim_t; the bench assumes 64", (int)g_blis.int_type_size());
    return true;
}

/* arch_t id of a sub-configuration name; the table ends with "generic". */
static int blis_arch_id(const char *name) {
    for (int id = 0; id < 64; id++) {
        const char *s = g_blis.arch_string(id);
        if (!s) break;
        if (!strcmp(s, name)) return id;
        if (!strcmp(s, "generic")) break;
    }
    return -1;
}

static bool blis_open(const char *variant, backend *be, char *note, size_t cap) {
    char arch[32];
    snprintf(arch, sizeof arch, "%.*s", (int)strcspn(variant, "-"), variant);
    const bool no_sup = strstr(variant, "-nosup") != NULL;
    if (dz_isa_best() < (!strcmp(arch, "skx") ? DZ_ISA_AVX512 : DZ_ISA_AVX2))
        return fail_note(note, cap, "this CPU cannot run BLIS's %s kernels", arch);
    void *h = blis_load(note, cap);
    if (!h || !blis_bind(h, note, cap)) return false;
    const int id = blis_arch_id(arch);
    if (id < 0) return fail_note(note, cap, "BLIS %s has no sub-configuration %s", g_blis.version(), arch);
    const bool v09 = !strncmp(g_blis.version(), "0.9.", 4);
    if (v09) g_blis.rntm_init_from_global = (blis_rntm_init_fn *)dlsym(h, "bli_rntm_init_from_global");
    if (no_sup && !g_blis.rntm_init_from_global)
        return fail_note(note, cap, "turning sup off needs BLIS 0.9's rntm_t; this is %s", g_blis.version());
    char id_text[16];
    snprintf(id_text, sizeof id_text, "%d", id);
    setenv("BLIS_ARCH_TYPE", id_text, 1); /* read once, by bli_init */
    g_blis.init();
    if (g_blis.arch_query_id() != id)
        return fail_note(note, cap, "BLIS runs %s, not %s", g_blis.arch_string(g_blis.arch_query_id()), arch);
    *be = (backend){.set_threads = blis_set_threads, .gemm = no_sup ? blis_gemm_no_sup : blis_gemm,
                    .gemm_without_sup = no_sup || !g_blis.rntm_init_from_global ? NULL : blis_gemm_no_sup};
    snprintf(note, cap, "BLIS %s (%s), sub-configuration %s (BLIS_ARCH_TYPE=%d), bli_sgemm_ex%s", g_blis.version(),
             g_blis.enable_openmp() ? "OpenMP" : "pthreads", arch, id, no_sup ? " with rntm l3_sup off" : "");
    return true;
}

#ifdef DZ_BENCH_HAVE_GEMM_LINEAR
static void distzo_gemm(float *y, const float *x, const float *w, int M, int N, int K) {
    dz_gemm_linear(y, x, w, NULL, M, N, K);
}

static bool distzo_open(const char *variant, backend *be, char *note, size_t cap) {
    dz_isa isa;
    dz_error err;
    if (dz_isa_parse(variant, &isa, &err) != DZ_OK || dz_isa_force(isa, &err) != DZ_OK)
        return fail_note(note, cap, "%s", err.msg);
    *be = (backend){.set_threads = dz_set_num_threads, .gemm = distzo_gemm};
    snprintf(note, cap, "%s", dz_gemm_describe());
    return true;
}
#else
/* Hook: builds without src/backend/gemm.c (the bench's CMake defines
 * DZ_BENCH_HAVE_GEMM_LINEAR when it exists) report the candidate as skipped. */
static bool distzo_open(const char *variant, backend *be, char *note, size_t cap) {
    (void)variant, (void)be;
    return fail_note(note, cap, "dz_gemm_linear not built (src/backend/gemm.c missing): rebuild once it is on main");
}
#endif

static bool backend_open(const bench_path *p, backend *be, char *note, size_t cap) {
    switch (p->kind) {
    case CAND_OPENBLAS: return openblas_open(p->variant, be, note, cap);
    case CAND_BLIS: return blis_open(p->variant, be, note, cap);
    case CAND_DISTZO: return distzo_open(p->variant, be, note, cap);
    }
    return false;
}

/* ---- measuring one shape (child side) ------------------------------------------------ */

typedef struct {
    float *x, *w, *out, *ref[MAX_THREADS];
} shape_buffers;

static void free_buffers(shape_buffers *b) {
    free(b->x), free(b->w), free(b->out);
    for (int t = 0; t < MAX_THREADS; t++) free(b->ref[t]);
    memset(b, 0, sizeof *b);
}

static bool alloc_buffers(shape_buffers *b, const gemm_shape *s, int n_threads) {
    memset(b, 0, sizeof *b);
    const size_t mn = (size_t)s->M * s->N;
    b->x = malloc(sizeof(float) * (size_t)s->M * s->K);
    b->w = malloc(sizeof(float) * (size_t)s->N * s->K);
    b->out = malloc(sizeof(float) * mn);
    bool ok = b->x && b->w && b->out;
    for (int t = 0; t < n_threads; t++) ok = ok && (b->ref[t] = malloc(sizeof(float) * mn));
    if (!ok) return free_buffers(b), false;
    fill_uniform(b->x, (size_t)s->M * s->K, 0x1000u + (uint64_t)s->M * 7919u + (uint64_t)s->K);
    fill_uniform(b->w, (size_t)s->N * s->K, 0x2000u + (uint64_t)s->N * 7919u + (uint64_t)s->K);
    return true;
}

/* Best-call GFLOP/s over at least `seconds` (at least one call), counting the reference
 * call (ref_seconds) when it alone took that long; *repeat_ok is cleared when a call's
 * output differs from ref. */
static double time_gemm(const backend *be, const gemm_shape *s, const shape_buffers *b, const float *ref,
                        double ref_seconds, double seconds, bool *repeat_ok) {
    double best = ref_seconds >= seconds ? ref_seconds : INFINITY, total = best < INFINITY ? best : 0;
    for (int calls = best < INFINITY; calls == 0 || total < seconds; calls++) {
        const double t0 = now_seconds();
        be->gemm(b->out, b->x, b->w, s->M, s->N, s->K);
        const double dt = now_seconds() - t0;
        total += dt;
        best = dt < best ? dt : best;
        if (!same_floats(b->out, ref, (size_t)s->M * s->N)) *repeat_ok = false;
    }
    return 2.0 * s->M * s->N * s->K / best * 1e-9;
}

/* Bit i set when some call of k_sub_rows[i] rows (first rows, an odd offset, last rows)
 * gives rows that differ from the same rows of the full call. */
static unsigned row_failures(const backend *be, const gemm_shape *s, const shape_buffers *b, const float *ref,
                             int max_rows) {
    unsigned mask = 0;
    for (int i = 0; i < N_SUB_ROWS; i++) {
        const int m = k_sub_rows[i];
        if (m >= s->M || m > max_rows) continue;
        const int offsets[3] = {0, ((s->M - m) / 2) | 1, s->M - m};
        for (int o = 0; o < 3; o++) {
            const int r0 = offsets[o] > s->M - m ? s->M - m : offsets[o];
            be->gemm(b->out, b->x + (size_t)r0 * s->K, b->w, m, s->N, s->K);
            if (!same_floats(b->out, ref + (size_t)r0 * s->N, (size_t)m * s->N)) mask |= 1u << i;
        }
    }
    return mask;
}

/* Prints "cell SHAPE THREAD_INDEX GFLOPS ROW_MASK REPEAT", then "bits SHAPE HASH THREADS_OK"
 * and for BLIS "sup SHAPE DIFFERS". */
static bool measure_shape(const backend *be, int si, const bench_options *o) {
    const int max_sub_rows = k_paths[o->child_path].slow ? SLOW_MAX_SUB_ROWS : INT32_MAX;
    const gemm_shape *s = &k_shapes[si];
    shape_buffers b;
    if (!alloc_buffers(&b, s, o->n_threads)) return false;
    const size_t mn = (size_t)s->M * s->N;
    bool threads_ok = true;
    for (int t = 0; t < o->n_threads; t++) {
        be->set_threads(o->threads[t]);
        const double t0 = now_seconds();
        be->gemm(b.ref[t], b.x, b.w, s->M, s->N, s->K); /* warm-up and reference */
        const double ref_seconds = now_seconds() - t0;
        bool repeat_ok = true;
        const double gflops = time_gemm(be, s, &b, b.ref[t], ref_seconds, o->seconds, &repeat_ok);
        const unsigned rows = o->checks ? row_failures(be, s, &b, b.ref[t], max_sub_rows) : 0;
        threads_ok = threads_ok && same_floats(b.ref[t], b.ref[0], mn);
        printf("cell %d %d %.4f %u %d\n", si, t, gflops, rows, repeat_ok);
        fflush(stdout);
    }
    printf("bits %d %016" PRIx64 " %d\n", si, fnv1a64(b.ref[0], mn * sizeof(float)), threads_ok);
    if (be->gemm_without_sup) {
        be->set_threads(o->threads[0]);
        be->gemm_without_sup(b.out, b.x, b.w, s->M, s->N, s->K);
        printf("sup %d %d\n", si, !same_floats(b.out, b.ref[0], mn));
    }
    fflush(stdout);
    free_buffers(&b);
    return true;
}

static int run_child(const bench_options *o) {
    const bench_path *p = &k_paths[o->child_path];
    backend be = {0};
    char note[NOTE_CAP];
    if (!backend_open(p, &be, note, sizeof note)) {
        printf("skip %s\n", note);
        return 0;
    }
    printf("info %s\n", note);
    fflush(stdout);
    for (int s = 0; s < N_SHAPES; s++) {
        if (o->child_shape >= 0 && s != o->child_shape) continue;
        if (!measure_shape(&be, s, o)) {
            printf("fail out of memory at M=%d N=%d K=%d\n", k_shapes[s].M, k_shapes[s].N, k_shapes[s].K);
            return 1;
        }
    }
    return 0;
}

/* ---- the parent: running children and collecting their records ---------------------- */

typedef struct {
    bool ran;                             /* some child reported measurements */
    bool gave_up;                         /* skipped or failed: not run again */
    char note[NOTE_CAP];                  /* info line, or why it was skipped / failed */
    double gflops[MAX_THREADS][N_SHAPES]; /* best over rounds; 0 = none */
    unsigned row_fail[MAX_THREADS][N_SHAPES];
    bool threads_ok[N_SHAPES], repeat_ok[N_SHAPES], have_hash[N_SHAPES];
    uint64_t hash[N_SHAPES];
    int sup_differs[N_SHAPES]; /* -1 unknown */
} path_result;

static void init_result(path_result *r) {
    memset(r, 0, sizeof *r);
    for (int s = 0; s < N_SHAPES; s++) r->threads_ok[s] = r->repeat_ok[s] = true, r->sup_differs[s] = -1;
}

static void parse_cell(path_result *r, const char *line, int n_threads) {
    int s, t, repeat;
    unsigned rows;
    double g;
    if (sscanf(line, "cell %d %d %lf %u %d", &s, &t, &g, &rows, &repeat) != 5 || s < 0 || s >= N_SHAPES || t < 0 ||
        t >= n_threads)
        return;
    r->ran = true;
    if (g > r->gflops[t][s]) r->gflops[t][s] = g;
    r->row_fail[t][s] |= rows;
    if (!repeat) r->repeat_ok[s] = false;
}

static void parse_bits(path_result *r, const char *line) {
    int s, threads_ok;
    uint64_t h;
    if (sscanf(line, "bits %d %" SCNx64 " %d", &s, &h, &threads_ok) != 3 || s < 0 || s >= N_SHAPES) return;
    if (!threads_ok) r->threads_ok[s] = false;
    if (r->have_hash[s] && r->hash[s] != h) r->repeat_ok[s] = false; /* another round gave other bits */
    r->hash[s] = h, r->have_hash[s] = true;
}

/* info / skip / fail: the path's note; skip and fail also stop its later runs. */
static void parse_note(path_result *r, const char *line) {
    const int cap = NOTE_CAP - 16;
    if (!strncmp(line, "info ", 5)) snprintf(r->note, sizeof r->note, "%.*s", cap, line + 5);
    if (!strncmp(line, "skip ", 5)) snprintf(r->note, sizeof r->note, "skipped: %.*s", cap, line + 5);
    if (!strncmp(line, "fail ", 5)) snprintf(r->note, sizeof r->note, "failed: %.*s", cap, line + 5);
    if (!strncmp(line, "skip ", 5) || !strncmp(line, "fail ", 5)) r->gave_up = true;
}

static void parse_line(path_result *r, const char *line, int n_threads) {
    int s, differs;
    if (!strncmp(line, "cell ", 5)) parse_cell(r, line, n_threads);
    else if (!strncmp(line, "bits ", 5)) parse_bits(r, line);
    else if (sscanf(line, "sup %d %d", &s, &differs) == 2 && s >= 0 && s < N_SHAPES)
        r->sup_differs[s] = r->sup_differs[s] > 0 ? 1 : differs;
    else parse_note(r, line);
}

typedef struct {
    char path[64], seconds[32], threads[64], shape[16];
    char *argv[12];
} child_command;

/* This program's arguments for measuring `shape` on path p. */
static void child_command_init(child_command *c, const bench_options *o, int p, int shape, bool checks) {
    snprintf(c->path, sizeof c->path, "%s:%s", k_paths[p].candidate, k_paths[p].variant);
    snprintf(c->seconds, sizeof c->seconds, "%g", o->seconds);
    snprintf(c->shape, sizeof c->shape, "%d", shape);
    size_t n = 0;
    c->threads[0] = '\0';
    for (int t = 0; t < o->n_threads; t++)
        n += (size_t)snprintf(c->threads + n, sizeof c->threads - n, t ? ",%d" : "%d", o->threads[t]);
    char *args[12] = {"bench_gemm_candidates", "--child", c->path, "--shape", c->shape, "--seconds", c->seconds,
                      "--threads", c->threads, checks ? NULL : "--no-checks", NULL};
    memcpy(c->argv, args, sizeof args);
}

/* Runs this program as `--child PATH --shape S`, its stdout into r. */
static void run_path(const bench_options *o, int p, int shape, bool checks, path_result *r) {
    child_command c;
    child_command_init(&c, o, p, shape, checks);
    int fds[2];
    if (pipe(fds) != 0) return (void)snprintf(r->note, sizeof r->note, "failed: pipe()");
    fflush(stdout);
    const pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], STDOUT_FILENO);
        close(fds[0]), close(fds[1]);
        execv("/proc/self/exe", c.argv);
        _exit(127);
    }
    close(fds[1]);
    if (pid < 0) return close(fds[0]), (void)snprintf(r->note, sizeof r->note, "failed: fork()");
    FILE *in = fdopen(fds[0], "r");
    char line[2048];
    while (in && fgets(line, sizeof line, in)) {
        line[strcspn(line, "\n")] = '\0';
        parse_line(r, line, o->n_threads);
    }
    if (in) fclose(in);
    int status = 0;
    waitpid(pid, &status, 0);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return;
    r->gave_up = true;
    snprintf(r->note, sizeof r->note, "failed: the child for %s, shape %s, ended with status %d", c.path,
             k_shapes[shape].name, WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
}

/* ---- derived figures ----------------------------------------------------------------- */

/* GFLOP/s of one forward's Linear layers: total flops over total time. 0 if a shape is missing. */
static double workload_gflops(const path_result *r, int t, const workload *w) {
    double flops = 0, seconds = 0;
    for (int u = 0; u < w->n_uses; u++) {
        const double g = r->gflops[t][w->uses[u].shape];
        if (g <= 0) return 0;
        const double f = w->uses[u].calls * shape_flops(w->uses[u].shape);
        flops += f, seconds += f / (g * 1e9);
    }
    return flops / seconds * 1e-9;
}

static bool all_rows_stable(const path_result *r, int t) {
    for (int s = 0; s < N_SHAPES; s++)
        if (r->row_fail[t][s]) return false;
    return true;
}

static bool all_true(const bool v[N_SHAPES]) {
    for (int s = 0; s < N_SHAPES; s++)
        if (!v[s]) return false;
    return true;
}

/* The first path of p's candidate that ran: the one its other paths are compared with. */
static int reference_path(const path_result *res, int p) {
    for (int q = 0; q < N_PATHS; q++)
        if (res[q].ran && !strcmp(k_paths[q].candidate, k_paths[p].candidate)) return q;
    return -1;
}

/* Shape s was measured on both paths and gave other bits. */
static bool bits_differ(const path_result *a, const path_result *b, int s) {
    return a->have_hash[s] && b->have_hash[s] && a->hash[s] != b->hash[s];
}

/* "ref", "yes" (every shape both measured has the reference path's bits), "no", or "-". */
static const char *same_as_reference(const path_result *res, int p) {
    const int q = reference_path(res, p);
    if (q < 0 || !res[p].ran) return "-";
    if (q == p) return "ref";
    for (int s = 0; s < N_SHAPES; s++)
        if (bits_differ(&res[p], &res[q], s)) return "no";
    return "yes";
}

static int openblas_best_path(void) { return find_path("openblas:best"); }

static const char *yes_no(bool v) { return v ? "yes" : "no"; }

static void describe_mask(unsigned mask, char *out, size_t cap) {
    size_t n = 0;
    out[0] = '\0';
    for (int i = 0; i < N_SUB_ROWS && n < cap; i++)
        if (mask & (1u << i)) n += (size_t)snprintf(out + n, cap - n, "%s%d", n ? "," : "", k_sub_rows[i]);
}

/* ---- text report --------------------------------------------------------------------- */

/* GFLOP/s right-aligned in `width` columns: one decimal, two below 1, "-" if not measured. */
static void print_gflops(int width, double g) {
    if (g <= 0) printf("%*s", width, "-");
    else printf("%*.*f", width, g < 1 ? 2 : 1, g);
}

static void print_path_label(int p, int t, const bench_options *o) {
    char label[48];
    snprintf(label, sizeof label, "%s:%s", k_paths[p].candidate, k_paths[p].variant);
    printf("%-22s %3d ", label, o->threads[t]);
}

static void print_workload_table(const path_result *res, const workload *w, const bench_options *o) {
    printf("\n%s\n%-22s %3s ", w->title, "GFLOP/s", "thr");
    for (int u = 0; u < w->n_uses; u++) {
        const gemm_shape *s = &k_shapes[w->uses[u].shape];
        char head[32];
        snprintf(head, sizeof head, "%s %dx%d", s->name, s->N, s->K);
        printf(" %15s", head);
    }
    printf("%9s\n", "forward");
    for (int p = 0; p < N_PATHS; p++)
        for (int t = 0; res[p].ran && t < o->n_threads; t++) {
            print_path_label(p, t, o);
            for (int u = 0; u < w->n_uses; u++) print_gflops(16, res[p].gflops[t][w->uses[u].shape]);
            print_gflops(9, workload_gflops(&res[p], t, w));
            printf("\n");
        }
}

static void print_summary(const path_result *res, const bench_options *o) {
    const int ob = openblas_best_path();
    printf("\nSummary: forward GFLOP/s (x = relative to openblas:best at the same threads); determinism, bitwise\n");
    printf("%-22s %3s %7s", "path", "thr", "2048^3");
    for (int w = 0; w < N_WORKLOADS; w++) printf(" %14s", k_workloads[w].name);
    printf("  %5s %7s %6s %5s\n", "rows", "threads", "repeat", "=ref");
    for (int p = 0; p < N_PATHS; p++)
        for (int t = 0; res[p].ran && t < o->n_threads; t++) {
            print_path_label(p, t, o);
            print_gflops(7, res[p].gflops[t][S_PEAK]);
            for (int w = 0; w < N_WORKLOADS; w++) {
                const double g = workload_gflops(&res[p], t, &k_workloads[w]);
                const double base = ob >= 0 && res[ob].ran ? workload_gflops(&res[ob], t, &k_workloads[w]) : 0;
                print_gflops(8, g);
                if (base > 0 && g > 0) printf(" %5.*fx", g / base < 0.1 ? 3 : 2, g / base);
                else printf(" %6s", "");
            }
            printf("  %5s %7s %6s %5s\n", yes_no(all_rows_stable(&res[p], t)),
                   o->n_threads > 1 ? yes_no(all_true(res[p].threads_ok)) : "-", yes_no(all_true(res[p].repeat_ok)),
                   same_as_reference(res, p));
        }
    for (int p = 0; p < N_PATHS; p++)
        if (o->selected[p] && !res[p].ran) printf("%s:%s: %s\n", k_paths[p].candidate, k_paths[p].variant, res[p].note);
}

/* "  WHAT: all shapes" or "  WHAT: qkvo 2048x768x768, ..." when any shape is hit. */
static void print_shape_list(const char *what, const bool *hit) {
    int n = 0;
    for (int s = 0; s < N_SHAPES; s++) n += hit[s];
    if (!n) return;
    printf("    %s:", what);
    if (n == N_SHAPES) printf(" all shapes");
    else
        for (int s = 0, k = 0; s < N_SHAPES; s++)
            if (hit[s])
                printf("%s %s %dx%dx%d", k++ ? "," : "", k_shapes[s].name, k_shapes[s].M, k_shapes[s].N,
                       k_shapes[s].K);
    printf("\n");
}

/* Shapes whose rows differ, grouped by (sub-call sizes that differ, thread counts). */
static void print_row_failures(const path_result *r, const bench_options *o) {
    unsigned mask[N_SHAPES] = {0}, at[N_SHAPES] = {0};
    for (int s = 0; s < N_SHAPES; s++)
        for (int t = 0; t < o->n_threads; t++)
            if (r->row_fail[t][s]) mask[s] |= r->row_fail[t][s], at[s] |= 1u << t;
    bool done[N_SHAPES] = {false};
    for (int s = 0; s < N_SHAPES; s++) {
        if (!mask[s] || done[s]) continue;
        bool hit[N_SHAPES] = {false};
        for (int q = s; q < N_SHAPES; q++)
            if (mask[q] == mask[s] && at[q] == at[s]) hit[q] = done[q] = true;
        char what[160], sizes[64];
        describe_mask(mask[s], sizes, sizeof sizes);
        size_t n = (size_t)snprintf(what, sizeof what, "rows differ in calls of %s rows, at", sizes);
        for (int t = 0; t < o->n_threads; t++)
            if (at[s] & (1u << t)) n += (size_t)snprintf(what + n, sizeof what - n, " %d", o->threads[t]);
        snprintf(what + n, sizeof what - n, " thread(s)");
        print_shape_list(what, hit);
    }
}

/* Which shapes broke which property, per path; where BLIS takes sup. */
static void print_details(const path_result *res, const bench_options *o) {
    printf("\nDetails\n");
    for (int p = 0; p < N_PATHS; p++) {
        if (!o->selected[p]) continue;
        const path_result *r = &res[p];
        printf("%s:%s: %s\n", k_paths[p].candidate, k_paths[p].variant, r->note[0] ? r->note : "(no output)");
        if (!r->ran) continue;
        print_row_failures(r, o);
        bool not_thread_stable[N_SHAPES], not_repeatable[N_SHAPES], sup[N_SHAPES], differs[N_SHAPES];
        const int q = reference_path(res, p);
        for (int s = 0; s < N_SHAPES; s++) {
            not_thread_stable[s] = o->n_threads > 1 && !r->threads_ok[s];
            not_repeatable[s] = !r->repeat_ok[s];
            sup[s] = r->sup_differs[s] == 1;
            differs[s] = q != p && bits_differ(r, &res[q], s);
        }
        print_shape_list("the thread count changes the bits", not_thread_stable);
        print_shape_list("not repeatable", not_repeatable);
        print_shape_list("sup taken (bits differ with sup off)", sup);
        char what[96];
        snprintf(what, sizeof what, "bits differ from %s:%s", k_paths[q].candidate, k_paths[q].variant);
        print_shape_list(what, differs);
    }
}

static void cpu_model(char *out, size_t cap) {
    snprintf(out, cap, "unknown CPU");
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[512];
    while (f && fgets(line, sizeof line, f)) {
        const char *colon = strchr(line, ':');
        if (strncmp(line, "model name", 10) || !colon) continue;
        snprintf(out, cap, "%s", colon + 2);
        out[strcspn(out, "\n")] = '\0';
        break;
    }
    if (f) fclose(f);
}

static void utc_date(char *out, size_t cap) {
    const time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(out, cap, "%Y-%m-%d %H:%M UTC", &tm);
}

/* The first three fields of /proc/loadavg: how busy the machine was (it is shared). */
static void load_average(char *out, size_t cap) {
    snprintf(out, cap, "?");
    FILE *f = fopen("/proc/loadavg", "r");
    double a, b, c;
    if (f && fscanf(f, "%lf %lf %lf", &a, &b, &c) == 3) snprintf(out, cap, "%.2f %.2f %.2f", a, b, c);
    if (f) fclose(f);
}

static void print_text(const path_result *res, const bench_options *o, const char *load_before) {
    char cpu[256], date[64], load_after[64];
    cpu_model(cpu, sizeof cpu), utc_date(date, sizeof date), load_average(load_after, sizeof load_after);
    printf("GEMM candidates, y[M,N] = x[M,K] w[N,K]^T: %s, %ld CPUs, %s; best call of >= %gs per cell, best of %d "
           "round(s)\n",
           cpu, sysconf(_SC_NPROCESSORS_ONLN), date, o->seconds, o->rounds);
    printf("load average before: %s, after: %s\n", load_before, load_after);
    const int ob = openblas_best_path();
    if (ob >= 0 && res[ob].ran)
        for (int t = 0; t < o->n_threads; t++)
            printf("peak: openblas:best 2048^3 sgemm, %d threads: %.1f GFLOP/s\n", o->threads[t],
                   res[ob].gflops[t][S_PEAK]);
    for (int w = 0; w < N_WORKLOADS; w++) print_workload_table(res, &k_workloads[w], o);
    print_summary(res, o);
    print_details(res, o);
}

/* ---- JSON report --------------------------------------------------------------------- */

static void json_string(const char *s) {
    putchar('"');
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') printf("\\%c", *s);
        else if ((unsigned char)*s < 0x20) printf("\\u%04x", *s);
        else putchar(*s);
    }
    putchar('"');
}

static void json_shape_key(int s) {
    printf("\"%s %dx%dx%d\"", k_shapes[s].name, k_shapes[s].M, k_shapes[s].N, k_shapes[s].K);
}

/* ": 12.34", or ": null" where not measured. */
static void json_gflops(double g) {
    if (g > 0) printf(": %.2f", g);
    else printf(": null");
}

/* One thread count: speed per shape and per forward, and which row-call sizes differ. */
static void json_run(const path_result *r, int t, const bench_options *o) {
    printf("      {\"threads\": %d, \"rows_stable\": %s,\n       \"gflops\": {", o->threads[t],
           all_rows_stable(r, t) ? "true" : "false");
    for (int s = 0; s < N_SHAPES; s++) {
        printf("%s", s ? ", " : "");
        json_shape_key(s);
        json_gflops(r->gflops[t][s]);
    }
    printf("},\n       \"forward_gflops\": {");
    for (int w = 0; w < N_WORKLOADS; w++) {
        printf("%s\"%s\"", w ? ", " : "", k_workloads[w].name);
        json_gflops(workload_gflops(r, t, &k_workloads[w]));
    }
    printf("},\n       \"rows_differ_in_calls_of\": {");
    for (int s = 0, n = 0; s < N_SHAPES; s++) {
        if (!r->row_fail[t][s]) continue;
        printf("%s", n++ ? ", " : ""), json_shape_key(s), printf(": [");
        for (int i = 0, k = 0; i < N_SUB_ROWS; i++)
            if (r->row_fail[t][s] & (1u << i)) printf("%s%d", k++ ? ", " : "", k_sub_rows[i]);
        printf("]");
    }
    printf("}}");
}

/* Output hashes (FNV-1a 64 of the first thread count's floats): comparable across runs and
 * machines, since every process fills the same inputs. */
static void json_hashes(const path_result *r) {
    printf(",\n     \"output_fnv1a64\": {");
    for (int s = 0, k = 0; s < N_SHAPES; s++) {
        if (!r->have_hash[s]) continue;
        printf("%s", k++ ? ", " : "");
        json_shape_key(s);
        printf(": \"%016" PRIx64 "\"", r->hash[s]);
    }
    printf("}");
    int n = 0;
    for (int s = 0; s < N_SHAPES; s++) n += r->sup_differs[s] >= 0;
    if (!n) return;
    printf(",\n     \"sup_taken\": [");
    for (int s = 0, k = 0; s < N_SHAPES; s++)
        if (r->sup_differs[s] == 1) printf("%s", k++ ? ", " : ""), json_shape_key(s);
    printf("]");
}

static void json_path(const path_result *r, int p, const path_result *res, const bench_options *o) {
    printf("    {\"candidate\": \"%s\", \"path\": \"%s\", \"ran\": %s, \"note\": ", k_paths[p].candidate,
           k_paths[p].variant, r->ran ? "true" : "false");
    json_string(r->note);
    if (!r->ran) return (void)printf("}");
    printf(", \"threads_stable\": %s, \"repeatable\": %s, \"same_bits_as_ref\": \"%s\"",
           o->n_threads > 1 && all_true(r->threads_ok) ? "true" : "false", all_true(r->repeat_ok) ? "true" : "false",
           same_as_reference(res, p));
    json_hashes(r);
    printf(",\n     \"runs\": [\n");
    for (int t = 0; t < o->n_threads; t++) printf("%s", t ? ",\n" : ""), json_run(r, t, o);
    printf("]}");
}

static void print_json(const path_result *res, const bench_options *o, const char *load_before) {
    char cpu[256], date[64], load_after[64];
    cpu_model(cpu, sizeof cpu), utc_date(date, sizeof date), load_average(load_after, sizeof load_after);
    printf("{\"cpu\": ");
    json_string(cpu);
    printf(", \"cpus\": %ld, \"date\": \"%s\", \"seconds\": %g, \"rounds\": %d, \"loadavg_before\": \"%s\", "
           "\"loadavg_after\": \"%s\",\n \"paths\": [\n",
           sysconf(_SC_NPROCESSORS_ONLN), date, o->seconds, o->rounds, load_before, load_after);
    int n = 0;
    for (int p = 0; p < N_PATHS; p++) {
        if (!o->selected[p]) continue;
        if (n++) printf(",\n");
        json_path(&res[p], p, res, o);
    }
    printf("\n]}\n");
}

/* ---- options and main ---------------------------------------------------------------- */

static int usage(void) {
    fprintf(stderr, "usage: bench_gemm_candidates [--seconds S] [--rounds R] [--threads T,...] [--paths P,...] "
                    "[--json]\npaths:");
    for (int p = 0; p < N_PATHS; p++) fprintf(stderr, " %s:%s", k_paths[p].candidate, k_paths[p].variant);
    fprintf(stderr, "\n");
    return 2;
}

static bool parse_threads(const char *s, bench_options *o) {
    o->n_threads = 0;
    while (*s && o->n_threads < MAX_THREADS) {
        char *end;
        const long v = strtol(s, &end, 10);
        if (end == s || v <= 0 || v > 1024 || (*end && *end != ',')) return false;
        o->threads[o->n_threads++] = (int)v;
        s = *end ? end + 1 : end;
    }
    return o->n_threads > 0 && !*s;
}

static bool parse_paths(const char *list, bench_options *o) {
    memset(o->selected, 0, sizeof o->selected);
    char buf[512];
    snprintf(buf, sizeof buf, "%s", list);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        const int p = find_path(tok);
        if (p < 0) return fprintf(stderr, "unknown path %s\n", tok), false;
        o->selected[p] = true;
    }
    return true;
}

static bool parse_options(int argc, char **argv, bench_options *o) {
    *o = (bench_options){.seconds = 0.3, .rounds = 1, .n_threads = 2, .threads = {1, 2}, .child_path = -1,
                         .child_shape = -1, .checks = true};
    for (int p = 0; p < N_PATHS; p++) o->selected[p] = true;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--json")) o->json = true;
        else if (!strcmp(a, "--no-checks")) o->checks = false;
        else if (!v) return false;
        else if (!strcmp(a, "--seconds") && (o->seconds = atof(v)) >= 0) i++;
        else if (!strcmp(a, "--rounds") && (o->rounds = atoi(v)) > 0) i++;
        else if (!strcmp(a, "--threads") && parse_threads(v, o)) i++;
        else if (!strcmp(a, "--paths") && parse_paths(v, o)) i++;
        else if (!strcmp(a, "--child") && (o->child_path = find_path(v)) >= 0) i++;
        else if (!strcmp(a, "--shape") && (o->child_shape = atoi(v)) >= 0 && o->child_shape < N_SHAPES) i++;
        else return false;
    }
    return true;
}

int main(int argc, char **argv) {
    bench_options o;
    if (!parse_options(argc, argv, &o)) return usage();
    if (o.child_path >= 0) return run_child(&o);
    static path_result res[N_PATHS];
    char load_before[64];
    load_average(load_before, sizeof load_before);
    for (int p = 0; p < N_PATHS; p++) init_result(&res[p]);
    /* Shape by shape, every path in turn, so that the machine's load falls on all alike. */
    for (int r = 0; r < o.rounds; r++)
        for (int s = 0; s < N_SHAPES; s++) {
            fprintf(stderr, "round %d/%d, %s %dx%dx%d\n", r + 1, o.rounds, k_shapes[s].name, k_shapes[s].M,
                    k_shapes[s].N, k_shapes[s].K);
            for (int p = 0; p < N_PATHS; p++)
                if (o.selected[p] && !res[p].gave_up && path_runs(p, s, r)) run_path(&o, p, s, r == 0, &res[p]);
        }
    if (o.json) print_json(res, &o, load_before);
    else print_text(res, &o, load_before);
    return 0;
}
