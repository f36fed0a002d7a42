/* Helpers for the CPU kernels: one variant per instruction-set level, and exp without libm
 * (backend/expf.h).
 *
 * A hot function is written once (DZ_ISA_VARIANTS) and compiled for each level of
 * core/isa.h; every call runs the variant of dz_isa_active(), so a test can force each
 * level the machine has and compare. Every variant computes the same bits: no variant
 * enables FMA (and -ffp-contract=off), and reductions use a fixed number of lanes combined
 * in a fixed order, so a wider vector unit only runs the same arithmetic faster. */
#ifndef DZ_BACKEND_CPU_SIMD_H
#define DZ_BACKEND_CPU_SIMD_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "core/isa.h"

/* Always inlined, so compiled for the level of whichever variant calls it. */
#define DZ_ISA_INLINE static inline __attribute__((always_inline))

/* What each level may use. Not "fma": contracted and separate multiply-adds round
 * differently. */
#define DZ_ISA_TARGET_BASELINE
#define DZ_ISA_TARGET_AVX2 __attribute__((target("avx2")))
#define DZ_ISA_TARGET_AVX512 __attribute__((target("avx512f")))

/* The same levels with FMA, for the one chain that asks for it: the GEMM's (gemm.c), whose
 * micro-kernel is one body per level with its own tile shape and intrinsics (its baseline
 * uses fmaf, correctly rounded like the hardware FMA, so it needs no target). */
#define DZ_ISA_TARGET_FMA_BASELINE
#define DZ_ISA_TARGET_FMA_AVX2 __attribute__((target("avx2,fma")))
#define DZ_ISA_TARGET_FMA_AVX512 __attribute__((target("avx512f,avx2,fma")))

/* Defines the void function `name`, whose body is the block after the macro, as one
 * variant per level (name##_baseline, name##_avx2, name##_avx512), the table
 * name##_variants indexed by dz_isa, and name(...) itself, which runs the variant of
 * dz_isa_active(). params: the parenthesized parameter list; args: its names, likewise.
 * The body also sees `isa`, the constant level it is compiled for, for the rare body that
 * needs level-specific intrinsics. Example:
 *
 *     DZ_ISA_VARIANTS(scale, (float *x, float a, size_t n), (x, a, n)) {
 *         for (size_t i = 0; i < n; i++) x[i] *= a;
 *     }
 */
#define DZ_ISA_VARIANTS(name, params, args)                                                                     \
    DZ_ISA_INLINE void name##_body(__attribute__((unused)) dz_isa isa, DZ_ISA_UNPAREN params);                  \
    DZ_ISA_VARIANT(name, BASELINE, baseline, params, args)                                                      \
    DZ_ISA_VARIANT(name, AVX2, avx2, params, args)                                                              \
    DZ_ISA_VARIANT(name, AVX512, avx512, params, args)                                                          \
    static void (*const name##_variants[DZ_ISA_COUNT]) params = {                                               \
        [DZ_ISA_BASELINE] = name##_baseline, [DZ_ISA_AVX2] = name##_avx2, [DZ_ISA_AVX512] = name##_avx512};   \
    __attribute__((unused)) DZ_ISA_INLINE void name params { name##_variants[dz_isa_active()] args; }         \
    DZ_ISA_INLINE void name##_body(__attribute__((unused)) dz_isa isa, DZ_ISA_UNPAREN params)

#define DZ_ISA_UNPAREN(...) __VA_ARGS__
#define DZ_ISA_VARIANT(name, LEVEL, level, params, args)                 \
    DZ_ISA_TARGET_##LEVEL static void name##_##level params {            \
        name##_body(DZ_ISA_##LEVEL, DZ_ISA_UNPAREN args);                \
    }

#include "backend/expf.h" /* dz_expf, shared with the CUDA kernels */

#endif
