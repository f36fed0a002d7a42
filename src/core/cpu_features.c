#include "core/cpu_features.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define DZ_X86 1
#endif

#ifdef DZ_X86
static void cpuid(unsigned leaf, unsigned sub, unsigned r[4]) {
    __cpuid_count(leaf, sub, r[0], r[1], r[2], r[3]);
}

/* Inline asm rather than _xgetbv() so this file needs no -mxsave. Only valid when
 * cpuid says OSXSAVE. */
static uint64_t xgetbv0(void) {
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}

static void read_brand(char out[49]) {
    unsigned r[4];
    cpuid(0x80000000u, 0, r);
    out[0] = '\0';
    if (r[0] < 0x80000004u)
        return;
    for (unsigned i = 0; i < 3; i++) {
        cpuid(0x80000002u + i, 0, r);
        memcpy(out + 16 * i, r, 16);
    }
    out[48] = '\0';
    /* Brands are padded with spaces on either side. */
    size_t start = strspn(out, " ");
    memmove(out, out + start, strlen(out + start) + 1);
    for (size_t n = strlen(out); n > 0 && out[n - 1] == ' '; n--)
        out[n - 1] = '\0';
}
#endif

void dz_cpu_detect(dz_cpu_features *f) {
    memset(f, 0, sizeof *f);
#ifdef DZ_X86
    unsigned r[4];
    if (!__get_cpuid_max(0, NULL))
        return;
    cpuid(0, 0, r);
    unsigned max_leaf = r[0];
    memcpy(f->vendor, &r[1], 4); /* EBX, EDX, ECX spell the vendor */
    memcpy(f->vendor + 4, &r[3], 4);
    memcpy(f->vendor + 8, &r[2], 4);
    f->vendor[12] = '\0';
    read_brand(f->brand);
    if (max_leaf < 1)
        return;

    cpuid(1, 0, r);
    unsigned base_family = (r[0] >> 8) & 0xf, base_model = (r[0] >> 4) & 0xf;
    f->family = (int)base_family + (base_family == 0xf ? (int)((r[0] >> 20) & 0xff) : 0);
    f->model = (int)base_model;
    if (base_family == 0x6 || base_family == 0xf)
        f->model += (int)(((r[0] >> 16) & 0xf) << 4);
    f->stepping = (int)(r[0] & 0xf);
    unsigned ecx1 = r[2];
    f->sse42 = ecx1 & (1u << 20);
    f->fma = ecx1 & (1u << 12);
    f->avx = ecx1 & (1u << 28);
    bool osxsave = ecx1 & (1u << 27);
    if (osxsave) {
        uint64_t xcr0 = xgetbv0();
        f->os_ymm = (xcr0 & 0x6) == 0x6;    /* SSE + AVX state */
        f->os_zmm = (xcr0 & 0xe6) == 0xe6;  /* + opmask, ZMM_Hi256, Hi16_ZMM */
    }

    if (max_leaf < 7)
        return;
    cpuid(7, 0, r);
    unsigned ebx7 = r[1], max_sub7 = r[0];
    f->avx2 = ebx7 & (1u << 5);
    f->avx512f = ebx7 & (1u << 16);
    f->avx512dq = ebx7 & (1u << 17);
    f->avx512cd = ebx7 & (1u << 28);
    f->avx512bw = ebx7 & (1u << 30);
    f->avx512vl = ebx7 & (1u << 31);
    if (max_sub7 >= 1) {
        cpuid(7, 1, r);
        f->avx512_bf16 = r[0] & (1u << 5);
    }
#endif
}

static dz_cpu_features g_features;
static pthread_once_t g_features_once = PTHREAD_ONCE_INIT;

static void detect_once(void) { dz_cpu_detect(&g_features); }

const dz_cpu_features *dz_cpu_features_get(void) {
    pthread_once(&g_features_once, detect_once);
    return &g_features;
}

bool dz_cpu_usable_avx2_fma(const dz_cpu_features *f) {
    return f->avx && f->avx2 && f->fma && f->os_ymm;
}

bool dz_cpu_usable_avx512_core(const dz_cpu_features *f) {
    return f->avx512f && f->avx512bw && f->avx512dq && f->avx512vl && f->avx512cd &&
           f->os_zmm && dz_cpu_usable_avx2_fma(f);
}

char *dz_cpu_describe(const dz_cpu_features *f, char *out, size_t cap) {
    static const struct { size_t off; const char *name; } flags[] = {
        {offsetof(dz_cpu_features, sse42), "sse4.2"},
        {offsetof(dz_cpu_features, avx), "avx"},
        {offsetof(dz_cpu_features, avx2), "avx2"},
        {offsetof(dz_cpu_features, fma), "fma"},
        {offsetof(dz_cpu_features, avx512f), "avx512f"},
        {offsetof(dz_cpu_features, avx512bw), "avx512bw"},
        {offsetof(dz_cpu_features, avx512dq), "avx512dq"},
        {offsetof(dz_cpu_features, avx512vl), "avx512vl"},
        {offsetof(dz_cpu_features, avx512cd), "avx512cd"},
        {offsetof(dz_cpu_features, avx512_bf16), "avx512_bf16"},
    };
    if (cap == 0)
        return out;
    size_t n = 0;
#define DZ_APPEND(...)                                                  \
    do {                                                                \
        if (n < cap) {                                                  \
            int w_ = snprintf(out + n, cap - n, __VA_ARGS__);           \
            n = w_ < 0 ? cap : n + (size_t)w_;                          \
        }                                                               \
    } while (0)
    DZ_APPEND("%s family %d model %d stepping %d", f->vendor[0] ? f->vendor : "unknown-vendor",
              f->family, f->model, f->stepping);
    if (f->brand[0])
        DZ_APPEND(" (%s)", f->brand);
    DZ_APPEND(":");
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++)
        if (*(const bool *)((const char *)f + flags[i].off))
            DZ_APPEND(" %s", flags[i].name);
    DZ_APPEND("; OS saves %s", f->os_zmm ? "YMM+ZMM" : f->os_ymm ? "YMM only" : "no AVX state");
#undef DZ_APPEND
    return out;
}
