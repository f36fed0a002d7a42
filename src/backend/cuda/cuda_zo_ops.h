/* The ZO ops of backend.h as the CUDA backend runs them: on device buffers, enqueued on a
 * stream of a CUDA seam (cuda_seam.h), each one launch of the ZO kernels over the span
 * (backend/zo_element.h). Same arguments and bits as backend.h's ops of the same names, plus
 * the seam and the stream; g[] is host memory and travels in the launch. Asynchronous: the
 * results are there after the stream's synchronize (or an event after them). Returns a
 * dz_cuda_status (DZ_CUDA_ERR_INVALID for q outside 1..DZ_ZO_SPAN_MAX_Q; the seam's
 * last_error says what). Library
 * dz_cuda_host, so the CPU suite runs them through the host seam. */
#ifndef DZ_BACKEND_CUDA_CUDA_ZO_OPS_H
#define DZ_BACKEND_CUDA_CUDA_ZO_OPS_H

#include "backend/cuda/cuda_seam.h"

int dz_cuda_z_fill(dz_cuda_seam *s, dz_cuda_stream st, float *z, uint64_t seed, uint32_t tensor, uint32_t draw,
                   uint64_t i0, size_t n, dz_zdist dist);
int dz_cuda_philox_fill(dz_cuda_seam *s, dz_cuda_stream st, uint32_t *x, uint64_t seed, uint32_t purpose,
                        uint32_t tensor, uint32_t draw, uint64_t i0, size_t n);
int dz_cuda_perturb_pair(dz_cuda_seam *s, dz_cuda_stream st, const float *theta, float *w_plus, float *w_minus,
                         size_t n, float eps, uint64_t seed, uint32_t tensor, uint32_t draw, uint64_t i0,
                         dz_zdist dist);
int dz_cuda_perturb_pair_bf16(dz_cuda_seam *s, dz_cuda_stream st, const uint16_t *theta, float *w_plus,
                              float *w_minus, size_t n, float eps, uint64_t seed, uint32_t tensor, uint32_t draw,
                              uint64_t i0, dz_zdist dist);
int dz_cuda_update_f32(dz_cuda_seam *s, dz_cuda_stream st, float *theta, size_t n, const float *g, int q, float lr,
                       float wd, uint64_t seed, uint32_t tensor, uint32_t step, uint64_t i0, dz_zdist dist);
int dz_cuda_update_bf16(dz_cuda_seam *s, dz_cuda_stream st, uint16_t *theta, size_t n, const float *g, int q,
                        float lr, float wd, uint64_t seed, uint32_t tensor, uint32_t step, uint64_t i0, dz_zdist dist);
int dz_cuda_update_then_perturb_f32(dz_cuda_seam *s, dz_cuda_stream st, float *theta, float *w_plus, float *w_minus,
                                    size_t n, const dz_zo_update *upd, float eps, uint64_t seed, uint32_t tensor,
                                    uint32_t next_draw, uint64_t i0, dz_zdist dist);
int dz_cuda_update_then_perturb_bf16(dz_cuda_seam *s, dz_cuda_stream st, uint16_t *theta, float *w_plus,
                                     float *w_minus, size_t n, const dz_zo_update *upd, float eps, uint64_t seed,
                                     uint32_t tensor, uint32_t next_draw, uint64_t i0, dz_zdist dist);
/* h[i] = stochastic rounding of v[i] with the purpose-1 word of (tensor, draw, i0 + i): the
 * structured estimators' store of bf16 masters (src/pipeline/structured_z.c). */
int dz_cuda_round_bf16(dz_cuda_seam *s, dz_cuda_stream st, uint16_t *h, const float *v, size_t n, uint64_t seed,
                       uint32_t tensor, uint32_t draw, uint64_t i0);

#endif
