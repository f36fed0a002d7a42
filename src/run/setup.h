/* What the run's commands share beyond the public setup path (distzo/setup.h). */
#ifndef DZ_RUN_SETUP_H
#define DZ_RUN_SETUP_H

#include <stddef.h>

#include "distzo/error.h"
#include "distzo/model.h"

/* The tokenizer beside a model, found from its config without loading its weights:
 * its path in out (cap bytes); DZ_ERR_NOT_FOUND naming the model when there is none. */
dz_status dz_setup_base_tokenizer(const char *model, char *out, size_t cap, dz_error *err);

/* An adapter whose masters live in a disk store (flushed): a copy in memory read from it, for
 * writing the PEFT folder (checkpoints, export). */
struct dz_store;
dz_status dz_setup_adapter_from_store(const dz_model *adapter, struct dz_store *store, dz_model **out, dz_error *err);

#endif
