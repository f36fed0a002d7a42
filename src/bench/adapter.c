/* The adapter settings of the benchmarks: see adapter.h. */
#include "bench/adapter.h"

#include "run/peft.h"

dz_status dz_bench_adapter_config(const char *model, const dz_train_peft *peft, dz_train_config *c, dz_error *err) {
    dz_train_config_default(c);
    c->model = model, c->optim.seed = 1, c->peft = *peft, c->peft.lora_init = NULL;
    dz_lora_spec lora;
    dz_status st = dz_train_peft_check(c, err);
    if (st == DZ_OK && c->peft.keep_quantized && !dz_train_peft_lora(c, &lora))
        st = dz_fail(err, DZ_ERR_INVALID, "--keep-quantized: only with --peft lora or prefix (a full step updates the base)");
    return st;
}
