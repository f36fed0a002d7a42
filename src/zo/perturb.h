/* Fused per-tensor-span kernels of the ZO step as the rest of zo/ calls them: perturbed
 * working copies w+- = theta +- eps z, and the SPSA update of the master weights
 * (docs/ZO_RNG.md; in code: backend/zo_ops.h). Each is the CPU backend's op of the same
 * name (backend.h) on host memory; a caller holding a forward should call its backend's
 * ops instead (dz_forward_backend()).
 *
 * Every kernel works on elements i0 .. i0+n-1 of one tensor (`tensor` = its id) and
 * derives z from (seed, tensor, draw, element index) alone, so a tensor sliced across
 * threads or ranks in any pieces gives the same bits as one call. They allocate nothing
 * and are single-threaded: callers parallelize over spans. A draw index is
 * d = step * q + sample (uint32, wrapping).
 *
 * bf16 masters: theta is widened to f32, updated in f32, and stochastically rounded back
 * with the purpose-1 words of the same (tensor, element, d = step * q) counter; the
 * working copies w+- are always f32. */
#ifndef DZ_ZO_PERTURB_H
#define DZ_ZO_PERTURB_H

#include "zo/rng.h"

#include <stddef.h>
#include <stdint.h>

/* w_plus = theta + eps z, w_minus = theta - eps z with z of draw `draw`. */
void dz_perturb_pair(const float *theta, float *w_plus, float *w_minus, size_t n, float eps, uint64_t seed,
                     uint32_t tensor, uint32_t draw, uint64_t i0, dz_zdist dist);
void dz_perturb_pair_bf16(const uint16_t *theta, float *w_plus, float *w_minus, size_t n, float eps, uint64_t seed,
                          uint32_t tensor, uint32_t draw, uint64_t i0, dz_zdist dist);

/* theta -= lr * (mean_j g[j] z_j + wd theta), z_j of draw step*q + j (docs/ZO_RNG.md, section 5). */
void dz_update_f32(float *theta, size_t n, const float *g, int q, float lr, float wd, uint64_t seed, uint32_t tensor,
                   uint32_t step, uint64_t i0, dz_zdist dist);
void dz_update_bf16(uint16_t *theta, size_t n, const float *g, int q, float lr, float wd, uint64_t seed,
                    uint32_t tensor, uint32_t step, uint64_t i0, dz_zdist dist);

/* One pass: apply the pending update `upd` (NULL = none) to theta in place, then write the
 * pair for draw `next_draw` from the updated theta (w_plus = w_minus = NULL: update only).
 * Bitwise equal to dz_update_* followed by dz_perturb_pair*. */
void dz_update_then_perturb_f32(float *theta, float *w_plus, float *w_minus, size_t n, const dz_zo_update *upd,
                                float eps, uint64_t seed, uint32_t tensor, uint32_t next_draw, uint64_t i0,
                                dz_zdist dist);
void dz_update_then_perturb_bf16(uint16_t *theta, float *w_plus, float *w_minus, size_t n, const dz_zo_update *upd,
                                 float eps, uint64_t seed, uint32_t tensor, uint32_t next_draw, uint64_t i0,
                                 dz_zdist dist);

#endif
