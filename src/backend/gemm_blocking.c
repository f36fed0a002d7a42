/* The GEMM's cache blocking from this machine's L2 size (gemm_blocking.h).
 *
 * AVX-512 keeps the blocking measured on the model shapes on a 2 MiB-per-core-L2 Xeon
 * (bench/README.md): mc 240, kc 768, nc 768. AVX2 machines have small L2s (Zen 2/3: 512 KiB,
 * Haswell..Skylake client: 256 KiB), where 240 rows x 768 of x (720 KiB) would be read from
 * L3 once per panel of w; so at AVX2 mc follows the L2: the block of x a panel's tiles read
 * (mc x kc floats) fills half of it, 84 rows on a Zen 2, the full 240 with >= 1.5 MiB.
 * kc stays 768 (K <= 768 in one pass; x is read in place, so a shorter K block only splits
 * its rows into strided pieces: kc 192..512 measured 5-15% slower, bench/README.md, "The
 * AVX2 path"), and nc 768. */
#include "backend/gemm_blocking.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

enum { DEFAULT_L2 = 512 << 10, MIN_TILES = 8 };

/* "512K", "2M", "1048576": bytes; 0 when absent or malformed. */
static long parse_size(const char *s) {
    if (!s || !*s) return 0;
    char *end;
    long v = strtol(s, &end, 10);
    if (*end == 'K' || *end == 'k') v <<= 10, end++;
    else if (*end == 'M' || *end == 'm') v <<= 20, end++;
    return *end || v <= 0 ? 0 : v;
}

/* cpu0's unified level-2 cache from /sys, 0 if not found. */
static long sys_l2_size(void) {
    for (int i = 0; i < 8; i++) {
        char path[80], size[32];
        int level = 0;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/level", i);
        FILE *f = fopen(path, "r");
        if (!f) return 0;
        const int ok = fscanf(f, "%d", &level) == 1;
        fclose(f);
        if (!ok || level != 2) continue;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
        if (!(f = fopen(path, "r"))) return 0;
        const int read = fscanf(f, "%31s", size) == 1;
        fclose(f);
        return read ? parse_size(size) : 0;
    }
    return 0;
}

static atomic_long g_l2; /* 0 = not read yet */

static long l2_bytes(void) {
    long v = atomic_load_explicit(&g_l2, memory_order_relaxed);
    if (v) return v;
    v = parse_size(getenv("DISTZO_GEMM_L2"));
    if (v <= 0) v = sysconf(_SC_LEVEL2_CACHE_SIZE);
    if (v <= 0) v = sys_l2_size();
    if (v <= 0) v = DEFAULT_L2;
    atomic_store_explicit(&g_l2, v, memory_order_relaxed);
    return v;
}

dz_gemm_blocking dz_gemm_blocking_for(dz_isa isa, int mr, dz_gemm_blocking max) {
    if (isa != DZ_ISA_AVX2) return max;
    long mc = l2_bytes() / 2 / ((long)sizeof(float) * max.kc) / mr * mr;
    if (mc < MIN_TILES * mr) mc = MIN_TILES * mr;
    if (mc > max.mc) mc = max.mc; /* last: the buffers hold max.mc rows */
    return (dz_gemm_blocking){(int)mc, max.kc, max.nc};
}

long dz_gemm_blocking_l2(void) { return l2_bytes(); }
