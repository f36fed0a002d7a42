/* Which vector code the CPU kernels run: one switch for every hand-vectorized path (the
 * GEMM, the row kernels, the perturbation and the RNG), so that a test can force each
 * level the machine can execute and check that they agree.
 *
 * Every level computes the same bits: the paths differ only in how many lanes run at
 * once, never in the arithmetic each output element goes through. */
#ifndef DZ_CORE_ISA_H
#define DZ_CORE_ISA_H

#include "distzo/error.h"

typedef enum dz_isa {
    DZ_ISA_AUTO = 0,  /* the best level this machine can run (or DISTZO_ISA) */
    DZ_ISA_BASELINE,  /* x86-64-v2 / portable C: no AVX, scalar fmaf for the GEMM */
    DZ_ISA_AVX2,      /* AVX2 + FMA, 256-bit */
    DZ_ISA_AVX512,    /* AVX-512 F/BW/DQ/VL/CD + AVX2 + FMA, 512-bit */
    DZ_ISA_COUNT
} dz_isa;

/* The best level the CPU and the OS allow. */
dz_isa dz_isa_best(void);

/* The level in force: the forced one, else DISTZO_ISA if set (and runnable), else the
 * best. Never DZ_ISA_AUTO. Cheap (one atomic load after the first call). */
dz_isa dz_isa_active(void);

/* Forces a level for the whole process (DZ_ISA_AUTO: back to the default). Fails with
 * DZ_ERR_UNSUPPORTED when this machine cannot execute it. Not for use while kernels run
 * on other threads. */
dz_status dz_isa_force(dz_isa isa, dz_error *err);

/* "baseline", "avx2", "avx512" ("auto" for DZ_ISA_AUTO). */
const char *dz_isa_name(dz_isa isa);

/* Parses a name as above; DZ_ERR_INVALID naming the accepted values otherwise. */
dz_status dz_isa_parse(const char *name, dz_isa *out, dz_error *err);

/* Applies DISTZO_ISA from the environment now, with an error naming the variable when its
 * value is unknown or not runnable here (dz_isa_active() alone would fall back to the best
 * level with a warning). Commands call it at start. */
dz_status dz_isa_from_env(dz_error *err);

#endif
