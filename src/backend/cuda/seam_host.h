/* The CUDA seam's host implementation, private to seam_host*.c (the table: cuda_seam.h).
 *
 * Memory: device and pinned buffers are host allocations in a table, so every device
 * pointer can be checked against its buffer; new device memory holds 0xFF bytes (NaN as
 * floats), as uninitialized device memory holds garbage.
 *
 * Streams: each keeps a queue of the work enqueued on it, executed lazily: a stream runs
 * its queue at its synchronize, at an event synchronize (up to the event), at a device
 * synchronize, or when a stream that waits on one of its events runs past the wait. So
 * host code that reads a download before the synchronize reads the poison the download
 * left there, and an upload's source changed before the synchronize is caught when the
 * copy runs (its checksum changed).
 *
 * Ordering: vector clocks. Each stream s has a clock C_s (one counter per stream); an
 * operation on s ticks C_s[s] and takes a copy; an event takes its stream's clock when
 * recorded and a wait merges it in; a synchronize merges the stream's clock into the
 * host's, which every later operation merges first. Operation X happens before Y iff
 * X.clock[X.stream] <= Y.clock[X.stream]. An operation whose accessed ranges overlap an
 * earlier one's that does not happen before it, one of the two writing, is a race: the
 * call fails with DZ_CUDA_ERR_HAZARD (whatever order the lazy execution would pick). */
#ifndef DZ_BACKEND_CUDA_SEAM_HOST_H
#define DZ_BACKEND_CUDA_SEAM_HOST_H

#include <stdint.h>

#include "backend/cuda/cuda_seam.h"

#define HS_STREAMS 16 /* stream 0 is the handle NULL */
#define HS_EVENTS 64
#define HS_RANGES 4

typedef struct hs_range {
    uintptr_t lo, hi; /* [lo, hi) */
    int write;
} hs_range;

typedef enum hs_kind { HS_COPY, HS_GEMM, HS_ZO, HS_FW, HS_ATTN, HS_WAIT, HS_GATHER } hs_kind;

typedef struct hs_gemm {
    dz_gemm_op ta, tb;
    int m, n, k, lda, ldb, ldc;
    float alpha, beta;
    const void *A, *B;
    void *C;
    dz_cuda_dtype at, bt, ct;
} hs_gemm;

typedef struct hs_copy {
    void *dst;
    const void *src;
    size_t n;
    int host_src;     /* H2D: the source's checksum is compared when the copy runs */
    uint64_t src_sum;
} hs_copy;

typedef struct hs_op {
    hs_kind kind;
    int stream;
    uint32_t clock[HS_STREAMS];
    hs_range r[HS_RANGES];
    int nr;
    union {
        hs_copy copy;
        hs_gemm gemm;
        dz_zo_span zo;
        dz_fw_launch fw;
        dz_attn_launch attn;
        struct {
            int stream;
            uint64_t pos; /* run that stream's operations below this absolute index */
        } wait;
        struct {
            struct hs_member *member; /* this device's member of the group (seam_host_nccl.c) */
            uint64_t seq;             /* the member's collective number */
            const void *send;
            void *recv;
            size_t count;
        } gather;
    } u;
} hs_op;

typedef struct hs_stream {
    int live;
    hs_op *ops;
    size_t n, cap, done; /* ops[0 .. done) have run */
    uint64_t base;       /* absolute index of ops[0] (earlier ones are retired) */
    uint32_t clock[HS_STREAMS];
} hs_stream;

typedef struct hs_event {
    int live, recorded, stream;
    uint64_t pos;
    uint32_t clock[HS_STREAMS];
} hs_event;

typedef struct hs_alloc {
    char *p;
    size_t n;
    int pinned;
    int registered; /* host_register: pinned memory the caller owns (never freed here) */
} hs_alloc;

typedef struct hs_state {
    hs_alloc *allocs;
    size_t n_allocs, cap_allocs;
    hs_stream streams[HS_STREAMS];
    hs_event events[HS_EVENTS];
    uint32_t host_clock[HS_STREAMS];
    int hazards;
    size_t copied[3]; /* bytes of copies enqueued, by dz_cuda_copy */
    char err[512];
} hs_state;

static inline hs_state *hs_of(dz_cuda_seam *s) { return (hs_state *)s->impl; }

/* seam_host.c: errors and memory */
int hs_fail(hs_state *h, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* DZ_CUDA_OK when [p, p + bytes) lies in one buffer of the table (device: not pinned). */
int hs_check_device(hs_state *h, const void *p, size_t bytes, const char *what);
int hs_check_host(hs_state *h, const void *p, size_t bytes, const char *what);
int hs_is_device(hs_state *h, const void *p);
uint64_t hs_checksum(const void *p, size_t n);

/* seam_host_streams.c: queues, clocks, execution */
int hs_stream_index(hs_state *h, dz_cuda_stream st, int *index);
/* Checks op (ranges filled in) against every earlier unordered operation and enqueues it. */
int hs_enqueue(hs_state *h, int stream, hs_op *op);
int hs_run_all(hs_state *h);
/* Runs what happens before the last operation of stream and touches its range `range`. */
int hs_settle(hs_state *h, int stream, int range);
/* Runs stream s's operations below absolute index pos (another device's, for a collective). */
int hs_run_stream(hs_state *h, int s, uint64_t pos);
void hs_stream_api(dz_cuda_seam *s);

/* seam_host_ops.c: copies, GEMM, ZO spans */
int hs_execute(hs_state *h, const hs_op *op);
void hs_ops_api(dz_cuda_seam *s);

/* seam_host_forward.c: the forward's kernels (backend/forward_element.h) */
void hs_forward_api(dz_cuda_seam *s);

/* seam_host_attention.c: the attention kernel's launch, and its run (which checks the
 * sequences' rows and key slots, read from device memory, before it writes anything) */
int hs_attention_run(hs_state *h, const dz_attn_launch *L);
void hs_attention_api(dz_cuda_seam *s);

/* seam_host_nccl.c: communicators and the all-gather across host seams */
int hs_gather_run(hs_state *h, const hs_op *op);
void hs_nccl_api(dz_cuda_seam *s);

#endif
