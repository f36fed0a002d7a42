/* distzo's Linear GEMM: y = x w^T + bias with one FMA chain per output element (gemm.h).
 *
 * The structure is the classic packed GEMM (Goto; BLIS's five loops): w is packed, a
 * block of kc x nc at a time, into panels of NR columns stored k-major; x into slivers of
 * MR rows, also k-major; a micro-kernel keeps an MR x NR tile of y in registers and runs
 * kc rank-1 updates on it. Splitting K into kc blocks does not change the arithmetic: the
 * tile is stored after a block and reloaded for the next, and a float in memory is the
 * float that was in the register, so each element's chain is one chain over all of K.
 * Threads split N (and M), never K. Edge tiles (fewer than MR rows or NR columns) run the
 * same kernel on zero padding, so every element gets the same chain wherever it sits.
 *
 * The micro-kernel is one body instantiated per vector unit: 12 x 32 (AVX-512, 24 zmm
 * accumulators), 6 x 16 (AVX2, 12 ymm), and 4 x 8 with fmaf on the baseline, whose
 * correctly rounded fmaf gives the hardware FMA's bits.
 *
 * dz_gemm_linear_pair (at the end) runs both signs of a ZO step's matrix from theta: its
 * packing makes the panels of theta + eps z and theta - eps z itself, so the perturbed
 * weights never go through memory; the tiles are the same. */
#include "backend/gemm.h"

#include <immintrin.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/threads.h"
#include "backend/backend.h"
#include "backend/cpu_simd.h"
#include "backend/cpu_zo.h"
#include "backend/cpu_zo_update.h"
#include "backend/gemm_blocking.h"

/* The largest blocking (the packing buffers' sizes); each level's own is gemm_blocking_of. */
enum { GEMM_KC = 768, GEMM_MC = 240, GEMM_NC = 768, GEMM_MR_MAX = 12, GEMM_NR_MAX = 32 };

/* One micro-tile: c[0..mr) x [0..NR) (row stride ldc) = (first ? 0 : c) + a . pb over kc,
 * then + bias[0..NR) when bias is non-NULL (the last K block). a: mr rows of x (row
 * stride lda, read in place: broadcasts need no packing), pb: kc x NR (k-major). */
typedef void (*gemm_tile_fn)(int mr, int kc, const float *a, int lda, const float *pb, float *c, int ldc,
                             int first, const float *bias);

typedef struct gemm_kernel {
    dz_isa isa;
    int mr, nr;
    gemm_tile_fn tile;
    /* w's K block into panels of nr columns (see pack_w_scalar) */
    void (*pack_w)(float *pb, const float *w, int N, int K, int n0, int nc, int p0, int kc, int nr);
    const char *name;
} gemm_kernel;

#define GEMM_INLINE static inline __attribute__((always_inline))
/* The vector micro-kernels and the transposes run without sanitizer checks: they are nearly all of
 * a GEMM's time (checked, the ASan suite ran several times slower), every address they touch
 * comes from the checked driver below (packing buffers, rows of x and y), and
 * tests/test_gemm.c compares their output bitwise with plain loops on edge shapes. */
#define GEMM_UNCHECKED __attribute__((no_sanitize("address", "undefined")))

/* Each level's micro-kernel: the FMA targets of cpu_simd.h (the one place that names a
 * level's instructions), unchecked for the vector levels. */
#define GEMM_ATTR_BASELINE DZ_ISA_TARGET_FMA_BASELINE
#define GEMM_ATTR_AVX2 DZ_ISA_TARGET_FMA_AVX2 GEMM_UNCHECKED
#define GEMM_ATTR_AVX512 DZ_ISA_TARGET_FMA_AVX512 GEMM_UNCHECKED

/* The micro-kernel body, for a vector type VT of LANES floats; NR = 2 * LANES. mr is a
 * constant in each instantiation (see GEMM_DISPATCH), so acc lives in registers. */
#define GEMM_DEFINE_TILE(isa, ATTR, VT, LANES, MR, LOAD, STORE, ZERO, SET1, FMA, ADD)                          \
    ATTR GEMM_INLINE void isa##_tile_rows(const int mr, int kc, const float *a, int lda, const float *pb,        \
                                          float *c, int ldc, int first, const float *bias) {                     \
        VT acc[MR][2];                                                                                           \
        for (int i = 0; i < mr; i++) /* the tile's rows of y: in cache by the time it is stored */              \
            __builtin_prefetch(c + (size_t)i * ldc, 1), __builtin_prefetch(c + (size_t)i * ldc + 2 * LANES - 1, 1); \
        for (int i = 0; i < mr; i++) {                                                                           \
            acc[i][0] = first ? ZERO() : LOAD(c + (size_t)i * ldc);                                               \
            acc[i][1] = first ? ZERO() : LOAD(c + (size_t)i * ldc + LANES);                                       \
        }                                                                                                        \
        _Pragma("GCC unroll 4") for (int k = 0; k < kc; k++) {                                                   \
            const VT b0 = LOAD(pb + (size_t)k * 2 * LANES), b1 = LOAD(pb + (size_t)k * 2 * LANES + LANES);        \
            for (int i = 0; i < mr; i++) {                                                                       \
                const VT ai = SET1(a[(size_t)i * lda + k]);                                                      \
                acc[i][0] = FMA(ai, b0, acc[i][0]);                                                              \
                acc[i][1] = FMA(ai, b1, acc[i][1]);                                                              \
            }                                                                                                    \
        }                                                                                                        \
        if (bias) {                                                                                              \
            const VT c0 = LOAD(bias), c1 = LOAD(bias + LANES);                                                   \
            for (int i = 0; i < mr; i++) acc[i][0] = ADD(acc[i][0], c0), acc[i][1] = ADD(acc[i][1], c1);          \
        }                                                                                                        \
        for (int i = 0; i < mr; i++) {                                                                           \
            STORE(c + (size_t)i * ldc, acc[i][0]);                                                               \
            STORE(c + (size_t)i * ldc + LANES, acc[i][1]);                                                       \
        }                                                                                                        \
    }

/* The tile function of an ISA: a switch that gives each row count its own constant. */
#define GEMM_CASE(isa, n) \
    case n: isa##_tile_rows(n, kc, a, lda, pb, c, ldc, first, bias); break;
#define GEMM_DEFINE_DISPATCH(isa, ATTR, CASES)                                                              \
    ATTR static void isa##_tile(int mr, int kc, const float *a, int lda, const float *pb, float *c, int ldc,   \
                                int first, const float *bias) {                                             \
        switch (mr) { CASES }                                                                               \
    }

/* AVX-512: 12 x 32. */
#define A512_ZERO() _mm512_setzero_ps()
GEMM_DEFINE_TILE(avx512, GEMM_ATTR_AVX512, __m512, 16, 12, _mm512_loadu_ps, _mm512_storeu_ps, A512_ZERO,
                 _mm512_set1_ps, _mm512_fmadd_ps, _mm512_add_ps)
GEMM_DEFINE_DISPATCH(avx512, GEMM_ATTR_AVX512,
                     GEMM_CASE(avx512, 1) GEMM_CASE(avx512, 2) GEMM_CASE(avx512, 3) GEMM_CASE(avx512, 4)
                         GEMM_CASE(avx512, 5) GEMM_CASE(avx512, 6) GEMM_CASE(avx512, 7) GEMM_CASE(avx512, 8)
                             GEMM_CASE(avx512, 9) GEMM_CASE(avx512, 10) GEMM_CASE(avx512, 11)
                                 GEMM_CASE(avx512, 12))

/* AVX2: 6 x 16. */
#define A256_ZERO() _mm256_setzero_ps()
GEMM_DEFINE_TILE(avx2, GEMM_ATTR_AVX2, __m256, 8, 6, _mm256_loadu_ps, _mm256_storeu_ps, A256_ZERO, _mm256_set1_ps,
                 _mm256_fmadd_ps, _mm256_add_ps)
GEMM_DEFINE_DISPATCH(avx2, GEMM_ATTR_AVX2,
                     GEMM_CASE(avx2, 1) GEMM_CASE(avx2, 2) GEMM_CASE(avx2, 3) GEMM_CASE(avx2, 4) GEMM_CASE(avx2, 5)
                         GEMM_CASE(avx2, 6))

/* Baseline: 4 x 8 "vectors" of 4 floats, each lane one fmaf chain. */
typedef struct f4 {
    float v[4];
} f4;
GEMM_INLINE f4 f4_load(const float *p) {
    f4 r;
    memcpy(r.v, p, sizeof r.v);
    return r;
}
GEMM_INLINE void f4_store(float *p, f4 a) { memcpy(p, a.v, sizeof a.v); }
GEMM_INLINE f4 f4_zero(void) { return (f4){{0.0f, 0.0f, 0.0f, 0.0f}}; }
GEMM_INLINE f4 f4_set1(float a) { return (f4){{a, a, a, a}}; }
GEMM_INLINE f4 f4_fma(f4 a, f4 b, f4 c) {
    for (int l = 0; l < 4; l++) c.v[l] = fmaf(a.v[l], b.v[l], c.v[l]);
    return c;
}
GEMM_INLINE f4 f4_add(f4 a, f4 b) {
    for (int l = 0; l < 4; l++) a.v[l] += b.v[l];
    return a;
}
GEMM_DEFINE_TILE(baseline, GEMM_ATTR_BASELINE, f4, 4, 4, f4_load, f4_store, f4_zero, f4_set1, f4_fma, f4_add)
GEMM_DEFINE_DISPATCH(baseline, GEMM_ATTR_BASELINE,
                     GEMM_CASE(baseline, 1) GEMM_CASE(baseline, 2) GEMM_CASE(baseline, 3) GEMM_CASE(baseline, 4))


/* Packing buffers, one pair per thread, allocated on a thread's first call and kept
 * (the sizes depend only on the blocking constants). Freed at exit. */
/* When x's row stride is a multiple of 2 KiB (K = 512, 1024, 1536, 3072...), the MR rows a
 * tile reads fall into one or two L1 sets and evict each other; such rows are first
 * copied (memcpy) into a block with this stride. Other strides are read in place. */
enum { GEMM_X_STRIDE = GEMM_KC + 16 };

typedef struct gemm_workspace {
    float *px; /* GEMM_MC x GEMM_X_STRIDE: rows of x for one K block */
    float *pb; /* GEMM_KC x (GEMM_NC + GEMM_NR_MAX) */
    float bias[GEMM_NR_MAX];
    float tile[GEMM_MR_MAX * GEMM_NR_MAX];
    /* the pair GEMM's (below) on its first call: the minus sign's panels, beside pb
     * (the plus sign's), and one panel's rows of w+ and w- (NR x KC each) and of z (KC) */
    float *pb_minus, *rows_pm, *z, *u;
    struct gemm_workspace *next;
} gemm_workspace;

static _Thread_local gemm_workspace *tl_workspace;
static gemm_workspace *g_workspaces;
static pthread_mutex_t g_workspaces_lock = PTHREAD_MUTEX_INITIALIZER;

static gemm_workspace *workspace(void) {
    if (tl_workspace) return tl_workspace;
    gemm_workspace *w = calloc(1, sizeof *w);
    if (!w) return NULL;
    w->px = aligned_alloc(64, sizeof(float) * GEMM_MC * GEMM_X_STRIDE);
    w->pb = aligned_alloc(64, sizeof(float) * GEMM_KC * (GEMM_NC + GEMM_NR_MAX));
    if (!w->px || !w->pb) {
        free(w->px), free(w->pb), free(w);
        return NULL;
    }
    pthread_mutex_lock(&g_workspaces_lock);
    w->next = g_workspaces, g_workspaces = w;
    pthread_mutex_unlock(&g_workspaces_lock);
    return tl_workspace = w;
}

__attribute__((destructor)) static void free_workspaces(void) {
    pthread_mutex_lock(&g_workspaces_lock);
    for (gemm_workspace *w = g_workspaces, *next; w; w = next) {
        next = w->next;
        free(w->px), free(w->pb), free(w->pb_minus), free(w->rows_pm), free(w->z), free(w->u), free(w);
    }
    g_workspaces = NULL;
    pthread_mutex_unlock(&g_workspaces_lock);
}

/* w[n0 .. n0+nc) x [p0 .. p0+kc) into panels of nr columns, each kc x nr k-major; columns
 * at or past N (or nc) are zeros. Pure data movement, so any implementation gives the same
 * panels; this one handles every shape, element by element. */
static void pack_w_scalar_cols(float *panel, const float *w, int N, int K, int n_first, int n_valid, int j_from,
                               int j_to, int p0, int k_from, int kc, int nr) {
    for (int j = j_from; j < j_to; j++) {
        const int n = n_first + j;
        if (j >= n_valid || n >= N) {
            for (int k = k_from; k < kc; k++) panel[(size_t)k * nr + j] = 0.0f;
            continue;
        }
        const float *row = w + (size_t)n * K + p0;
        for (int k = k_from; k < kc; k++) panel[(size_t)k * nr + j] = row[k];
    }
}

static void pack_w_scalar(float *pb, const float *w, int N, int K, int n0, int nc, int p0, int kc, int nr) {
    for (int j0 = 0; j0 < nc; j0 += nr)
        pack_w_scalar_cols(pb + (size_t)j0 * kc, w, N, K, n0 + j0, nc - j0, 0, nr, p0, 0, kc, nr);
}

/* dst[c][r] = src[r][c] for an 8 x 8 block (strides in floats). */
DZ_ISA_TARGET_AVX2 GEMM_UNCHECKED static inline void transpose8x8(const float *src, size_t lds, float *dst, size_t ldd) {
    __m256 r[8], t[8], u[8];
    for (int i = 0; i < 8; i++) r[i] = _mm256_loadu_ps(src + i * lds);
    for (int i = 0; i < 8; i += 2) t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]), t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
    for (int i = 0; i < 8; i += 4) {
        u[i + 0] = _mm256_shuffle_ps(t[i + 0], t[i + 2], 0x44);
        u[i + 1] = _mm256_shuffle_ps(t[i + 0], t[i + 2], 0xEE);
        u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
        u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
    }
    for (int i = 0; i < 4; i++) {
        _mm256_storeu_ps(dst + i * ldd, _mm256_permute2f128_ps(u[i], u[i + 4], 0x20));
        _mm256_storeu_ps(dst + (i + 4) * ldd, _mm256_permute2f128_ps(u[i], u[i + 4], 0x31));
    }
}

/* The same panels through 8 x 8 transposes; ragged edges (fewer than 8 rows of w left, or
 * a K block not a multiple of 8) go element by element. */
DZ_ISA_TARGET_AVX2 static void pack_w_avx2(float *pb, const float *w, int N, int K, int n0, int nc, int p0,
                                                       int kc, int nr) {
    const int kc8 = kc / 8 * 8;
    for (int j0 = 0; j0 < nc; j0 += nr) {
        float *panel = pb + (size_t)j0 * kc;
        const int n_first = n0 + j0, n_valid = nc - j0 < nr ? nc - j0 : nr;
        int full = N - n_first < n_valid ? N - n_first : n_valid; /* real columns in this panel */
        full = full / 8 * 8;
        for (int j8 = 0; j8 < full; j8 += 8)
            for (int k8 = 0; k8 < kc8; k8 += 8)
                transpose8x8(w + (size_t)(n_first + j8) * K + p0 + k8, (size_t)K, panel + (size_t)k8 * nr + j8,
                             (size_t)nr);
        pack_w_scalar_cols(panel, w, N, K, n_first, n_valid, 0, full, p0, kc8, kc, nr); /* K tail */
        pack_w_scalar_cols(panel, w, N, K, n_first, n_valid, full, nr, p0, 0, kc, nr);  /* last columns */
    }
}

static const gemm_kernel gemm_kernels[DZ_ISA_COUNT] = {
    [DZ_ISA_BASELINE] = {DZ_ISA_BASELINE, 4, 8, baseline_tile, pack_w_scalar, "baseline 4x8 (fmaf)"},
    [DZ_ISA_AVX2] = {DZ_ISA_AVX2, 6, 16, avx2_tile, pack_w_avx2, "avx2 6x16"},
    [DZ_ISA_AVX512] = {DZ_ISA_AVX512, 12, 32, avx512_tile, pack_w_avx2, "avx512 12x32"},
};

/* The level's blocking on this machine (gemm_blocking.c), within the buffers' sizes. */
static dz_gemm_blocking gemm_blocking_of(const gemm_kernel *kr) {
    return dz_gemm_blocking_for(kr->isa, kr->mr, (dz_gemm_blocking){GEMM_MC / kr->mr * kr->mr, GEMM_KC, GEMM_NC});
}

typedef struct gemm_args {
    float *y;
    const float *x, *w, *bias;
    int M, N, K;
} gemm_args;

/* One tile of y at (row, col) with mr rows and nc_tile valid columns. Partial-width tiles
 * go through ws->tile so the kernel always writes NR columns. */
static void run_tile(const gemm_kernel *kr, gemm_workspace *ws, const gemm_args *g, int row, int col, int mr,
                     int ncols, const float *a, int lda, int kc, const float *pb, int first, int last) {
    float *c = g->y + (size_t)row * g->N + col;
    const float *bias = NULL;
    if (ncols == kr->nr) {
        if (last && g->bias) bias = g->bias + col;
        kr->tile(mr, kc, a, lda, pb, c, g->N, first, bias);
        return;
    }
    if (last && g->bias) {
        memset(ws->bias, 0, sizeof ws->bias);
        memcpy(ws->bias, g->bias + col, sizeof(float) * (size_t)ncols);
        bias = ws->bias;
    }
    if (!first)
        for (int i = 0; i < mr; i++) memcpy(ws->tile + (size_t)i * kr->nr, c + (size_t)i * g->N, sizeof(float) * (size_t)ncols);
    kr->tile(mr, kc, a, lda, pb, ws->tile, kr->nr, first, bias);
    for (int i = 0; i < mr; i++) memcpy(c + (size_t)i * g->N, ws->tile + (size_t)i * kr->nr, sizeof(float) * (size_t)ncols);
}

/* Rows [n_first, n_first + rows) x columns [p0, p0 + kc) of w, a panel's source, requested
 * into L2 a slice at a time (slice `part` of `parts`): the micro-kernel's tiles of one panel
 * then hide the memory latency of the next panel's packing. Only a hint: no bits depend on it. */
static void prefetch_panel_part(const float *w, int N, int K, int n_first, int rows, int p0, int kc, int part,
                                int parts) {
    if (n_first >= N) return;
    if (rows > N - n_first) rows = N - n_first;
    const int r0 = (int)((long)rows * part / parts), r1 = (int)((long)rows * (part + 1) / parts);
    for (int r = r0; r < r1; r++) {
        const char *row = (const char *)(w + (size_t)(n_first + r) * K + p0);
        for (size_t b = 0; b < sizeof(float) * (size_t)kc; b += 64) __builtin_prefetch(row + b, 0, 2);
    }
}

/* One K block [pc, pc + kc) of the N block [jc, jc + nc) (of a thread's [.., n1)) over rows
 * [m0, m1): the tiles of every row block against the block's panels at pb. With pack, each
 * panel of w is packed just before the first row block uses it, while its predecessor's
 * tiles prefetch its source rows; without, pb holds the block's panels already. */
typedef struct gemm_block {
    int jc, nc, n1, pc, kc;
} gemm_block;

GEMM_INLINE void gemm_block_rows(const gemm_kernel *kr, gemm_workspace *ws, const gemm_args *g, int m0, int m1,
                                const gemm_block *b, const float *pb, int pack) {
    const dz_gemm_blocking bl = gemm_blocking_of(kr);
    const int mr = kr->mr, nr = kr->nr, mc_max = bl.mc, jc = b->jc, nc = b->nc, pc = b->pc, kc = b->kc;
    const int copy_x = g->K % 512 == 0, lda = copy_x ? GEMM_X_STRIDE : g->K;
    const int first = pc == 0, last = pc + kc == g->K;
    /* the panel after the last one of this block: the next K block's, else the next N block's */
    const int next_n = last ? jc + bl.nc : jc, next_p = last ? 0 : pc + kc;
    const int next_kc = g->K - next_p < bl.kc ? g->K - next_p : bl.kc;
    for (int ic = m0; ic < m1; ic += mc_max) {
        const int mc = m1 - ic < mc_max ? m1 - ic : mc_max, pack_now = pack && ic == m0;
        const int tiles = (mc + mr - 1) / mr;
        const float *xb = g->x + (size_t)ic * g->K + pc;
        if (copy_x) {
            for (int i = 0; i < mc; i++)
                memcpy(ws->px + (size_t)i * GEMM_X_STRIDE, xb + (size_t)i * g->K, sizeof(float) * (size_t)kc);
            xb = ws->px;
        }
        for (int jr = 0; jr < nc; jr += nr) {
            const int ncols = nc - jr < nr ? nc - jr : nr;
            const float *panel = pb + (size_t)jr * kc;
            if (pack_now) kr->pack_w(ws->pb + (size_t)jr * kc, g->w, g->N, g->K, jc + jr, ncols, pc, kc, nr);
            const int more = jr + nr < nc;
            for (int ir = 0, t = 0; ir < mc; ir += mr, t++) {
                run_tile(kr, ws, g, ic + ir, jc + jr, mc - ir < mr ? mc - ir : mr, ncols, xb + (size_t)ir * lda, lda,
                         kc, panel, first, last);
                if (!pack_now) continue;
                if (more)
                    prefetch_panel_part(g->w, jc + nc, g->K, jc + jr + nr, nr, pc, kc, t, tiles);
                else if (next_n < b->n1)
                    prefetch_panel_part(g->w, b->n1, g->K, next_n, nr, next_p, next_kc, t, tiles);
            }
        }
    }
}

/* y[m0..m1) x [n0..n1) on the calling thread, block by block of w. */
static void gemm_range(const gemm_kernel *kr, gemm_workspace *ws, const gemm_args *g, int m0, int m1, int n0,
                       int n1) {
    const dz_gemm_blocking bl = gemm_blocking_of(kr);
    for (int jc = n0; jc < n1; jc += bl.nc)
        for (int pc = 0; pc < g->K; pc += bl.kc) {
            const gemm_block b = {jc, n1 - jc < bl.nc ? n1 - jc : bl.nc, n1, pc, g->K - pc < bl.kc ? g->K - pc : bl.kc};
            gemm_block_rows(kr, ws, g, m0, m1, &b, ws->pb, 1);
        }
}

/* K == 0: every chain is empty, y = 0 + bias. */
static void gemm_empty(const gemm_args *g) {
    for (int i = 0; i < g->M; i++)
        for (int n = 0; n < g->N; n++) g->y[(size_t)i * g->N + n] = 0.0f + (g->bias ? g->bias[n] : 0.0f);
}

/* Plain loops with the same chain: used only if a thread cannot get its packing buffers
 * (out of memory), so the result is still exact, just slow. */
static void gemm_unpacked(const gemm_args *g, int m0, int m1, int n0, int n1) {
    for (int i = m0; i < m1; i++)
        for (int n = n0; n < n1; n++) {
            float acc = 0.0f;
            for (int k = 0; k < g->K; k++) acc = fmaf(g->x[(size_t)i * g->K + k], g->w[(size_t)n * g->K + k], acc);
            g->y[(size_t)i * g->N + n] = g->bias ? acc + g->bias[n] : acc;
        }
}

/* A few rows (nr/2 .. nr of them: a head over the scored rows): y^T = w x^T, with w's rows
 * as the micro-kernel's broadcast operand, read in place, and x packed once into a single
 * panel of its rows; nothing of w is packed, which would cost more than these rows'
 * arithmetic. Each output is still one FMA chain over k in order from +0 (fma is symmetric
 * in its factors), then + bias, as in gemm_range. The whole of K runs in one kernel call. */
static int few_rows_fit(const gemm_kernel *kr, int rows, int K) {
    return rows >= kr->nr / 2 && rows <= kr->nr && (size_t)K * kr->nr <= (size_t)GEMM_KC * (GEMM_NC + GEMM_NR_MAX) &&
           (size_t)kr->mr * (K + 16) <= (size_t)GEMM_MC * GEMM_X_STRIDE;
}

static void gemm_few_rows(const gemm_kernel *kr, gemm_workspace *ws, const gemm_args *g, int m0, int m1, int n0,
                          int n1) {
    const int mr = kr->mr, nr = kr->nr, K = g->K, rows = m1 - m0;
    const int copy_w = K % 512 == 0, lda = copy_w ? K + 16 : K; /* the L1 sets, as copy_x in gemm_range */
    kr->pack_w(ws->pb, g->x + (size_t)m0 * K, rows, K, 0, nr, 0, K, nr);
    for (int n = n0; n < n1; n += mr) {
        const int wr = n1 - n < mr ? n1 - n : mr;
        const float *a = g->w + (size_t)n * K;
        if (copy_w) {
            for (int i = 0; i < wr; i++) memcpy(ws->px + (size_t)i * lda, a + (size_t)i * K, sizeof(float) * (size_t)K);
            a = ws->px;
        }
        kr->tile(wr, K, a, lda, ws->pb, ws->tile, nr, 1, NULL);
        for (int j = 0; j < rows; j++) {
            float *y = g->y + (size_t)(m0 + j) * g->N + n;
            for (int i = 0; i < wr; i++) y[i] = g->bias ? ws->tile[(size_t)i * nr + j] + g->bias[n + i] : ws->tile[(size_t)i * nr + j];
        }
    }
}

static void gemm_part(const gemm_kernel *kr, const gemm_args *g, int m0, int m1, int n0, int n1) {
    if (m0 >= m1 || n0 >= n1) return;
    gemm_workspace *ws = workspace();
    if (!ws)
        gemm_unpacked(g, m0, m1, n0, n1);
    else if (few_rows_fit(kr, m1 - m0, g->K))
        gemm_few_rows(kr, ws, g, m0, m1, n0, n1);
    else
        gemm_range(kr, ws, g, m0, m1, n0, n1);
}

void dz_gemm_linear_serial(dz_isa isa, float *y, const float *x, const float *w, const float *bias, int M, int N,
                           int K) {
    if (M <= 0 || N <= 0) return;
    const gemm_args g = {y, x, w, bias, M, N, K};
    if (K <= 0) return gemm_empty(&g);
    if (isa <= DZ_ISA_AUTO || isa >= DZ_ISA_COUNT) isa = dz_isa_active();
    gemm_part(&gemm_kernels[isa], &g, 0, M, 0, N);
}

/* Thread t of nt gets a block of panels of N and, when there are fewer panels than
 * threads, a share of M: any split gives the same bits, this one keeps w's packing
 * unduplicated when N is wide. */
static void thread_share(const gemm_args *g, int nr, int t, int nt, int *m0, int *m1, int *n0, int *n1) {
    const int panels = (g->N + nr - 1) / nr;
    int n_split = nt < panels ? nt : panels;
    while (nt % n_split) n_split--;
    const int m_split = nt / n_split, tn = t % n_split, tm = t / n_split;
    *n0 = (int)((long)panels * tn / n_split) * nr;
    *n1 = (int)((long)panels * (tn + 1) / n_split) * nr;
    if (*n1 > g->N) *n1 = g->N;
    *m0 = (int)((long)g->M * tm / m_split);
    *m1 = (int)((long)g->M * (tm + 1) / m_split);
}

typedef struct gemm_call {
    const gemm_kernel *kr;
    const gemm_args *g;
    int shares;
} gemm_call;

static void gemm_share(void *ctx, int share, int thread) {
    const gemm_call *c = ctx;
    int m0, m1, n0, n1;
    thread_share(c->g, c->kr->nr, share, c->shares, &m0, &m1, &n0, &n1);
    gemm_part(c->kr, c->g, m0, m1, n0, n1);
}

void dz_gemm_linear(float *y, const float *x, const float *w, const float *bias, int M, int N, int K) {
    if (M <= 0 || N <= 0) return;
    const gemm_args g = {y, x, w, bias, M, N, K};
    if (K <= 0) return gemm_empty(&g);
    const gemm_kernel *kr = &gemm_kernels[dz_isa_active()];
    const int threads = dz_parallel_threads();
    if (threads <= 1 || (double)M * N * K < 32768.0) return gemm_part(kr, &g, 0, M, 0, N);
    const gemm_call call = {kr, &g, threads};
    dz_parallel_for(threads, gemm_share, (void *)&call);
}

/* ---- Both signs of one matrix from theta: the perturbation in the packing ---------------- */

static int pair_workspace(gemm_workspace *ws) {
    if (ws->pb_minus) return 1;
    ws->pb_minus = aligned_alloc(64, sizeof(float) * GEMM_KC * (GEMM_NC + GEMM_NR_MAX));
    ws->rows_pm = aligned_alloc(64, sizeof(float) * 2 * GEMM_NR_MAX * GEMM_KC);
    ws->z = aligned_alloc(64, sizeof(float) * GEMM_KC);
    ws->u = aligned_alloc(64, sizeof(float) * GEMM_KC);
    if (ws->pb_minus && ws->rows_pm && ws->z && ws->u) return 1;
    free(ws->pb_minus), free(ws->rows_pm), free(ws->z), free(ws->u);
    ws->pb_minus = ws->rows_pm = ws->z = ws->u = NULL;
    return 0;
}

/* theta[0 .. n), elements i .. i+n-1 of the tensor, gets the pending update in place: the
 * z of each sample's draw accumulated into u in the spec's order, then applied (cpu_zo.c's
 * chunk, element by element, so any split into rows gives the same bits). z, u: n floats. */
static void update_in_place(float *theta, size_t n, uint64_t i, const dz_gemm_perturb *pt, float *z, float *u) {
    const dz_zo_update *upd = pt->upd;
    const uint32_t d0 = upd->step * (uint32_t)upd->q;
    for (int j = 0; j < upd->q; j++) {
        dz_cpu_z_fill(NULL, z, pt->seed, pt->tensor, d0 + (uint32_t)j, i, n, pt->dist);
        dz_zo_add_scaled(u, upd->g[j], z, n, j == 0);
    }
    dz_zo_apply_update(theta, theta, u, n, upd->q, upd->lr, upd->wd);
}

/* The block's panels of both signs: each panel's rows of theta + eps z and theta - eps z
 * made in L1/L2 (z drawn once per element, the pair made as perturb_pair makes it), then
 * packed like any w (pure data movement, so the panels hold exactly the floats perturb_pair
 * would have written to memory). */
static void pack_pair_block(const gemm_kernel *kr, gemm_workspace *ws, float *theta, int N, int K,
                            const gemm_block *b, const dz_gemm_perturb *pt) {
    const int nr = kr->nr, kc = b->kc;
    float *rp = ws->rows_pm, *rm = ws->rows_pm + (size_t)nr * kc;
    for (int jr = 0; jr < b->nc; jr += nr) {
        const int ncols = b->nc - jr < nr ? b->nc - jr : nr, n_first = b->jc + jr;
        const int rows = N - n_first < ncols ? N - n_first : ncols;
        for (int r = 0; r < rows; r++) {
            const size_t e = (size_t)(n_first + r) * K + b->pc;
            if (pt->upd) update_in_place(theta + e, (size_t)kc, pt->i0 + e, pt, ws->z, ws->u);
            dz_cpu_z_fill(NULL, ws->z, pt->seed, pt->tensor, pt->draw, pt->i0 + e, (size_t)kc, pt->dist);
            dz_zo_make_pair(rp + (size_t)r * kc, rm + (size_t)r * kc, theta + e, ws->z, pt->eps, (size_t)kc);
        }
        kr->pack_w(ws->pb + (size_t)jr * kc, rp, rows, kc, 0, ncols, 0, kc, nr);
        kr->pack_w(ws->pb_minus + (size_t)jr * kc, rm, rows, kc, 0, ncols, 0, kc, nr);
    }
}

/* Plain loops (a thread without packing buffers): each row of w+ / w- made a chunk at a
 * time, each output's chain kept in y between chunks (a float in memory is the float in
 * the register), the bias added at the end. Exact, slow, only when out of memory. */
static void gemm_pair_unpacked(float *theta, const gemm_args g[2], const int m0[2], const int m1[2], int n0, int n1,
                               const dz_gemm_perturb *pt) {
    enum { CH = 256 };
    float z[CH], u[CH], w[2][CH];
    const int K = g[0].K;
    for (int n = n0; n < n1; n++) {
        for (int s = 0; s < 2; s++)
            for (int i = m0[s]; i < m1[s]; i++) g[s].y[(size_t)i * g[s].N + n] = 0.0f;
        for (int k0 = 0; k0 < K; k0 += CH) {
            const int m = K - k0 < CH ? K - k0 : CH;
            const size_t e = (size_t)n * K + k0;
            if (pt->upd) update_in_place(theta + e, (size_t)m, pt->i0 + e, pt, z, u);
            dz_cpu_z_fill(NULL, z, pt->seed, pt->tensor, pt->draw, pt->i0 + e, (size_t)m, pt->dist);
            dz_zo_make_pair(w[0], w[1], theta + e, z, pt->eps, (size_t)m);
            for (int s = 0; s < 2; s++)
                for (int i = m0[s]; i < m1[s]; i++) {
                    float *acc = &g[s].y[(size_t)i * g[s].N + n];
                    for (int k = 0; k < m; k++) *acc = fmaf(g[s].x[(size_t)i * K + k0 + k], w[s][k], *acc);
                }
        }
        for (int s = 0; s < 2; s++)
            if (g[s].bias)
                for (int i = m0[s]; i < m1[s]; i++) g[s].y[(size_t)i * g[s].N + n] += g[s].bias[n];
    }
}

/* Columns [n0, n1) of both signs' rows [m0[s], m1[s]) on the calling thread: per block of
 * w, both signs' panels packed once, then each sign's tiles run on its own panels. */
static void gemm_pair_part(const gemm_kernel *kr, float *theta, const gemm_args g[2], const int m0[2],
                           const int m1[2], int n0, int n1, const dz_gemm_perturb *pt) {
    if (n0 >= n1) return;
    gemm_workspace *ws = workspace();
    if (!ws || !pair_workspace(ws)) return gemm_pair_unpacked(theta, g, m0, m1, n0, n1, pt);
    const int K = g[0].K;
    const dz_gemm_blocking bl = gemm_blocking_of(kr);
    for (int jc = n0; jc < n1; jc += bl.nc)
        for (int pc = 0; pc < K; pc += bl.kc) {
            const gemm_block b = {jc, n1 - jc < bl.nc ? n1 - jc : bl.nc, n1, pc, K - pc < bl.kc ? K - pc : bl.kc};
            pack_pair_block(kr, ws, theta, g[0].N, K, &b, pt);
            for (int s = 0; s < 2; s++) gemm_block_rows(kr, ws, &g[s], m0[s], m1[s], &b, s ? ws->pb_minus : ws->pb, 0);
        }
}

static void pair_args(gemm_args g[2], float *const y[2], const float *const x[2], const int M[2], const float *theta,
                      const float *const bias[2], int N, int K) {
    for (int s = 0; s < 2; s++) g[s] = (gemm_args){y[s], x[s], theta, bias[s], M[s] > 0 ? M[s] : 0, N, K};
}

/* K == 0 (every chain empty) or nothing to compute: the plain GEMM's answer per sign. */
static int pair_trivial(const gemm_args g[2]) {
    if (g[0].N <= 0) return 1;
    if (g[0].K > 0) return 0;
    for (int s = 0; s < 2; s++)
        if (g[s].M > 0) gemm_empty(&g[s]);
    return 1;
}

void dz_gemm_linear_pair_serial(dz_isa isa, float *const y[2], const float *const x[2], const int M[2], float *theta,
                                const float *const bias[2], int N, int K, const dz_gemm_perturb *pt) {
    gemm_args g[2];
    pair_args(g, y, x, M, theta, bias, N, K);
    if (pair_trivial(g)) return;
    if (isa <= DZ_ISA_AUTO || isa >= DZ_ISA_COUNT) isa = dz_isa_active();
    const int m0[2] = {0, 0}, m1[2] = {g[0].M, g[1].M};
    gemm_pair_part(&gemm_kernels[isa], theta, g, m0, m1, 0, N, pt);
}

typedef struct gemm_pair_call {
    const gemm_kernel *kr;
    float *theta;
    const gemm_args *g;
    const dz_gemm_perturb *pt;
    int shares;
} gemm_pair_call;

/* Share t's columns (thread_share's split, which depends on N alone) and, when there are
 * fewer panels than threads, its part of each sign's rows. */
static void gemm_pair_share(void *ctx, int share, int thread) {
    const gemm_pair_call *c = ctx;
    int m0[2], m1[2], n0 = 0, n1 = 0;
    for (int s = 0; s < 2; s++) thread_share(&c->g[s], c->kr->nr, share, c->shares, &m0[s], &m1[s], &n0, &n1);
    gemm_pair_part(c->kr, c->theta, c->g, m0, m1, n0, n1, c->pt);
}

/* The pending update of theta's rows of share t (of c->shares), on its own: for a split
 * whose shares pack the same columns (each element must be updated once). */
static void update_share(void *ctx, int share, int thread) {
    const gemm_pair_call *c = ctx;
    const int N = c->g[0].N, K = c->g[0].K;
    const int n0 = (int)((long)N * share / c->shares), n1 = (int)((long)N * (share + 1) / c->shares);
    float z[256], u[256];
    for (size_t e = (size_t)n0 * K, end = (size_t)n1 * K; e < end;) {
        const size_t m = end - e < 256 ? end - e : 256;
        update_in_place(c->theta + e, m, c->pt->i0 + e, c->pt, z, u);
        e += m;
    }
}

void dz_gemm_linear_pair(float *const y[2], const float *const x[2], const int M[2], float *theta,
                         const float *const bias[2], int N, int K, const dz_gemm_perturb *pt) {
    gemm_args g[2];
    pair_args(g, y, x, M, theta, bias, N, K);
    if (pair_trivial(g)) return;
    const gemm_kernel *kr = &gemm_kernels[dz_isa_active()];
    const int threads = dz_parallel_threads();
    if (threads <= 1) {
        const int m0[2] = {0, 0}, m1[2] = {g[0].M, g[1].M};
        return gemm_pair_part(kr, theta, g, m0, m1, 0, N, pt);
    }
    gemm_pair_call call = {kr, theta, g, pt, threads};
    const int panels = (N + kr->nr - 1) / kr->nr;
    int n_split = threads < panels ? threads : panels; /* thread_share's split of N */
    while (threads % n_split) n_split--;
    dz_gemm_perturb plain = *pt;
    if (pt->upd && n_split < threads) { /* shares would pack the same columns */
        dz_parallel_for(threads, update_share, &call);
        plain.upd = NULL, call.pt = &plain;
    }
    dz_parallel_for(threads, gemm_pair_share, (void *)&call);
}

const char *dz_gemm_describe(void) {
    static char line[224];
    const gemm_kernel *kr = &gemm_kernels[dz_isa_active()];
    const dz_gemm_blocking bl = gemm_blocking_of(kr);
    snprintf(line, sizeof line,
             "distzo %s micro-kernel, blocks mc %d kc %d nc %d (L2 %ld KiB): one FMA chain per output in k order "
             "(fixed order, same bits on every ISA)",
             kr->name, bl.mc, bl.kc, bl.nc, dz_gemm_blocking_l2() >> 10);
    return line;
}
