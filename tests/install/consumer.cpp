// A C++ program against the installed headers: every public header included, and a call
// from several of them linked (each header's extern "C": without it the names are mangled
// and the link fails). usage: consumer_cpp MODEL  -> "params N (distzo V)"
#include <distzo/distzo.h>
#include <distzo/benchmarks.h>
#include <distzo/federated.h>
#include <distzo/progress.h>

#include <cstdio>

int main(int argc, char **argv) {
    if (argc != 2) return 2;
    dz_error err = {};
    dz_model *m = nullptr;
    if (dz_model_load(argv[1], DZ_F32, &m, &err) != DZ_OK) {
        std::fprintf(stderr, "%s: %s\n", dz_status_name(err.code), err.msg);
        return 1;
    }
    dz_train_config tc;       // train.h
    dz_train_config_default(&tc);
    dz_fed_settings fs;       // federated.h
    dz_fed_settings_default(&fs);
    dz_dtype f32;             // dtype.h
    if (dz_dtype_parse("f32", &f32) != 0 || tc.optim.batch < 1) return 1;
    dz_log_set_level(DZ_LOG_WARN); // log.h
    const dz_param_table *t = dz_model_params(m);
    long long n = 0;
    for (int i = 0; i < t->count; i++) n += dz_param_numel(&t->params[i]);
    std::printf("params %lld (distzo %s)\n", n, DISTZO_VERSION);
    dz_model_free(m);
    return 0;
}
