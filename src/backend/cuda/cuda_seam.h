/* The CUDA seam: every CUDA runtime and cuBLAS call the CUDA backend's host logic makes
 * (buffers, transfers, streams, events, GEMM, the ZO and forward kernels' launches) goes
 * through this table, so that the same host logic runs
 *  - on a GPU: dz_cuda_seam_runtime() (cuda_seam_runtime.cu; -DDZ_CUDA=ON builds), and
 *  - in the CPU suite: dz_cuda_seam_host_create() (seam_host.c), served from host memory
 *    with a reference GEMM; it executes each stream's work lazily, at the synchronize that
 *    makes it visible, and fails a call that reads or writes outside a buffer, passes a
 *    leading dimension cuBLAS rejects, or touches memory another stream writes (or reads)
 *    without an event ordering the two (docs/CUDA.md).
 *
 * Semantics are the CUDA runtime's and cuBLAS's: streams are non-blocking (no implicit
 * ordering with each other or the legacy default stream); the handle NULL is a stream of
 * its own; copies and GEMMs are asynchronous and ordered within their stream; the host may
 * reuse an upload's source and read a download's destination only after the stream's
 * synchronize or an event synchronize after it; GEMM is column-major with cuBLAS's
 * transposes and leading dimensions. Every call returns DZ_CUDA_OK or an error code, and
 * last_error() says what went wrong. */
#ifndef DZ_BACKEND_CUDA_CUDA_SEAM_H
#define DZ_BACKEND_CUDA_CUDA_SEAM_H

#include <stddef.h>

#include "backend/forward_element.h"
#include "backend/zo_element.h"
#include "backend/cuda/attention_element.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum dz_cuda_status {
    DZ_CUDA_OK = 0,
    DZ_CUDA_ERR_INVALID,  /* an argument cuBLAS or the runtime rejects (a leading dimension, a size) */
    DZ_CUDA_ERR_MEMORY,   /* out of memory, or not memory of this seam where it must be */
    DZ_CUDA_ERR_OVERRUN,  /* an access outside its buffer */
    DZ_CUDA_ERR_HAZARD,   /* unordered accesses of two streams, or host memory used too early */
    DZ_CUDA_ERR_RUNTIME,  /* anything else the CUDA runtime or cuBLAS reports */
    DZ_CUDA_ERR_NO_DEVICE /* no usable GPU */
} dz_cuda_status;

typedef void *dz_cuda_stream; /* cudaStream_t */
typedef void *dz_cuda_event;  /* cudaEvent_t */
typedef void *dz_cuda_comm;   /* ncclComm_t: this device's member of a group of devices */
typedef struct dz_cuda_comm_id {
    char bytes[128]; /* ncclUniqueId (NCCL_UNIQUE_ID_BYTES): made once, given to every member */
} dz_cuda_comm_id;

typedef enum dz_cuda_copy { DZ_COPY_H2D, DZ_COPY_D2H, DZ_COPY_D2D } dz_cuda_copy;
typedef enum dz_gemm_op { DZ_GEMM_N, DZ_GEMM_T } dz_gemm_op;                 /* CUBLAS_OP_N, CUBLAS_OP_T */
typedef enum dz_cuda_dtype { DZ_CUDA_R_32F, DZ_CUDA_R_16BF } dz_cuda_dtype; /* CUDA_R_32F, CUDA_R_16BF */
typedef enum dz_gemm_compute {
    DZ_GEMM_COMPUTE_32F,      /* CUBLAS_COMPUTE_32F: full fp32 */
    DZ_GEMM_COMPUTE_32F_TF32, /* CUBLAS_COMPUTE_32F_FAST_TF32: tensor cores, TF32 inputs */
    DZ_GEMM_COMPUTE_32F_BF16  /* CUBLAS_COMPUTE_32F_FAST_16BF */
} dz_gemm_compute;

typedef struct dz_cuda_seam dz_cuda_seam;
struct dz_cuda_seam {
    const char *name; /* "cuda" or "host" */
    int device;       /* the GPU this seam drives (the host seam: the device it plays) */
    void *impl;
    int (*device_count)(dz_cuda_seam *s, int *count);
    /* ---- memory: device buffers and pinned host buffers (cudaMalloc, cudaMallocHost) ---- */
    int (*dev_alloc)(dz_cuda_seam *s, void **p, size_t bytes);
    int (*dev_free)(dz_cuda_seam *s, void *p); /* waits for every stream first, as cudaFree does */
    int (*host_alloc)(dz_cuda_seam *s, void **p, size_t bytes);
    int (*host_free)(dz_cuda_seam *s, void *p);
    /* Pins bytes of host memory allocated elsewhere (cudaHostRegister, default flags): a node's
     * shared block (an MPI shared window) that every rank of the node uploads from; each
     * process registers its own mapping. host_unregister (cudaHostUnregister) before it is
     * freed. The host seam then checks copies from it against its bounds, as a pinned buffer. */
    int (*host_register)(dz_cuda_seam *s, void *p, size_t bytes);
    int (*host_unregister)(dz_cuda_seam *s, void *p);
    /* ---- work on a stream ---- */
    int (*memcpy_async)(dz_cuda_seam *s, void *dst, const void *src, size_t bytes, dz_cuda_copy kind,
                        dz_cuda_stream st);
    /* C = alpha op(A) op(B) + beta C, column-major (cublasSgemm; C is not read when beta == 0) */
    int (*sgemm)(dz_cuda_seam *s, dz_cuda_stream st, dz_gemm_op ta, dz_gemm_op tb, int m, int n, int k, float alpha,
                 const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc);
    /* the same with element types and a compute type (cublasGemmEx) */
    int (*gemm_ex)(dz_cuda_seam *s, dz_cuda_stream st, dz_gemm_op ta, dz_gemm_op tb, int m, int n, int k, float alpha,
                   const void *A, dz_cuda_dtype at, int lda, const void *B, dz_cuda_dtype bt, int ldb, float beta,
                   void *C, dz_cuda_dtype ct, int ldc, dz_gemm_compute compute);
    /* a ZO op over one span (backend/zo_element.h; the kernels of zo_kernels.cu) */
    int (*zo_span)(dz_cuda_seam *s, const dz_zo_span *span, dz_cuda_stream st);
    /* a forward op but GEMM and attention (backend/forward_element.h; forward_kernels.cu) */
    int (*fw_launch)(dz_cuda_seam *s, const dz_fw_launch *L, dz_cuda_stream st);
    /* flash-style causal attention (attention_element.h; the kernel of attention_kernel.cu) */
    int (*attention)(dz_cuda_seam *s, const dz_attn_launch *launch, dz_cuda_stream st);
    /* ---- streams and events (cudaStreamCreateWithFlags(NonBlocking), cudaEventCreateWithFlags(DisableTiming)) ---- */
    int (*stream_create)(dz_cuda_seam *s, dz_cuda_stream *st);
    int (*stream_destroy)(dz_cuda_seam *s, dz_cuda_stream st);
    int (*stream_synchronize)(dz_cuda_seam *s, dz_cuda_stream st);
    int (*event_create)(dz_cuda_seam *s, dz_cuda_event *ev);
    int (*event_destroy)(dz_cuda_seam *s, dz_cuda_event ev);
    int (*event_record)(dz_cuda_seam *s, dz_cuda_event ev, dz_cuda_stream st);
    int (*event_synchronize)(dz_cuda_seam *s, dz_cuda_event ev);
    int (*stream_wait_event)(dz_cuda_seam *s, dz_cuda_stream st, dz_cuda_event ev);
    int (*device_synchronize)(dz_cuda_seam *s);
    /* ---- collectives over a group of devices (NCCL; cuda_seam_nccl.cu, seam_host_nccl.c) ----
     * comm_init joins this device as `rank` of `nranks` (ncclCommInitRank; id from one
     * comm_unique_id of the group). A process driving several devices brackets its calls of
     * one collective (and the inits) with group_start/group_end (ncclGroupStart/End), or the
     * first waits forever for the others. all_gather (ncclAllGather, bytes): runs on st, reads
     * `count` bytes at send on this device, writes rank r's at recv + r * count on every
     * device; send may be recv + rank * count (in place). Like a copy, it is ordered with the
     * device's other streams by events only. */
    int (*comm_unique_id)(dz_cuda_seam *s, dz_cuda_comm_id *id);
    int (*comm_init)(dz_cuda_seam *s, dz_cuda_comm *comm, int nranks, int rank, const dz_cuda_comm_id *id);
    int (*comm_destroy)(dz_cuda_seam *s, dz_cuda_comm comm);
    int (*group_start)(dz_cuda_seam *s);
    int (*group_end)(dz_cuda_seam *s);
    int (*all_gather)(dz_cuda_seam *s, dz_cuda_comm comm, const void *send, void *recv, size_t count,
                      dz_cuda_stream st);
    const char *(*last_error)(dz_cuda_seam *s);
    void (*destroy)(dz_cuda_seam *s);
};

/* The host implementation (always built: library dz_cuda_host). NULL when out of memory.
 * Several in one process play the devices of a node (dz_cuda_seam_host_create_device: the
 * device number it reports), each with its own memory, streams and clocks; their
 * collectives meet in a group made by comm_unique_id. */
dz_cuda_seam *dz_cuda_seam_host_create(void);
dz_cuda_seam *dz_cuda_seam_host_create_device(int device);
/* Bytes of copies of one kind (H2D: host to this device, what its PCIe link carries)
 * enqueued on the host implementation so far. */
size_t dz_cuda_seam_host_copied(const dz_cuda_seam *s, dz_cuda_copy kind);
/* What the host implementation found: hazards reported so far (calls that failed with
 * DZ_CUDA_ERR_HAZARD), and whether host range [p, p + bytes) is the destination of a
 * download that no synchronize has completed yet (reading it now would read poison:
 * the host implementation fills such ranges with 0xFF bytes, NaN as floats, at the call). */
int dz_cuda_seam_host_hazards(const dz_cuda_seam *s);
int dz_cuda_seam_host_pending(const dz_cuda_seam *s, const void *p, size_t bytes);
/* A host-seam id's origin: the process that made it (getpid()) and its number among the ids
 * that process made (0, 1, ...); 0 when id is not a host-seam id. An id from another process
 * (a job's node rank 0, handed over MPI) joins a member whose collectives fail: the host seam
 * plays the devices of one process only. */
int dz_cuda_seam_host_comm_origin(const dz_cuda_comm_id *id, long *pid, unsigned long *number);
/* Across processes (a test under mpirun): all holds count x nranks bytes, this member's
 * count at rank x count and zeros elsewhere; on return every member's (0), in place. With
 * one set, a member joined through another process's id all-gathers through it (at the
 * call, in call order: seam_host_nccl.c) instead of failing. NULL: none. */
typedef int (*dz_cuda_host_exchange)(void *ctx, unsigned char *all, size_t count, int nranks, int rank);
void dz_cuda_seam_host_set_exchange(dz_cuda_host_exchange fn, void *ctx);
/* The rank and group size a host-seam communicator joined with. */
void dz_cuda_seam_host_comm_member(dz_cuda_comm comm, int *rank, int *nranks);
/* Whether [p, p + bytes) lies in one pinned range (host_alloc or host_register). */
int dz_cuda_seam_host_pinned(const dz_cuda_seam *s, const void *p, size_t bytes);

/* The CUDA runtime and cuBLAS on GPU `device` (only in -DDZ_CUDA=ON builds: dz_cuda).
 * NULL with *status set (DZ_CUDA_ERR_NO_DEVICE where there is no GPU, DZ_CUDA_ERR_INVALID where
 * there are GPUs but not this one) when it cannot start. */
dz_cuda_seam *dz_cuda_seam_runtime_create(int device, int *status);
/* GPUs the CUDA runtime shows this process (0 when none or the runtime fails), without
 * creating a context on any of them (cudaGetDeviceCount). -DDZ_CUDA=ON builds only. */
int dz_cuda_seam_runtime_devices(void);

#ifdef __cplusplus
}
#endif

#endif
