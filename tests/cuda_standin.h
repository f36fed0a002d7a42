/* The CUDA backend as far as it exists, made able to run a whole forward for tests: its
 * instance over the host seam (src/backend/cuda/cuda_backend.c: device buffers, upload,
 * download, synchronize, the ZO ops and the forward's ops it has, each on the seam's
 * stream, with the seam's checks of overruns and of reads before a synchronize), with each
 * forward op it lacks yet (NULL there: attention) taken from the reference backend. The
 * host seam's device memory is host memory whose stream work runs lazily, at a
 * synchronize: so a borrowed op first synchronizes the stream (what was enqueued is then
 * in the buffers), then runs the reference's op on the buffers in place. Include once per
 * test program. */
#ifndef DZ_TESTS_CUDA_STANDIN_H
#define DZ_TESTS_CUDA_STANDIN_H

#include <stdlib.h>

#include "backend/backend.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_seam.h"

/* The CUDA instance with the borrowed ops (its ctx is shared). */
typedef struct cuda_standin {
    dz_backend be;      /* the instance to hand to a forward */
    dz_backend *cuda;   /* the CUDA backend's instance over the host seam */
    dz_backend_ops ops;
} cuda_standin;

#define STANDIN_FWD(name, params, args)                                                                               \
    static void standin_##name params {                                                                               \
        be->ops->synchronize(be);                                                                                     \
        dz_backend_ref()->ops->name args;                                                                             \
    }
STANDIN_FWD(matmul, (const dz_backend *be, float *y, const float *x, const float *w, const float *bias, int M, int N,
                     int K), (dz_backend_ref(), y, x, w, bias, M, N, K))
STANDIN_FWD(layernorm, (const dz_backend *be, float *y, const float *x, const float *w, const float *b, int rows,
                        int dim, float eps), (dz_backend_ref(), y, x, w, b, rows, dim, eps))
STANDIN_FWD(rmsnorm, (const dz_backend *be, float *y, const float *x, const float *w, int rows, int dim, float eps),
            (dz_backend_ref(), y, x, w, rows, dim, eps))
STANDIN_FWD(rope, (const dz_backend *be, float *x, int rows, const int *pos, int n_heads, int head_dim,
                   const float *cos_sin), (dz_backend_ref(), x, rows, pos, n_heads, head_dim, cos_sin))
STANDIN_FWD(attention, (const dz_backend *be, float *out, const float *q, const dz_attn_args *a),
            (dz_backend_ref(), out, q, a))
STANDIN_FWD(relu, (const dz_backend *be, float *x, size_t n), (dz_backend_ref(), x, n))
STANDIN_FWD(swiglu, (const dz_backend *be, float *gate, const float *up, size_t n), (dz_backend_ref(), gate, up, n))
STANDIN_FWD(add, (const dz_backend *be, float *y, const float *x, size_t n), (dz_backend_ref(), y, x, n))
STANDIN_FWD(fill, (const dz_backend *be, float *x, float v, size_t n), (dz_backend_ref(), x, v, n))
STANDIN_FWD(copy_rows, (const dz_backend *be, float *dst, const int *dst_rows, const float *src, const int *src_rows,
                        int nrows, int cols), (dz_backend_ref(), dst, dst_rows, src, src_rows, nrows, cols))
STANDIN_FWD(logsumexp_update, (const dz_backend *be, const float *logits, int rows, int n, float *m, float *s),
            (dz_backend_ref(), logits, rows, n, m, s))
STANDIN_FWD(pick_target, (const dz_backend *be, float *out, const float *logits, int rows, int n, const int *targets,
                          int v0), (dz_backend_ref(), out, logits, rows, n, targets, v0))
STANDIN_FWD(logprob_finish, (const dz_backend *be, float *out, const float *target, const float *m, const float *s,
                             int rows), (dz_backend_ref(), out, target, m, s, rows))
#undef STANDIN_FWD

/* NULL if the seam or the instance cannot be made. */
static cuda_standin *cuda_standin_create(void) {
    cuda_standin *c = calloc(1, sizeof *c);
    dz_cuda_seam *seam = dz_cuda_seam_host_create();
    dz_error err = {0};
    if (!c || !seam || dz_backend_cuda_create_on(seam, 1, &c->cuda, &err) != DZ_OK) {
        free(c);
        return NULL;
    }
    c->ops = *c->cuda->ops;
#define BORROW(name) c->ops.name = c->ops.name ? c->ops.name : standin_##name
    BORROW(matmul), BORROW(layernorm), BORROW(rmsnorm), BORROW(rope), BORROW(attention), BORROW(relu);
    BORROW(swiglu), BORROW(add), BORROW(fill), BORROW(copy_rows), BORROW(logsumexp_update), BORROW(pick_target);
    BORROW(logprob_finish);
#undef BORROW
    c->ops.destroy = NULL; /* cuda_standin_free frees it */
    c->be = *c->cuda;
    c->be.ops = &c->ops;
    return c;
}

/* DZ_CUDA_OK, or the first seam error any op met (an overrun, a hazard), its words in msg. */
static int cuda_standin_status(const cuda_standin *c, char *msg, size_t cap) {
    return dz_backend_cuda_status(c->cuda, msg, cap);
}

static void cuda_standin_free(cuda_standin *c) {
    if (!c) return;
    dz_backend_free(c->cuda);
    free(c);
}

#endif
