/* The span kernels of zo/perturb.h: the CPU backend's ZO ops (src/backend/cpu_zo.c). */
#include "zo/perturb.h"

#include "backend/backend.h"

void dz_perturb_pair(const float *theta, float *w_plus, float *w_minus, size_t n, float eps, uint64_t seed,
                     uint32_t tensor, uint32_t draw, uint64_t i0, dz_zdist dist) {
    dz_backend_cpu()->perturb_pair(theta, w_plus, w_minus, n, eps, seed, tensor, draw, i0, dist);
}

void dz_perturb_pair_bf16(const uint16_t *theta, float *w_plus, float *w_minus, size_t n, float eps, uint64_t seed,
                          uint32_t tensor, uint32_t draw, uint64_t i0, dz_zdist dist) {
    dz_backend_cpu()->perturb_pair_bf16(theta, w_plus, w_minus, n, eps, seed, tensor, draw, i0, dist);
}

void dz_update_f32(float *theta, size_t n, const float *g, int q, float lr, float wd, uint64_t seed, uint32_t tensor,
                   uint32_t step, uint64_t i0, dz_zdist dist) {
    dz_backend_cpu()->update_f32(theta, n, g, q, lr, wd, seed, tensor, step, i0, dist);
}

void dz_update_bf16(uint16_t *theta, size_t n, const float *g, int q, float lr, float wd, uint64_t seed,
                    uint32_t tensor, uint32_t step, uint64_t i0, dz_zdist dist) {
    dz_backend_cpu()->update_bf16(theta, n, g, q, lr, wd, seed, tensor, step, i0, dist);
}

void dz_update_then_perturb_f32(float *theta, float *w_plus, float *w_minus, size_t n, const dz_zo_update *upd,
                                float eps, uint64_t seed, uint32_t tensor, uint32_t next_draw, uint64_t i0,
                                dz_zdist dist) {
    dz_backend_cpu()->update_then_perturb_f32(theta, w_plus, w_minus, n, upd, eps, seed, tensor, next_draw, i0, dist);
}

void dz_update_then_perturb_bf16(uint16_t *theta, float *w_plus, float *w_minus, size_t n, const dz_zo_update *upd,
                                 float eps, uint64_t seed, uint32_t tensor, uint32_t next_draw, uint64_t i0,
                                 dz_zdist dist) {
    dz_backend_cpu()->update_then_perturb_bf16(theta, w_plus, w_minus, n, upd, eps, seed, tensor, next_draw, i0,
                                               dist);
}
