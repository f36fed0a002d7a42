/* The CUDA seam over the CUDA runtime and cuBLAS (cuda_seam.h), for -DDZ_CUDA=ON builds:
 * each entry is the one runtime or cuBLAS call it names, its error turned into a
 * dz_cuda_status with the runtime's words kept in last_error(). Streams are created
 * non-blocking and events without timing, as the host implementation assumes. */
#include "backend/cuda/cuda_seam.h"

#include <stdio.h>
#include <stdlib.h>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "backend/cuda/attention_kernel.h"
#include "backend/cuda/cuda_seam_nccl.h"
#include "backend/cuda/forward_kernels.h"
#include "backend/cuda/zo_kernels.h"

namespace {

struct rt_state {
    int device;
    cublasHandle_t blas;
    char err[512];
};

rt_state *rt(dz_cuda_seam *s) { return static_cast<rt_state *>(s->impl); }

int status_of(cudaError_t e) {
    switch (e) {
    case cudaSuccess: return DZ_CUDA_OK;
    case cudaErrorMemoryAllocation: return DZ_CUDA_ERR_MEMORY;
    case cudaErrorInvalidValue: return DZ_CUDA_ERR_INVALID;
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver: return DZ_CUDA_ERR_NO_DEVICE;
    default: return DZ_CUDA_ERR_RUNTIME;
    }
}

int check(dz_cuda_seam *s, cudaError_t e, const char *what) {
    if (e != cudaSuccess)
        snprintf(rt(s)->err, sizeof rt(s)->err, "%s: %s (%s)", what, cudaGetErrorName(e), cudaGetErrorString(e));
    return status_of(e);
}

int check_blas(dz_cuda_seam *s, cublasStatus_t e, const char *what) {
    if (e == CUBLAS_STATUS_SUCCESS) return DZ_CUDA_OK;
    snprintf(rt(s)->err, sizeof rt(s)->err, "%s: %s (%s)", what, cublasGetStatusName(e), cublasGetStatusString(e));
    return e == CUBLAS_STATUS_INVALID_VALUE ? DZ_CUDA_ERR_INVALID
           : e == CUBLAS_STATUS_ALLOC_FAILED ? DZ_CUDA_ERR_MEMORY
                                              : DZ_CUDA_ERR_RUNTIME;
}

cudaStream_t stream_of(dz_cuda_stream st) { return static_cast<cudaStream_t>(st); }
cudaEvent_t event_of(dz_cuda_event ev) { return static_cast<cudaEvent_t>(ev); }
cublasOperation_t op_of(dz_gemm_op op) { return op == DZ_GEMM_T ? CUBLAS_OP_T : CUBLAS_OP_N; }
cudaDataType_t type_of(dz_cuda_dtype t) { return t == DZ_CUDA_R_16BF ? CUDA_R_16BF : CUDA_R_32F; }

cublasComputeType_t compute_of(dz_gemm_compute c) {
    return c == DZ_GEMM_COMPUTE_32F_TF32   ? CUBLAS_COMPUTE_32F_FAST_TF32
           : c == DZ_GEMM_COMPUTE_32F_BF16 ? CUBLAS_COMPUTE_32F_FAST_16BF
                                           : CUBLAS_COMPUTE_32F;
}

cudaMemcpyKind kind_of(dz_cuda_copy k) {
    return k == DZ_COPY_H2D   ? cudaMemcpyHostToDevice
           : k == DZ_COPY_D2H ? cudaMemcpyDeviceToHost
                              : cudaMemcpyDeviceToDevice;
}

int device_count(dz_cuda_seam *s, int *count) { return check(s, cudaGetDeviceCount(count), "cudaGetDeviceCount"); }
int dev_alloc(dz_cuda_seam *s, void **p, size_t bytes) { return check(s, cudaMalloc(p, bytes), "cudaMalloc"); }
int dev_free(dz_cuda_seam *s, void *p) { return check(s, cudaFree(p), "cudaFree"); }
int host_alloc(dz_cuda_seam *s, void **p, size_t bytes) { return check(s, cudaMallocHost(p, bytes), "cudaMallocHost"); }
int host_free(dz_cuda_seam *s, void *p) { return check(s, cudaFreeHost(p), "cudaFreeHost"); }
int host_register(dz_cuda_seam *s, void *p, size_t bytes) {
    const cudaError_t e = cudaHostRegister(p, bytes, cudaHostRegisterDefault);
    if (e != cudaSuccess) (void)cudaGetLastError(); /* a caller may go on unpinned: the next launch's check must
                                                     * not find this error */
    return check(s, e, "cudaHostRegister");
}
int host_unregister(dz_cuda_seam *s, void *p) { return check(s, cudaHostUnregister(p), "cudaHostUnregister"); }

int memcpy_async(dz_cuda_seam *s, void *dst, const void *src, size_t n, dz_cuda_copy kind, dz_cuda_stream st) {
    return check(s, cudaMemcpyAsync(dst, src, n, kind_of(kind), stream_of(st)), "cudaMemcpyAsync");
}

int gemm_ex(dz_cuda_seam *s, dz_cuda_stream st, dz_gemm_op ta, dz_gemm_op tb, int m, int n, int k, float alpha,
            const void *A, dz_cuda_dtype at, int lda, const void *B, dz_cuda_dtype bt, int ldb, float beta, void *C,
            dz_cuda_dtype ct, int ldc, dz_gemm_compute compute) {
    const int status = check_blas(s, cublasSetStream(rt(s)->blas, stream_of(st)), "cublasSetStream");
    if (status != DZ_CUDA_OK) return status;
    const cublasStatus_t e = cublasGemmEx(rt(s)->blas, op_of(ta), op_of(tb), m, n, k, &alpha, A, type_of(at), lda, B,
                                          type_of(bt), ldb, &beta, C, type_of(ct), ldc, compute_of(compute),
                                          CUBLAS_GEMM_DEFAULT);
    return check_blas(s, e, "cublasGemmEx");
}

int sgemm(dz_cuda_seam *s, dz_cuda_stream st, dz_gemm_op ta, dz_gemm_op tb, int m, int n, int k, float alpha,
          const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc) {
    const int status = check_blas(s, cublasSetStream(rt(s)->blas, stream_of(st)), "cublasSetStream");
    if (status != DZ_CUDA_OK) return status;
    return check_blas(s, cublasSgemm(rt(s)->blas, op_of(ta), op_of(tb), m, n, k, &alpha, A, lda, B, ldb, &beta, C, ldc),
                      "cublasSgemm");
}

int zo_span(dz_cuda_seam *s, const dz_zo_span *span, dz_cuda_stream st) {
    if (span->has_update && (span->q < 1 || span->q > DZ_ZO_SPAN_MAX_Q)) {
        snprintf(rt(s)->err, sizeof rt(s)->err, "zo_span: q = %d outside 1..%d", span->q, DZ_ZO_SPAN_MAX_Q);
        return DZ_CUDA_ERR_INVALID;
    }
    return check(s, static_cast<cudaError_t>(dz_cuda_zo_launch(span, stream_of(st))), "the ZO kernel's launch");
}

int fw_launch(dz_cuda_seam *s, const dz_fw_launch *L, dz_cuda_stream st) {
    return check(s, static_cast<cudaError_t>(dz_cuda_fw_launch(L, stream_of(st))), "a forward kernel's launch");
}

int attention(dz_cuda_seam *s, const dz_attn_launch *launch, dz_cuda_stream st) {
    const char *bad = dz_attn_launch_invalid(launch);
    if (bad) {
        snprintf(rt(s)->err, sizeof rt(s)->err, "attention: %s", bad);
        return DZ_CUDA_ERR_INVALID;
    }
    return check(s, static_cast<cudaError_t>(dz_cuda_attention_launch(launch, stream_of(st))),
                 "the attention kernel's launch");
}

/* A stream or an event: make the handle with its flags, hand it out even when the call
 * failed (as nullptr), and say which CUDA call it was. */
template <typename Handle, typename Out>
static int create(dz_cuda_seam *s, cudaError_t (*make)(Handle *, unsigned int), unsigned int flags, const char *call,
                  Out *out) {
    Handle h = nullptr;
    const int status = check(s, make(&h, flags), call);
    *out = h;
    return status;
}

int stream_create(dz_cuda_seam *s, dz_cuda_stream *st) {
    return create(s, cudaStreamCreateWithFlags, cudaStreamNonBlocking, "cudaStreamCreateWithFlags", st);
}
int stream_destroy(dz_cuda_seam *s, dz_cuda_stream st) {
    return check(s, cudaStreamDestroy(stream_of(st)), "cudaStreamDestroy");
}
int stream_synchronize(dz_cuda_seam *s, dz_cuda_stream st) {
    return check(s, cudaStreamSynchronize(stream_of(st)), "cudaStreamSynchronize");
}
int event_create(dz_cuda_seam *s, dz_cuda_event *ev) {
    return create(s, cudaEventCreateWithFlags, cudaEventDisableTiming, "cudaEventCreateWithFlags", ev);
}
int event_destroy(dz_cuda_seam *s, dz_cuda_event ev) {
    return check(s, cudaEventDestroy(event_of(ev)), "cudaEventDestroy");
}
int event_record(dz_cuda_seam *s, dz_cuda_event ev, dz_cuda_stream st) {
    return check(s, cudaEventRecord(event_of(ev), stream_of(st)), "cudaEventRecord");
}
int event_synchronize(dz_cuda_seam *s, dz_cuda_event ev) {
    return check(s, cudaEventSynchronize(event_of(ev)), "cudaEventSynchronize");
}
int stream_wait_event(dz_cuda_seam *s, dz_cuda_stream st, dz_cuda_event ev) {
    return check(s, cudaStreamWaitEvent(stream_of(st), event_of(ev), 0), "cudaStreamWaitEvent");
}
int device_synchronize(dz_cuda_seam *s) { return check(s, cudaDeviceSynchronize(), "cudaDeviceSynchronize"); }
const char *last_error(dz_cuda_seam *s) { return rt(s)->err; }

void destroy(dz_cuda_seam *s) {
    if (!s) return;
    cublasDestroy(rt(s)->blas);
    free(s->impl);
    free(s);
}

void fill_table(dz_cuda_seam *s) {
    s->name = "cuda";
    s->device_count = device_count, s->dev_alloc = dev_alloc, s->dev_free = dev_free;
    s->host_alloc = host_alloc, s->host_free = host_free, s->memcpy_async = memcpy_async;
    s->host_register = host_register, s->host_unregister = host_unregister;
    s->sgemm = sgemm, s->gemm_ex = gemm_ex, s->zo_span = zo_span, s->fw_launch = fw_launch;
    s->attention = attention;
    s->stream_create = stream_create, s->stream_destroy = stream_destroy, s->stream_synchronize = stream_synchronize;
    s->event_create = event_create, s->event_destroy = event_destroy, s->event_record = event_record;
    s->event_synchronize = event_synchronize, s->stream_wait_event = stream_wait_event;
    s->device_synchronize = device_synchronize, s->last_error = last_error, s->destroy = destroy;
    dz_cuda_seam_nccl_api(s); /* the collectives: cuda_seam_nccl.cu */
}

} // namespace

extern "C" int dz_cuda_seam_runtime_fail(dz_cuda_seam *s, int status, const char *what, const char *detail) {
    snprintf(rt(s)->err, sizeof rt(s)->err, "%s: %s", what, detail);
    return status;
}

extern "C" int dz_cuda_seam_runtime_devices(void) {
    int count = 0;
    return cudaGetDeviceCount(&count) == cudaSuccess ? count : 0;
}

extern "C" dz_cuda_seam *dz_cuda_seam_runtime_create(int device, int *status) {
    int count = 0;
    const cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count <= device || device < 0) { /* GPUs, but not this one: INVALID */
        *status = e == cudaSuccess && count > 0                       ? DZ_CUDA_ERR_INVALID
                  : e == cudaSuccess || status_of(e) == DZ_CUDA_ERR_NO_DEVICE ? DZ_CUDA_ERR_NO_DEVICE
                                                                          : status_of(e);
        return nullptr;
    }
    dz_cuda_seam *s = static_cast<dz_cuda_seam *>(calloc(1, sizeof *s));
    rt_state *r = static_cast<rt_state *>(calloc(1, sizeof *r));
    if (!s || !r) {
        free(s), free(r);
        *status = DZ_CUDA_ERR_MEMORY;
        return nullptr;
    }
    s->impl = r, s->device = r->device = device;
    *status = cudaSetDevice(device) == cudaSuccess && cublasCreate(&r->blas) == CUBLAS_STATUS_SUCCESS
                  ? DZ_CUDA_OK
                  : DZ_CUDA_ERR_RUNTIME;
    if (*status != DZ_CUDA_OK) {
        free(s), free(r);
        return nullptr;
    }
    fill_table(s);
    return s;
}
