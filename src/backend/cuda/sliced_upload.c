/* DistZO2's sliced upload over the CUDA seam (sliced_upload.h). */
#include "backend/cuda/sliced_upload.h"

#include <string.h>

/* The first failure of a sequence of seam calls. */
#define SEAM_TRY(st, call)                    \
    do {                                      \
        if ((st) == DZ_CUDA_OK) (st) = (call); \
    } while (0)

static size_t slot_bytes(size_t block, int n) { return (block + (size_t)n - 1) / (size_t)n; }

size_t dz_sliced_slice(size_t block, int n, int rank, size_t *offset) {
    const size_t c = slot_bytes(block, n), lo = (size_t)rank * c < block ? (size_t)rank * c : block;
    const size_t hi = block - lo > c ? lo + c : block;
    *offset = lo;
    return hi - lo;
}

int dz_sliced_upload_init(dz_sliced_upload *u, dz_cuda_seam *s, dz_cuda_comm comm, int rank, int n, size_t block_cap,
                          int buffers) {
    memset(u, 0, sizeof *u); /* refused: nothing held, so a free does nothing (buffers past the arrays unread) */
    if (n < 1 || rank < 0 || rank >= n || buffers < 1 || buffers > DZ_SLICED_MAX_BUFFERS) return DZ_CUDA_ERR_INVALID;
    *u = (dz_sliced_upload){.seam = s, .comm = comm, .rank = rank, .n = n, .block_cap = block_cap,
                            .buffers = buffers};
    const size_t bytes = slot_bytes(block_cap, n) * (size_t)n;
    int st = DZ_CUDA_OK;
    for (int b = 0; b < buffers; b++) {
        SEAM_TRY(st, s->dev_alloc(s, &u->buf[b], bytes));
        SEAM_TRY(st, s->event_create(s, &u->gathered[b]));
        SEAM_TRY(st, s->event_create(s, &u->released[b]));
    }
    SEAM_TRY(st, s->event_create(s, &u->sliced));
    SEAM_TRY(st, s->stream_create(s, &u->upload));
    SEAM_TRY(st, s->stream_create(s, &u->gather));
    return st;
}

/* Makes the call whatever came before (a free releases everything), keeping the first failure. */
#define SEAM_ALWAYS(st, call)                  \
    do {                                       \
        const int st_call_ = (call);           \
        if ((st) == DZ_CUDA_OK) (st) = st_call_; \
    } while (0)

int dz_sliced_upload_free(dz_sliced_upload *u) {
    dz_cuda_seam *s = u->seam;
    if (!s) return DZ_CUDA_OK;
    int st = DZ_CUDA_OK;
    if (u->upload) SEAM_ALWAYS(st, s->stream_destroy(s, u->upload));
    if (u->gather) SEAM_ALWAYS(st, s->stream_destroy(s, u->gather));
    if (u->sliced) SEAM_ALWAYS(st, s->event_destroy(s, u->sliced));
    for (int b = 0; b < u->buffers; b++) {
        if (u->gathered[b]) SEAM_ALWAYS(st, s->event_destroy(s, u->gathered[b]));
        if (u->released[b]) SEAM_ALWAYS(st, s->event_destroy(s, u->released[b]));
        if (u->buf[b]) SEAM_ALWAYS(st, s->dev_free(s, u->buf[b]));
    }
    memset(u, 0, sizeof *u);
    return st;
}

/* Slot `rank` of the buffer of block k, after the compute of block k - buffers let go of it. */
int dz_sliced_upload_slice(dz_sliced_upload *u, uint64_t k, const void *host, size_t block) {
    dz_cuda_seam *s = u->seam;
    const int b = (int)(k % (uint64_t)u->buffers);
    if (block > u->block_cap) return DZ_CUDA_ERR_INVALID;
    size_t off = 0;
    const size_t len = dz_sliced_slice(block, u->n, u->rank, &off);
    int st = DZ_CUDA_OK;
    if (u->release_recorded[b] && !(u->omit & DZ_SLICED_OMIT_RELEASE_WAIT))
        SEAM_TRY(st, s->stream_wait_event(s, u->upload, u->released[b]));
    SEAM_TRY(st, s->memcpy_async(s, (char *)u->buf[b] + off, (const char *)host + off, len, DZ_COPY_H2D, u->upload));
    SEAM_TRY(st, s->event_record(s, u->sliced, u->upload));
    return st;
}

/* The whole block into every GPU's buffer, in place: this GPU sends its own slot. */
int dz_sliced_upload_gather(dz_sliced_upload *u, uint64_t k, size_t block) {
    dz_cuda_seam *s = u->seam;
    const int b = (int)(k % (uint64_t)u->buffers);
    const size_t c = slot_bytes(block, u->n);
    int st = DZ_CUDA_OK;
    if (!(u->omit & DZ_SLICED_OMIT_SLICE_WAIT)) SEAM_TRY(st, s->stream_wait_event(s, u->gather, u->sliced));
    SEAM_TRY(st, s->all_gather(s, u->comm, (char *)u->buf[b] + (size_t)u->rank * c, u->buf[b], c, u->gather));
    SEAM_TRY(st, s->event_record(s, u->gathered[b], u->gather));
    return st;
}

int dz_sliced_upload_block(dz_sliced_upload *u, uint64_t k, const void *host, size_t block) {
    int st = dz_sliced_upload_slice(u, k, host, block);
    SEAM_TRY(st, dz_sliced_upload_gather(u, k, block));
    return st;
}

int dz_sliced_upload_node(dz_sliced_upload *const *u, int n, uint64_t k, const void *host, size_t block) {
    int st = DZ_CUDA_OK;
    for (int r = 0; r < n; r++) SEAM_TRY(st, dz_sliced_upload_slice(u[r], k, host, block));
    if (st != DZ_CUDA_OK) return st;
    dz_cuda_seam *s0 = u[0]->seam;
    st = s0->group_start(s0);
    for (int r = 0; r < n; r++) SEAM_TRY(st, dz_sliced_upload_gather(u[r], k, block));
    const int end = s0->group_end(s0); /* closed whatever happened, or the next group nests in it */
    return st != DZ_CUDA_OK ? st : end;
}

int dz_sliced_upload_on(dz_cuda_seam *s, dz_cuda_comm comm, int rank, int n, void *dst, const void *host,
                        size_t block, dz_cuda_stream st) {
    if (n < 1 || rank < 0 || rank >= n) return DZ_CUDA_ERR_INVALID;
    size_t off = 0;
    const size_t len = dz_sliced_slice(block, n, rank, &off);
    int status = s->memcpy_async(s, (char *)dst + off, (const char *)host + off, len, DZ_COPY_H2D, st);
    const size_t c = slot_bytes(block, n);
    /* the collective is made whatever the upload did: a member that skips it leaves the node's others waiting */
    if (n > 1) SEAM_ALWAYS(status, s->all_gather(s, comm, (char *)dst + (size_t)rank * c, dst, c, st));
    return status;
}

int dz_sliced_acquire(dz_sliced_upload *u, uint64_t k, dz_cuda_stream compute, void **buf) {
    const int b = (int)(k % (uint64_t)u->buffers);
    *buf = u->buf[b];
    return u->seam->stream_wait_event(u->seam, compute, u->gathered[b]);
}

int dz_sliced_release(dz_sliced_upload *u, uint64_t k, dz_cuda_stream compute) {
    const int b = (int)(k % (uint64_t)u->buffers);
    u->release_recorded[b] = 1;
    return u->seam->event_record(u->seam, u->released[b], compute);
}
