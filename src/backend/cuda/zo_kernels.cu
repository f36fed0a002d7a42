/* The ZO kernels (zo_kernels.h): z fill, Philox words, the pass (perturbed pair, update,
 * fused update-then-perturb) and stochastic rounding, each a thread per Philox block of the
 * span running backend/zo_element.h, compiled with -fmad=false, IEEE division and square
 * root and no flush to zero (cmake/cuda.cmake): the CPU's arithmetic, operation by
 * operation. The span travels by value as the kernel's argument (g[] included). */
#include "backend/cuda/zo_kernels.h"

#include <cuda_runtime.h>

template <dz_zo_span_mode MODE> __global__ void zo_span_kernel(const dz_zo_span span) {
    const uint64_t b = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= dz_zo_span_blocks(&span)) return;
    if (MODE == DZ_SPAN_PASS) dz_zo_pass_block(&span, b);
    else if (MODE == DZ_SPAN_ROUND) dz_zo_round_block(&span, b);
    else dz_zo_fill_block(&span, b);
}

extern "C" int dz_cuda_zo_launch(const dz_zo_span *span, void *stream) {
    const uint64_t blocks = dz_zo_span_blocks(span);
    if (blocks == 0) return (int)cudaSuccess;
    const unsigned threads = 256;
    const uint64_t grid = (blocks + threads - 1) / threads;
    if (grid > 0x7FFFFFFFu) return (int)cudaErrorInvalidValue;
    cudaStream_t st = (cudaStream_t)stream;
    switch (span->mode) {
    case DZ_SPAN_Z: zo_span_kernel<DZ_SPAN_Z><<<(unsigned)grid, threads, 0, st>>>(*span); break;
    case DZ_SPAN_WORDS: zo_span_kernel<DZ_SPAN_WORDS><<<(unsigned)grid, threads, 0, st>>>(*span); break;
    case DZ_SPAN_PASS: zo_span_kernel<DZ_SPAN_PASS><<<(unsigned)grid, threads, 0, st>>>(*span); break;
    case DZ_SPAN_ROUND: zo_span_kernel<DZ_SPAN_ROUND><<<(unsigned)grid, threads, 0, st>>>(*span); break;
    default: return (int)cudaErrorInvalidValue;
    }
    return (int)cudaGetLastError();
}
