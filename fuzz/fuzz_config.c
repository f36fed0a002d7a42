/* libFuzzer target for config.json (OPT and the LLaMA family). Beyond "does not crash":
 * a config that loads passes dz_config_validate and gives a parameter table whose sizes
 * are consistent (no overflow: every count positive and the total their sum). */
#include "fuzz_input.h"

#include "distzo/model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    dz_config cfg;
    dz_error err;
    const char *path = fuzz_file(0, data, size);
    if (dz_config_from_hf_json(path, &cfg, &err) != DZ_OK) return 0;
    if (dz_config_validate(&cfg, path, &err) != DZ_OK) abort(); /* the loader validates */
    dz_param_table t;
    if (dz_param_table_build(&cfg, &t, &err) != DZ_OK) return 0;
    int64_t total = 0;
    for (int i = 0; i < t.count; i++) {
        const int64_t n = dz_param_numel(&t.params[i]);
        if (n <= 0 || t.params[i].rows <= 0 || t.params[i].cols <= 0) abort();
        total += n;
    }
    if (total != dz_param_table_numel(&t)) abort();
    dz_param_table_free(&t);
    return 0;
}
