/* The CUDA seam's collectives over NCCL (cuda_seam.h; cuda_seam_nccl.h): each entry is the
 * one NCCL call it names. One communicator per device; the all-gather moves bytes
 * (ncclInt8), so any element type travels. A process driving several GPUs brackets its
 * calls with group_start/group_end (ncclGroupStart/End), as NCCL requires. */
#include "backend/cuda/cuda_seam_nccl.h"

#include <string.h>

#include <cuda_runtime.h>

#ifdef DZ_HAVE_NCCL
#include <nccl.h>

namespace {

int status_of(ncclResult_t r) {
    switch (r) {
    case ncclSuccess: return DZ_CUDA_OK;
    case ncclInvalidArgument:
    case ncclInvalidUsage: return DZ_CUDA_ERR_INVALID;
    default: return DZ_CUDA_ERR_RUNTIME;
    }
}

int check(dz_cuda_seam *s, ncclResult_t r, const char *what) {
    if (r == ncclSuccess || r == ncclInProgress) return DZ_CUDA_OK;
    return dz_cuda_seam_runtime_fail(s, status_of(r), what, ncclGetErrorString(r));
}

int comm_unique_id(dz_cuda_seam *s, dz_cuda_comm_id *id) {
    static_assert(sizeof(ncclUniqueId) == sizeof id->bytes, "dz_cuda_comm_id holds an ncclUniqueId");
    ncclUniqueId u;
    const int st = check(s, ncclGetUniqueId(&u), "ncclGetUniqueId");
    if (st == DZ_CUDA_OK) memcpy(id->bytes, u.internal, sizeof id->bytes);
    return st;
}

/* NCCL takes the device from the caller's current one: this seam's. */
int comm_init(dz_cuda_seam *s, dz_cuda_comm *comm, int nranks, int rank, const dz_cuda_comm_id *id) {
    *comm = nullptr;
    const cudaError_t e = cudaSetDevice(s->device);
    if (e != cudaSuccess)
        return dz_cuda_seam_runtime_fail(s, DZ_CUDA_ERR_RUNTIME, "cudaSetDevice", cudaGetErrorString(e));
    ncclUniqueId u;
    memcpy(u.internal, id->bytes, sizeof id->bytes);
    ncclComm_t c = nullptr;
    const int st = check(s, ncclCommInitRank(&c, nranks, u, rank), "ncclCommInitRank");
    *comm = c;
    return st;
}

int comm_destroy(dz_cuda_seam *s, dz_cuda_comm comm) {
    return comm ? check(s, ncclCommDestroy(static_cast<ncclComm_t>(comm)), "ncclCommDestroy") : DZ_CUDA_OK;
}

int group_start(dz_cuda_seam *s) { return check(s, ncclGroupStart(), "ncclGroupStart"); }
int group_end(dz_cuda_seam *s) { return check(s, ncclGroupEnd(), "ncclGroupEnd"); }

int all_gather(dz_cuda_seam *s, dz_cuda_comm comm, const void *send, void *recv, size_t count, dz_cuda_stream st) {
    return check(s, ncclAllGather(send, recv, count, ncclInt8, static_cast<ncclComm_t>(comm),
                                  static_cast<cudaStream_t>(st)),
                 "ncclAllGather");
}

} // namespace

#else /* a CUDA build without NCCL (cmake/cuda.cmake found none): each entry says so */

namespace {

int missing(dz_cuda_seam *s) {
    return dz_cuda_seam_runtime_fail(s, DZ_CUDA_ERR_RUNTIME, "collectives", "this distzo was built without NCCL");
}
int comm_unique_id(dz_cuda_seam *s, dz_cuda_comm_id *) { return missing(s); }
int comm_init(dz_cuda_seam *s, dz_cuda_comm *comm, int, int, const dz_cuda_comm_id *) {
    *comm = nullptr;
    return missing(s);
}
int comm_destroy(dz_cuda_seam *s, dz_cuda_comm comm) { return comm ? missing(s) : DZ_CUDA_OK; }
int group_start(dz_cuda_seam *s) { return missing(s); }
int group_end(dz_cuda_seam *s) { return missing(s); }
int all_gather(dz_cuda_seam *s, dz_cuda_comm, const void *, void *, size_t, dz_cuda_stream) { return missing(s); }

} // namespace

#endif

extern "C" void dz_cuda_seam_nccl_api(dz_cuda_seam *s) {
    s->comm_unique_id = comm_unique_id, s->comm_init = comm_init, s->comm_destroy = comm_destroy;
    s->group_start = group_start, s->group_end = group_end, s->all_gather = all_gather;
}
