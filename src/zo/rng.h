/* The ZO perturbation RNG as the rest of zo/ calls it: the contract (Philox counter layout,
 * Box-Muller, stochastic rounding) is backend/zo_ops.h; these fills run the CPU backend's
 * ops (dz_backend_cpu()) on host memory. A caller holding a forward should call its
 * backend's ops instead (dz_forward_backend()). */
#ifndef DZ_ZO_RNG_H
#define DZ_ZO_RNG_H

#include <stddef.h>
#include <stdint.h>

#include "backend/zo_ops.h"

/* z_i for i = i0 .. i0+n-1 of `tensor` at draw `draw` (counter purpose 0). Any i0 and n
 * (partial blocks included); the code of dz_isa_active() (core/isa.h), same bits at every level. */
void dz_z_fill(float *z, uint64_t seed, uint32_t tensor, uint32_t draw, uint64_t i0, size_t n, dz_zdist dist);

/* Raw words: x_i = word i % 4 of block i / 4 with counter (i / 4, purpose, tensor, draw). */
void dz_philox_fill(uint32_t *x, uint64_t seed, uint32_t purpose, uint32_t tensor, uint32_t draw, uint64_t i0,
                    size_t n);

/* For tests: one element at a time through dz_philox4x32_10 and the scalar helpers of the
 * contract (the reference backend's z_fill). */
void dz_z_fill_scalar(float *z, uint64_t seed, uint32_t tensor, uint32_t draw, uint64_t i0, size_t n,
                      dz_zdist dist);

#endif
