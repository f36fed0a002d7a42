/* distzo/runtime.h over the core's kernel levels, CPU detection and thread pool, and the
 * backend's GEMM. */
#include "distzo/runtime.h"

#include <stdio.h>

#include "backend/backend.h"
#include "backend/gemm.h"
#include "core/cpu_features.h"
#include "core/isa.h"
#include "core/threads.h"

dz_status dz_runtime_init(int threads, dz_error *err) {
    dz_status st = dz_isa_from_env(err);
    if (st == DZ_OK) dz_set_num_threads(threads);
    return st;
}

int dz_runtime_threads(void) { return dz_get_num_threads(); }
const char *dz_runtime_kernels(void) { return dz_isa_name(dz_isa_active()); }
const char *dz_runtime_best_kernels(void) { return dz_isa_name(dz_isa_best()); }
const char *dz_runtime_gemm(void) { return dz_gemm_describe(); }

char *dz_runtime_cpu(char *out, size_t cap) {
    dz_cpu_features cpu;
    dz_cpu_detect(&cpu);
    return dz_cpu_describe(&cpu, out, cap);
}

size_t dz_runtime_peak_rss(void) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return 0;
    char line[256];
    size_t kb = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmHWM: %zu kB", &kb) == 1) break;
    fclose(f);
    return kb * 1024;
}
