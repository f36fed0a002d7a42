/* What the CPU and the OS let us run: cpuid/xgetbv based, no compiler ISA flags needed.
 * Used to pick library code paths (e.g. OpenBLAS's core type) at run time. */
#ifndef DZ_CORE_CPU_FEATURES_H
#define DZ_CORE_CPU_FEATURES_H

#include <stdbool.h>
#include <stddef.h>

typedef struct dz_cpu_features {
    char vendor[13];  /* "GenuineIntel", "AuthenticAMD", ... ("" off x86) */
    char brand[49];   /* e.g. "AMD EPYC 9654 96-Core Processor" (trimmed; may be "") */
    int family, model, stepping; /* display family/model (extended fields folded in) */
    /* Instruction-set bits as the CPU reports them (not yet checked against the OS). */
    bool sse42, avx, avx2, fma;
    bool avx512f, avx512bw, avx512dq, avx512vl, avx512cd, avx512_bf16;
    /* OS saves the state on context switch (XCR0 via XGETBV): SSE+YMM, and also
     * opmask+ZMM for AVX-512. Without it the instructions fault even if cpuid has them. */
    bool os_ymm, os_zmm;
} dz_cpu_features;

/* Detects the running CPU. Cheap, but callers usually want dz_cpu_features_get(). */
void dz_cpu_detect(dz_cpu_features *f);

/* Process-wide cached detection (thread-safe). Never NULL. */
const dz_cpu_features *dz_cpu_features_get(void);

/* Usable = the CPU has it and the OS saves the registers. */
bool dz_cpu_usable_avx2_fma(const dz_cpu_features *f);
/* AVX-512 F+BW+DQ+VL+CD: what OpenBLAS's SkylakeX kernels need. */
bool dz_cpu_usable_avx512_core(const dz_cpu_features *f);

/* One line, e.g. "AuthenticAMD family 25 model 17 stepping 1 (AMD EPYC): sse4.2 avx avx2
 * fma avx512f ...; OS saves YMM+ZMM". Truncated to cap; returns out. */
char *dz_cpu_describe(const dz_cpu_features *f, char *out, size_t cap);

#endif
