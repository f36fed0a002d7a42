/* For the target that compiles src/run/checkpoint_files.c (fuzz_run_state):
 * writing a checkpoint saves a model and its tokenizer, which this target never does, so
 * the model and tokenizer layers are not linked (their libraries do not build with clang's
 * warnings as errors, and they would add nothing to the fuzzing). Each stands-in aborts:
 * a target that reached one would crash, never pass. Signatures come from the headers. */
#include <stdlib.h>

#include "distzo/model.h"
#include "distzo/tokenizer.h"

dz_status dz_config_write_hf_json(const dz_config *cfg, const char *path, dz_dtype dtype, dz_error *err) {
    (void)cfg, (void)path, (void)dtype, (void)err;
    abort();
}

const dz_config *dz_model_config(const dz_model *m) {
    (void)m;
    abort();
}

dz_dtype dz_model_dtype(const dz_model *m) {
    (void)m;
    abort();
}

dz_status dz_model_save_hf(const dz_model *m, const char *dir, dz_error *err) {
    (void)m, (void)dir, (void)err;
    abort();
}

dz_status dz_tokenizer_save_hf(const dz_tokenizer *tok, const char *dir, dz_error *err) {
    (void)tok, (void)dir, (void)err;
    abort();
}
