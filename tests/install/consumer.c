/* A program built against an installed distzo (tests/cli/install.sh builds it once with
 * pkg-config and once with find_package(distzo)): only <distzo/distzo.h> and libdistzo.
 *
 *   consumer train MODEL TOKENIZER TRAIN TEST OUT   a few ZO steps of SST-2 into the run
 *                                                   folder OUT, then the checksum of its
 *                                                   final checkpoint
 *   consumer sum WEIGHTS                            the checksum of any weights distzo loads
 *
 * The checksum is FNV-1a over every tensor's float32 values in the parameter table's
 * order, computed here, so two programs agree on it only when the weights are the same. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "distzo/distzo.h"

/* The settings tests/cli/install.sh gives `distzo train`. */
enum { STEPS = 4 };

static int fail(const char *what, const dz_error *err) {
    fprintf(stderr, "consumer: %s: %s\n", what, err->msg);
    return 1;
}

static uint64_t fnv1a(uint64_t h, const void *data, size_t n) {
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

static int print_checksum(const char *weights) {
    dz_error err = {0};
    dz_model *m = NULL;
    if (dz_model_load(weights, DZ_F32, &m, &err) != DZ_OK) return fail(weights, &err);
    const dz_param_table *t = dz_model_params(m);
    uint64_t h = 0xcbf29ce484222325ull;
    for (int id = 0; id < t->count; id++)
        h = fnv1a(h, dz_model_tensor(m, id), (size_t)dz_param_numel(&t->params[id]) * sizeof(float));
    printf("checksum %016llx (%d tensors, %lld values)\n", (unsigned long long)h, t->count,
           (long long)dz_param_table_numel(t));
    dz_model_free(m);
    return 0;
}

static int train(char **argv) {
    dz_error err = {0};
    if (dz_runtime_init(1, &err) != DZ_OK) return fail("runtime", &err);
    dz_train_config c;
    dz_train_config_default(&c);
    c.model = argv[0];
    c.tokenizer = argv[1];
    c.data.train = argv[2];
    c.data.test = argv[3];
    c.data.label_words = "bad,good";
    c.out_dir = argv[4];
    c.data.train_examples = 32;
    c.data.dev_examples = 8;
    c.data.seed = 42;
    c.optim.batch = 4;
    c.optim.steps = STEPS;
    c.optim.lr = 1e-3f;
    c.optim.eps = 1e-3f;
    c.optim.seed = 7;
    c.schedule.eval_every = 0;
    c.schedule.checkpoint_every = STEPS;
    dz_train_result res;
    if (dz_train(&c, 0, NULL, NULL, &res, &err) != DZ_OK) return fail(c.out_dir, &err);
    printf("trained %d steps, dev accuracy %.4f\n", res.steps_done, res.final_dev);
    char checkpoint[4096];
    snprintf(checkpoint, sizeof checkpoint, "%s/checkpoint-%d", c.out_dir, STEPS);
    return print_checksum(checkpoint);
}

int main(int argc, char **argv) {
    printf("distzo %s\n", DISTZO_VERSION);
    if (argc == 7 && !strcmp(argv[1], "train")) return train(argv + 2);
    if (argc == 3 && !strcmp(argv[1], "sum")) return print_checksum(argv[2]);
    fprintf(stderr, "usage: consumer train MODEL TOKENIZER TRAIN TEST OUT | consumer sum WEIGHTS\n");
    return 2;
}
