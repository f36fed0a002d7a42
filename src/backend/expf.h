/* exp without libm, one definition for the CPU backend's kernels (backend/cpu_simd.h) and
 * the CUDA backend's forward kernels (backend/forward_element.h, DZ_HD): the same bits on
 * both where the arithmetic is not contracted (-ffp-contract=off, nvcc -fmad=false). */
#ifndef DZ_BACKEND_EXPF_H
#define DZ_BACKEND_EXPF_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "backend/zo_ops.h" /* DZ_HD */

/* exp(x) for float: Cody-Waite range reduction x = n ln2 + r, a degree-7 polynomial
 * for e^r (Cephes coefficients), scaled by 2^n through the exponent bits. Relative error
 * below 2e-7 over the range; 0 below -87.3 (no subnormals); saturates above 88.7.
 * Plain arithmetic, so the compiler vectorizes the loops that call it. */
DZ_HD static inline float dz_expf(float in) {
    /* NaN in, NaN out, without converting NaN to an integer below (undefined behaviour). */
    float x = in != in ? 0.0f : in;
    x = x < -87.3f ? -87.3f : (x > 88.7f ? 88.7f : x);
    float n = floorf(x * 1.44269504088896341f + 0.5f);
    float r = x - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    int32_t bits = ((int32_t)n + 127) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return in != in ? in : p * scale;
}

#endif
