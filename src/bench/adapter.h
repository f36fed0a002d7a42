/* The adapter a benchmark trains under --peft (bench step, bench eval): train's settings and
 * checks, the init from seed 1 (the benchmarks' steps' seed). */
#ifndef DZ_BENCH_ADAPTER_H
#define DZ_BENCH_ADAPTER_H

#include "distzo/distzo.h"

/* c: train's defaults with model, seed 1 and peft (no init folder), checked as train checks
 * them; --keep-quantized is refused without an adapter (a full step updates the base). */
dz_status dz_bench_adapter_config(const char *model, const dz_train_peft *peft, dz_train_config *c, dz_error *err);

#endif
