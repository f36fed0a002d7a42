/* The element-wise steps of a ZO pass in the contract's order (backend/zo_ops.h,
 * dz_zo_update), one variant per ISA level (cpu_simd.h): the CPU backend's span ops and the
 * structured estimators' kernels (src/pipeline/structured_z.c) both run these, so every
 * z shape applies its update with the same arithmetic. Header-only: each includer gets its
 * own static copies of the variants. */
#ifndef DZ_BACKEND_CPU_ZO_UPDATE_H
#define DZ_BACKEND_CPU_ZO_UPDATE_H

#include "backend/cpu_simd.h"
#include "backend/zo_ops.h"

/* u = u + g z, or u = 0 + g z for the first sample (the same as adding to zeros). */
DZ_ISA_VARIANTS(dz_zo_add_scaled, (float *u, float g, const float *z, size_t n, int first), (u, g, z, n, first)) {
    if (first)
        for (size_t i = 0; i < n; i++) u[i] = 0.0f + g * z[i];
    else
        for (size_t i = 0; i < n; i++) u[i] = u[i] + g * z[i];
}

/* out = th - lr * (u / q [q > 1] + wd * th [wd != 0]); out may alias th or u. */
DZ_ISA_VARIANTS(dz_zo_apply_update,
                (float *out, const float *th, const float *u, size_t n, int q, float lr, float wd),
                (out, th, u, n, q, lr, wd)) {
    const float fq = (float)q;
    const int mean = q > 1, decay = wd != 0.0f;
    for (size_t i = 0; i < n; i++) {
        float v = u[i];
        if (mean) v = v / fq;
        if (decay) v = v + wd * th[i];
        out[i] = th[i] - lr * v;
    }
}

/* theta of a bf16 master widened to f32 (exact). */
DZ_ISA_VARIANTS(dz_zo_widen_bf16, (float *out, const uint16_t *h, size_t n), (out, h, n)) {
    for (size_t i = 0; i < n; i++) out[i] = dz_zo_u2f((uint32_t)h[i] << 16);
}

/* The perturbed pair: w+ = th + (eps z), w- = th - (eps z). */
DZ_ISA_VARIANTS(dz_zo_make_pair, (float *wp, float *wm, const float *th, const float *z, float eps, size_t n),
                (wp, wm, th, z, eps, n)) {
    for (size_t i = 0; i < n; i++) {
        const float e = eps * z[i];
        wp[i] = th[i] + e;
        wm[i] = th[i] - e;
    }
}

#endif
