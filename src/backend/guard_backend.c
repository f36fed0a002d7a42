/* A device stand-in: an inner backend's ops (the reference's, for --backend ref) on buffers
 * that host code cannot touch. Every buffer lives in one arena of address space that is
 * mapped without access (PROT_NONE) except while one of this instance's ops runs, so host
 * code that reads or writes a buffer outside upload, download and the ops (what a GPU's
 * memory would not allow) dies with SIGSEGV at that very line, instead of working by luck
 * as it does on memory that happens to be the host's. The ops themselves are the inner
 * backend's, so the bits are too.
 *
 * Why guard pages rather than canaries: a canary finds a stray write only when it is
 * checked, and never a stray read; a read of a weight straight from host memory is the
 * mistake a device backend must rule out. Why one arena: one mprotect covers every buffer,
 * so an op costs two system calls. Ops may run on several threads at once: the arena opens
 * when the first op enters and closes when the last one leaves (a count under a lock). */
#include <pthread.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "backend/backend.h"

/* Address space reserved per instance (no memory until touched); past it alloc fails. */
#define GUARD_ARENA_BYTES ((size_t)8 << 30)

typedef struct guard_ctx {
    const dz_backend *inner;
    char *arena;
    size_t used;      /* bump allocation: nothing is reused before destroy */
    pthread_mutex_t lock;
    int open;         /* ops running */
} guard_ctx;

static guard_ctx *ctx_of(const dz_backend *be) { return be->ctx; }

static size_t page_round(size_t n) {
    const size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    return (n + pg - 1) / pg * pg;
}

static void enter(const dz_backend *be) {
    guard_ctx *g = ctx_of(be);
    pthread_mutex_lock(&g->lock);
    if (g->open++ == 0 && g->used) mprotect(g->arena, g->used, PROT_READ | PROT_WRITE);
    pthread_mutex_unlock(&g->lock);
}

static void leave(const dz_backend *be) {
    guard_ctx *g = ctx_of(be);
    pthread_mutex_lock(&g->lock);
    if (--g->open == 0 && g->used) mprotect(g->arena, g->used, PROT_NONE);
    pthread_mutex_unlock(&g->lock);
}

/* Each buffer starts on its own page, with a guard page after it, so an overrun by host
 * code past the last buffer faults too. Zero-filled: fresh anonymous pages. */
static void *guard_alloc(const dz_backend *be, size_t bytes) {
    guard_ctx *g = ctx_of(be);
    const size_t span = page_round(bytes ? bytes : 1) + page_round(1);
    pthread_mutex_lock(&g->lock);
    void *p = NULL;
    if (span <= GUARD_ARENA_BYTES - g->used) {
        p = g->arena + g->used;
        g->used += span;
        if (g->open) mprotect(p, span, PROT_READ | PROT_WRITE);
    }
    pthread_mutex_unlock(&g->lock);
    return p;
}

/* Nothing until destroy unmaps the arena whole: a run allocates its buffers once, and a
 * freed buffer that is never reused cannot hide a use after free. */
static void guard_free(const dz_backend *be, void *buf) { (void)be, (void)buf; }

static void guard_destroy(dz_backend *be) {
    guard_ctx *g = ctx_of(be);
    munmap(g->arena, GUARD_ARENA_BYTES);
    pthread_mutex_destroy(&g->lock);
    free(g);
    free(be);
}

/* ---- Every op: the inner backend's, with the arena open ---------------------------- */

#define IN(be) ctx_of(be)->inner
#define WRAP(name, params, args)                                                                                      \
    static void guard_##name params {                                                                                 \
        enter(be);                                                                                                    \
        IN(be)->ops->name args;                                                                                       \
        leave(be);                                                                                                    \
    }

WRAP(upload, (const dz_backend *be, void *dst, const void *src, size_t n), (IN(be), dst, src, n))
WRAP(download, (const dz_backend *be, void *dst, const void *src, size_t n), (IN(be), dst, src, n))
WRAP(synchronize, (const dz_backend *be), (IN(be)))
WRAP(matmul, (const dz_backend *be, float *y, const float *x, const float *w, const float *bias, int M, int N, int K),
     (IN(be), y, x, w, bias, M, N, K))
WRAP(layernorm,
     (const dz_backend *be, float *y, const float *x, const float *w, const float *b, int rows, int dim, float eps),
     (IN(be), y, x, w, b, rows, dim, eps))
WRAP(rmsnorm, (const dz_backend *be, float *y, const float *x, const float *w, int rows, int dim, float eps),
     (IN(be), y, x, w, rows, dim, eps))
WRAP(rope,
     (const dz_backend *be, float *x, int rows, const int *pos, int n_heads, int head_dim, const float *cos_sin),
     (IN(be), x, rows, pos, n_heads, head_dim, cos_sin))
WRAP(attention, (const dz_backend *be, float *out, const float *q, const dz_attn_args *a), (IN(be), out, q, a))
WRAP(relu, (const dz_backend *be, float *x, size_t n), (IN(be), x, n))
WRAP(swiglu, (const dz_backend *be, float *gate, const float *up, size_t n), (IN(be), gate, up, n))
WRAP(add, (const dz_backend *be, float *y, const float *x, size_t n), (IN(be), y, x, n))
WRAP(fill, (const dz_backend *be, float *x, float v, size_t n), (IN(be), x, v, n))
WRAP(copy_rows,
     (const dz_backend *be, float *dst, const int *dst_rows, const float *src, const int *src_rows, int nrows,
      int cols),
     (IN(be), dst, dst_rows, src, src_rows, nrows, cols))
WRAP(logsumexp_update, (const dz_backend *be, const float *logits, int rows, int n, float *m, float *s),
     (IN(be), logits, rows, n, m, s))
WRAP(pick_target,
     (const dz_backend *be, float *out, const float *logits, int rows, int n, const int *targets, int v0),
     (IN(be), out, logits, rows, n, targets, v0))
WRAP(logprob_finish,
     (const dz_backend *be, float *out, const float *target, const float *m, const float *s, int rows),
     (IN(be), out, target, m, s, rows))
WRAP(z_fill,
     (const dz_backend *be, float *z, uint64_t seed, uint32_t tensor, uint32_t draw, uint64_t i0, size_t n,
      dz_zdist dist),
     (IN(be), z, seed, tensor, draw, i0, n, dist))
WRAP(philox_fill,
     (const dz_backend *be, uint32_t *x, uint64_t seed, uint32_t purpose, uint32_t tensor, uint32_t draw, uint64_t i0,
      size_t n),
     (IN(be), x, seed, purpose, tensor, draw, i0, n))
WRAP(perturb_pair,
     (const dz_backend *be, const float *theta, float *w_plus, float *w_minus, size_t n, float eps, uint64_t seed,
      uint32_t tensor, uint32_t draw, uint64_t i0, dz_zdist dist),
     (IN(be), theta, w_plus, w_minus, n, eps, seed, tensor, draw, i0, dist))
WRAP(perturb_pair_bf16,
     (const dz_backend *be, const uint16_t *theta, float *w_plus, float *w_minus, size_t n, float eps, uint64_t seed,
      uint32_t tensor, uint32_t draw, uint64_t i0, dz_zdist dist),
     (IN(be), theta, w_plus, w_minus, n, eps, seed, tensor, draw, i0, dist))
WRAP(update_f32,
     (const dz_backend *be, float *theta, size_t n, const float *g, int q, float lr, float wd, uint64_t seed,
      uint32_t tensor, uint32_t step, uint64_t i0, dz_zdist dist),
     (IN(be), theta, n, g, q, lr, wd, seed, tensor, step, i0, dist))
WRAP(update_bf16,
     (const dz_backend *be, uint16_t *theta, size_t n, const float *g, int q, float lr, float wd, uint64_t seed,
      uint32_t tensor, uint32_t step, uint64_t i0, dz_zdist dist),
     (IN(be), theta, n, g, q, lr, wd, seed, tensor, step, i0, dist))
WRAP(update_then_perturb_f32,
     (const dz_backend *be, float *theta, float *w_plus, float *w_minus, size_t n, const dz_zo_update *upd, float eps,
      uint64_t seed, uint32_t tensor, uint32_t next_draw, uint64_t i0, dz_zdist dist),
     (IN(be), theta, w_plus, w_minus, n, upd, eps, seed, tensor, next_draw, i0, dist))
WRAP(update_then_perturb_bf16,
     (const dz_backend *be, uint16_t *theta, float *w_plus, float *w_minus, size_t n, const dz_zo_update *upd,
      float eps, uint64_t seed, uint32_t tensor, uint32_t next_draw, uint64_t i0, dz_zdist dist),
     (IN(be), theta, w_plus, w_minus, n, upd, eps, seed, tensor, next_draw, i0, dist))

static const void *guard_upload_view(const dz_backend *be, void *dst, const void *src, size_t n) {
    guard_upload(be, dst, src, n); /* never zero-copy: its buffers are not host memory */
    return dst;
}

#define OP(name) .name = guard_##name
static const dz_backend_ops guard_ops = {
    .alloc = guard_alloc, .free = guard_free, OP(upload), OP(upload_view), OP(download), OP(synchronize),
    OP(matmul), OP(layernorm), OP(rmsnorm), OP(rope), OP(attention), OP(relu), OP(swiglu), OP(add), OP(fill),
    OP(copy_rows), OP(logsumexp_update), OP(pick_target), OP(logprob_finish), OP(z_fill), OP(philox_fill),
    OP(perturb_pair), OP(perturb_pair_bf16), OP(update_f32), OP(update_bf16), OP(update_then_perturb_f32),
    OP(update_then_perturb_bf16), .destroy = guard_destroy,
};

dz_status dz_backend_guarded_create(const dz_backend *inner, dz_backend **out, dz_error *err) {
    *out = NULL;
    dz_backend *be = calloc(1, sizeof *be);
    guard_ctx *g = calloc(1, sizeof *g);
    void *arena = mmap(NULL, GUARD_ARENA_BYTES, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (!be || !g || arena == MAP_FAILED) {
        if (arena != MAP_FAILED) munmap(arena, GUARD_ARENA_BYTES);
        free(be);
        free(g);
        return dz_fail(err, DZ_ERR_NOMEM, "backend %s: cannot reserve its guarded buffer arena", inner->name);
    }
    g->inner = inner;
    g->arena = arena;
    pthread_mutex_init(&g->lock, NULL);
    *be = (dz_backend){.name = inner->name, .host_buffers = 0, .ops = &guard_ops, .ctx = g};
    *out = be;
    return DZ_OK;
}
