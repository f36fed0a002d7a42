// A C++ program against the installed headers: every public header included, a few calls
// linked (the headers' extern "C": without it every name is mangled and the link fails).
// usage: consumer_cpp MODEL  -> "params N" (the model's parameter table)
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
    const dz_param_table *t = dz_model_params(m);
    long long n = 0;
    for (int i = 0; i < t->count; i++) n += dz_param_numel(&t->params[i]);
    std::printf("params %lld (distzo %s)\n", n, DISTZO_VERSION);
    dz_model_free(m);
    return 0;
}
