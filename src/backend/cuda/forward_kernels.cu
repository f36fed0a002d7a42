/* The forward's kernels (forward_kernels.h): item ops a thread per work item (grid-stride),
 * row ops a block per row whose threads' partial sums are added pairwise in shared memory in
 * the order dz_fw_run_host adds them (backend/forward_element.h), so the host seam's results
 * are the GPU's bits. Built with the ZO kernels' flags (-fmad=false, IEEE division and
 * square root, cmake/cuda.cmake). */
#include "backend/cuda/forward_kernels.h"

#include <cuda_runtime.h>

namespace {

__global__ void fw_item_kernel(const dz_fw_launch L, uint64_t n) {
    const uint64_t step = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t t = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; t < n; t += step) dz_fw_item(&L, t);
}

/* part[0] = the sum of part[0 .. DZ_FW_THREADS), pairwise as dz_fw_tree_sum adds them. */
template <typename T> __device__ T block_tree_sum(T *part) {
    const int t = threadIdx.x;
    __syncthreads();
    for (int w = DZ_FW_THREADS / 2; w >= 1; w /= 2) {
        if (t < w) part[t] += part[t + w];
        __syncthreads();
    }
    const T sum = part[0];
    __syncthreads(); /* part may be reused */
    return sum;
}

__device__ float block_max(float *part, float init) {
    __syncthreads();
    float mx = init;
    for (int k = 0; k < DZ_FW_THREADS; k++) mx = part[k] > mx ? part[k] : mx;
    __syncthreads();
    return mx;
}

__global__ void __launch_bounds__(DZ_FW_THREADS) fw_row_kernel(const dz_fw_launch L) {
    __shared__ double part[DZ_FW_THREADS];
    __shared__ float partf[DZ_FW_THREADS];
    const int r = blockIdx.x, t = threadIdx.x;
    const float *x = L.x + (size_t)r * (size_t)L.cols;
    if (L.mode == DZ_FW_LOGSUMEXP) {
        partf[t] = dz_fw_part_max(x, L.cols, t);
        const float mx = block_max(partf, L.m[r]);
        partf[t] = dz_fw_part_sumexp(x, L.cols, t, mx);
        const float sum = block_tree_sum(partf);
        if (t == 0) dz_fw_lse_fold(&L.m[r], &L.s[r], mx, sum);
        return;
    }
    double mean = 0.0;
    if (L.mode == DZ_FW_LAYERNORM) {
        part[t] = dz_fw_part_sum(x, L.cols, t);
        mean = block_tree_sum(part) / L.cols;
    }
    part[t] = dz_fw_part_sq(x, L.cols, t, mean);
    const float rstd = dz_fw_rstd(block_tree_sum(part), L.cols, L.eps);
    dz_fw_norm_apply(&L, r, (float)mean, rstd, t);
}

} // namespace

extern "C" int dz_cuda_fw_launch(const dz_fw_launch *L, void *stream) {
    cudaStream_t st = (cudaStream_t)stream;
    if (dz_fw_is_row_op(L->mode)) {
        if (L->rows <= 0) return (int)cudaSuccess;
        fw_row_kernel<<<(unsigned)L->rows, DZ_FW_THREADS, 0, st>>>(*L);
        return (int)cudaGetLastError();
    }
    const uint64_t n = dz_fw_items(L), threads = 256;
    if (n == 0) return (int)cudaSuccess;
    const uint64_t want = (n + threads - 1) / threads, grid = want < 65536 ? want : 65536; /* then grid-stride */
    fw_item_kernel<<<(unsigned)grid, (unsigned)threads, 0, st>>>(*L, n);
    return (int)cudaGetLastError();
}
