/* The CPU backend's ZO ops (cpu_philox.c: the fills; cpu_zo.c: the span kernels), private
 * to src/backend: everything else reaches them through dz_backend_cpu()'s table, whose
 * entries of the same names (backend.h) document them. */
#ifndef DZ_BACKEND_CPU_ZO_H
#define DZ_BACKEND_CPU_ZO_H

#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "backend/zo_ops.h"

void dz_cpu_z_fill(const dz_backend *be, float *z, uint64_t seed, uint32_t tensor, uint32_t draw, uint64_t i0,
                   size_t n, dz_zdist dist);
void dz_cpu_philox_fill(const dz_backend *be, uint32_t *x, uint64_t seed, uint32_t purpose, uint32_t tensor,
                        uint32_t draw, uint64_t i0, size_t n);
void dz_cpu_perturb_pair(const dz_backend *be, const float *theta, float *w_plus, float *w_minus, size_t n, float eps,
                         uint64_t seed, uint32_t tensor, uint32_t draw, uint64_t i0, dz_zdist dist);
void dz_cpu_perturb_pair_bf16(const dz_backend *be, const uint16_t *theta, float *w_plus, float *w_minus, size_t n,
                              float eps, uint64_t seed, uint32_t tensor, uint32_t draw, uint64_t i0, dz_zdist dist);
void dz_cpu_update_f32(const dz_backend *be, float *theta, size_t n, const float *g, int q, float lr, float wd,
                       uint64_t seed, uint32_t tensor, uint32_t step, uint64_t i0, dz_zdist dist);
void dz_cpu_update_bf16(const dz_backend *be, uint16_t *theta, size_t n, const float *g, int q, float lr, float wd,
                        uint64_t seed, uint32_t tensor, uint32_t step, uint64_t i0, dz_zdist dist);
void dz_cpu_update_then_perturb_f32(const dz_backend *be, float *theta, float *w_plus, float *w_minus, size_t n,
                                    const dz_zo_update *upd, float eps, uint64_t seed, uint32_t tensor,
                                    uint32_t next_draw, uint64_t i0, dz_zdist dist);
void dz_cpu_update_then_perturb_bf16(const dz_backend *be, uint16_t *theta, float *w_plus, float *w_minus, size_t n,
                                     const dz_zo_update *upd, float eps, uint64_t seed, uint32_t tensor,
                                     uint32_t next_draw, uint64_t i0, dz_zdist dist);

#endif
