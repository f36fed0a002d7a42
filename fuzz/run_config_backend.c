/* For the targets that compile src/run/train_config.c (fuzz_run_config, fuzz_run_state):
 * dz_train_config_check asks the backend registry whether --store disk can go with
 * --backend. The layout (the backend included) is never part of run.json, so in these
 * targets the name is always NULL, for which the library's answers are these: no backend
 * by that name, and with no backend nothing to refuse. Linking the real registry would
 * bring in every backend (and their libraries) for a call that cannot vary here. */
#include <stdlib.h>

#include "backend/backend.h"
#include "run/setup.h"

const dz_backend *dz_backend_by_name(const char *name) {
    if (name) abort(); /* a name would need the real registry: never pass silently */
    return NULL;
}

dz_status dz_setup_check_store_backend(const char *store_spec, const dz_backend *be, dz_error *err) {
    (void)store_spec, (void)err;
    if (be) abort();
    return DZ_OK;
}
