/* The process's compute runtime: which kernels run, on how many threads, on what CPU.
 * Every kernel level computes the same bits (src/core/isa.h); only the speed differs. */
#ifndef DISTZO_RUNTIME_H
#define DISTZO_RUNTIME_H

#include <stddef.h>

#include "distzo/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Applies DISTZO_ISA (baseline|avx2|avx512; an error naming the variable for an unknown
 * level or one this machine cannot run) and sets the thread count (threads <= 0: the
 * pool's default, $OMP_NUM_THREADS, else every CPU this process may use). Call at start,
 * before any compute. */
dz_status dz_runtime_init(int threads, dz_error *err);

int dz_runtime_threads(void);              /* threads compute uses */
const char *dz_runtime_kernels(void);      /* the kernel level in force: "baseline", "avx2", "avx512" */
const char *dz_runtime_best_kernels(void); /* the best level this CPU and OS allow */
const char *dz_runtime_gemm(void);         /* the GEMM in force, in words */
/* The CPU in one line: vendor, family/model, brand, the ISA bits the OS lets run.
 * Truncated to cap; returns out. */
char *dz_runtime_cpu(char *out, size_t cap);
/* Peak resident set size of this process in bytes (VmHWM; 0 where /proc cannot say). */
size_t dz_runtime_peak_rss(void);

#ifdef __cplusplus
}
#endif

#endif
