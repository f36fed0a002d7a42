/* Overlapped transfers, an optional extension of a device backend (be->streams; NULL on
 * every backend but the CUDA instance, whose weights then move through upload and download,
 * in order with the ops). ZO2's streaming under a device memory cap uses it to upload the
 * next block, compute this one and write the last one back at once (pipeline/device_stream.c).
 *
 * Three lanes run side by side: COMPUTE (every op of the table, in call order), UPLOAD
 * (host to device) and WRITEBACK (device to host). Nothing orders work of two lanes but
 * marks: mark(m, lane) stands for the lane's work issued so far, and wait(lane, m) makes
 * the lane's later work start after it (a mark never set is no wait: CUDA's events). The
 * host may change an upload's source, or read a download's destination, only after drain
 * or a settle of a mark set after it. */
#ifndef DZ_BACKEND_STREAM_OPS_H
#define DZ_BACKEND_STREAM_OPS_H

#include <stddef.h>

typedef struct dz_backend dz_backend;

typedef enum dz_lane { DZ_LANE_COMPUTE, DZ_LANE_UPLOAD, DZ_LANE_WRITEBACK, DZ_LANES } dz_lane;

enum { DZ_STREAM_MARKS = 8 }; /* marks 0 .. DZ_STREAM_MARKS-1 */

typedef struct dz_stream_ops {
    /* Pins n bytes of host memory (page-locked: cudaHostRegister), so copies from and to it
     * run asynchronously at full speed: 0, or non-zero where it cannot (the copies still
     * work, unpinned). unpin before the memory is freed. */
    int (*pin)(const dz_backend *be, void *p, size_t n);
    void (*unpin)(const dz_backend *be, void *p);
    /* n bytes from host src into the buffer dst on UPLOAD; from the buffer src into host
     * dst on WRITEBACK. Both return at once. */
    void (*upload_async)(const dz_backend *be, void *dst, const void *src, size_t n);
    void (*download_async)(const dz_backend *be, void *dst, const void *src, size_t n);
    void (*mark)(const dz_backend *be, int m, dz_lane lane);
    void (*wait)(const dz_backend *be, dz_lane lane, int m);
    /* The host waits for the work of every lane. */
    void (*drain)(const dz_backend *be);
    /* The host waits for mark m's work alone (a mark never set: no wait): cudaEventSynchronize.
     * After it the host may change that work's upload sources and read its downloads. */
    void (*settle)(const dz_backend *be, int m);
    /* DistZO2's sliced upload (optional: NULL where the backend has none; the CUDA
     * instance's). seam: the dz_cuda_seam the instance runs on, through which the node's
     * NCCL group is joined (src/parallel/gpu_group.c); set_node: this GPU is member `comm`
     * (a dz_cuda_comm), rank `rank` of the node's n GPUs; node_gpus: n (1 until set_node)
     * and *rank. upload_node: bytes [0, n) of host src, the same node-shared pinned memory
     * on every GPU of the node, into the buffer dst on each (it holds n rounded up to a
     * multiple of the GPUs): this GPU uploads its slice, bytes [r c, (r + 1) c) with
     * c = ceil(n / GPUs), on UPLOAD, and an all-gather on UPLOAD brings the others' slices,
     * so UPLOAD's later work and marks come after both. Every GPU of the node calls it for
     * the same blocks in the same order (a collective). */
    void *(*seam)(const dz_backend *be);
    void (*set_node)(const dz_backend *be, void *comm, int rank, int n);
    int (*node_gpus)(const dz_backend *be, int *rank);
    void (*upload_node)(const dz_backend *be, void *dst, const void *src, size_t n);
} dz_stream_ops;

#endif
