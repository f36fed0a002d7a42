/* DistZO2's sliced upload (docs/CUDA.md, "Several GPUs"): a block of B bytes in pinned host
 * memory reaches all N GPUs of a node with each GPU's PCIe link carrying ceil(B / N) bytes:
 * GPU r uploads slice r (bytes [r c, min(B, (r + 1) c)), c = ceil(B / N)) on its upload
 * stream into slot r of a device buffer of N c bytes, and an all-gather (NCCL, over NVLink)
 * on its gather stream fills the other slots, so every GPU holds the whole block in the
 * buffer's first B bytes.
 *
 * Blocks rotate through `buffers` device buffers (block k in buffer k mod buffers; 2: the
 * upload of block k + 1 overlaps the compute of block k). The ordering, all by events:
 *  - the gather waits for this GPU's slice upload (event `sliced`);
 *  - the compute reads block k only after its gather (dz_sliced_acquire: a wait on
 *    `gathered`);
 *  - the upload of block k does not overwrite the buffer while the compute of block
 *    k - buffers still reads it (dz_sliced_release records `released` after that compute;
 *    the upload waits for it; the gather, after the upload, is ordered behind it too).
 * The host block must stay unchanged until the slice's upload ran (an event synchronize of
 * `sliced`, or any later synchronize).
 *
 * One process per GPU (MPI ranks): each calls dz_sliced_upload_block on its own state. One
 * process driving the node's GPUs (the host seam's tests): dz_sliced_upload_node, which
 * brackets the devices' all-gathers with group_start/group_end as NCCL needs. */
#ifndef DZ_BACKEND_CUDA_SLICED_UPLOAD_H
#define DZ_BACKEND_CUDA_SLICED_UPLOAD_H

#include <stdint.h>

#include "backend/cuda/cuda_seam.h"

enum { DZ_SLICED_MAX_BUFFERS = 3 };

/* Tests only: a wait left out, to show the seam catches its absence. */
enum { DZ_SLICED_OMIT_SLICE_WAIT = 1, DZ_SLICED_OMIT_RELEASE_WAIT = 2 };

typedef struct dz_sliced_upload {
    dz_cuda_seam *seam;
    dz_cuda_comm comm;      /* this GPU's member of the node's group (the caller's) */
    int rank, n;            /* this GPU's rank in the group, GPUs in the group */
    size_t block_cap;       /* the largest block, bytes */
    int buffers;            /* 1..DZ_SLICED_MAX_BUFFERS */
    void *buf[DZ_SLICED_MAX_BUFFERS]; /* n x ceil(block_cap / n) bytes each */
    dz_cuda_stream upload, gather;
    dz_cuda_event sliced;
    dz_cuda_event gathered[DZ_SLICED_MAX_BUFFERS], released[DZ_SLICED_MAX_BUFFERS];
    int release_recorded[DZ_SLICED_MAX_BUFFERS];
    unsigned omit;          /* DZ_SLICED_OMIT_*: 0 outside tests */
} dz_sliced_upload;

/* Slice `rank` of a B-byte block over n GPUs: its length, at *offset (also its slot's place
 * in the device buffer). Lengths are ceil(B / n) but for the last slices (shorter, or 0). */
size_t dz_sliced_slice(size_t block, int n, int rank, size_t *offset);

/* Buffers, streams and events on seam s; comm is rank `rank` of an n-GPU group. The free
 * releases all of them, also after a call of it failed (the first failure is returned),
 * and nothing after an init refused for its arguments. */
int dz_sliced_upload_init(dz_sliced_upload *u, dz_cuda_seam *s, dz_cuda_comm comm, int rank, int n, size_t block_cap,
                          int buffers);
int dz_sliced_upload_free(dz_sliced_upload *u);

/* Block k (B <= block_cap bytes at host, pinned): this GPU's slice upload, then its part of
 * the all-gather. */
int dz_sliced_upload_slice(dz_sliced_upload *u, uint64_t k, const void *host, size_t block);
int dz_sliced_upload_gather(dz_sliced_upload *u, uint64_t k, size_t block);
int dz_sliced_upload_block(dz_sliced_upload *u, uint64_t k, const void *host, size_t block);
/* The same for all n GPUs of the node driven by this process (u[r]: rank r's state). */
int dz_sliced_upload_node(dz_sliced_upload *const *u, int n, uint64_t k, const void *host, size_t block);

/* The same on one stream, into the caller's buffer dst (n x ceil(block / n) bytes): this
 * GPU's slice of host uploaded into slot `rank` of dst, then the in-place all-gather, both on
 * stream st (the CUDA instance's upload lane: ZO2's streaming, pipeline/device_stream.c), so
 * later work on st and events recorded there follow both. n = 1: the whole block, no
 * collective. */
int dz_sliced_upload_on(dz_cuda_seam *s, dz_cuda_comm comm, int rank, int n, void *dst, const void *host,
                        size_t block, dz_cuda_stream st);

/* Before the compute of block k on stream `compute`: the buffer holding it (*buf), with the
 * compute ordered after its gather. After that compute: the buffer may be reused. */
int dz_sliced_acquire(dz_sliced_upload *u, uint64_t k, dz_cuda_stream compute, void **buf);
int dz_sliced_release(dz_sliced_upload *u, uint64_t k, dz_cuda_stream compute);

#endif
