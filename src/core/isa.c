#include "core/isa.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/cpu_features.h"
#include "distzo/log.h"

static const char *const isa_names[DZ_ISA_COUNT] = {
    [DZ_ISA_AUTO] = "auto", [DZ_ISA_BASELINE] = "baseline", [DZ_ISA_AVX2] = "avx2", [DZ_ISA_AVX512] = "avx512"};

/* 0 = not decided yet; otherwise the level in force. */
static atomic_int g_active;

dz_isa dz_isa_best(void) {
    const dz_cpu_features *f = dz_cpu_features_get();
    if (dz_cpu_usable_avx512_core(f)) return DZ_ISA_AVX512;
    if (dz_cpu_usable_avx2_fma(f)) return DZ_ISA_AVX2;
    return DZ_ISA_BASELINE;
}

const char *dz_isa_name(dz_isa isa) { return isa >= 0 && isa < DZ_ISA_COUNT ? isa_names[isa] : "unknown"; }

dz_status dz_isa_parse(const char *name, dz_isa *out, dz_error *err) {
    for (int i = 0; i < DZ_ISA_COUNT; i++)
        if (name && !strcasecmp(name, isa_names[i])) {
            *out = (dz_isa)i;
            return DZ_OK;
        }
    return dz_fail(err, DZ_ERR_INVALID, "unknown instruction-set level '%s' (expected auto, baseline, avx2 or avx512)",
                   name ? name : "");
}

static dz_status check_runnable(dz_isa isa, dz_error *err) {
    if (isa <= DZ_ISA_AUTO || isa >= DZ_ISA_COUNT || isa <= dz_isa_best()) return DZ_OK;
    return dz_fail(err, DZ_ERR_UNSUPPORTED, "this CPU cannot run the %s kernels (best here: %s)", dz_isa_name(isa),
                   dz_isa_name(dz_isa_best()));
}

dz_status dz_isa_force(dz_isa isa, dz_error *err) {
    dz_status st = check_runnable(isa, err);
    if (st != DZ_OK) return st;
    atomic_store_explicit(&g_active, isa == DZ_ISA_AUTO ? (int)dz_isa_best() : (int)isa, memory_order_relaxed);
    return DZ_OK;
}

dz_status dz_isa_from_env(dz_error *err) {
    const char *env = getenv("DISTZO_ISA");
    if (!env || !*env) return DZ_OK;
    dz_isa isa = DZ_ISA_AUTO;
    dz_error e;
    if (dz_isa_parse(env, &isa, &e) != DZ_OK || dz_isa_force(isa, &e) != DZ_OK)
        return dz_fail(err, e.code, "DISTZO_ISA=%.64s: %.900s", env, e.msg);
    return DZ_OK;
}

dz_isa dz_isa_active(void) {
    int a = atomic_load_explicit(&g_active, memory_order_relaxed);
    if (a) return (dz_isa)a;
    dz_error err;
    if (dz_isa_from_env(&err) != DZ_OK) {
        dz_log(DZ_LOG_WARN, "%s; using %s", err.msg, dz_isa_name(dz_isa_best()));
        dz_isa_force(DZ_ISA_AUTO, NULL);
    } else if (!atomic_load_explicit(&g_active, memory_order_relaxed)) {
        dz_isa_force(DZ_ISA_AUTO, NULL);
    }
    return (dz_isa)atomic_load_explicit(&g_active, memory_order_relaxed);
}
