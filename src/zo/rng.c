/* The RNG fills of zo/rng.h: the CPU backend's ops (the scalar one: the reference backend's). */
#include "zo/rng.h"

#include "backend/backend.h"

void dz_z_fill(float *z, uint64_t seed, uint32_t tensor, uint32_t draw, uint64_t i0, size_t n, dz_zdist dist) {
    dz_backend_cpu()->z_fill(z, seed, tensor, draw, i0, n, dist);
}

void dz_philox_fill(uint32_t *x, uint64_t seed, uint32_t purpose, uint32_t tensor, uint32_t draw, uint64_t i0,
                    size_t n) {
    dz_backend_cpu()->philox_fill(x, seed, purpose, tensor, draw, i0, n);
}

void dz_z_fill_scalar(float *z, uint64_t seed, uint32_t tensor, uint32_t draw, uint64_t i0, size_t n,
                      dz_zdist dist) {
    dz_backend_ref()->z_fill(z, seed, tensor, draw, i0, n, dist);
}
