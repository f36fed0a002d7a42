/* What the run's commands share beyond the public setup path (distzo/setup.h). */
#ifndef DZ_RUN_SETUP_H
#define DZ_RUN_SETUP_H

#include <stddef.h>

#include "distzo/error.h"

/* The tokenizer beside a model, found from its config without loading its weights:
 * its path in out (cap bytes); DZ_ERR_NOT_FOUND naming the model when there is none. */
dz_status dz_setup_base_tokenizer(const char *model, char *out, size_t cap, dz_error *err);

#endif
