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

/* A resumed run's own disk store (store_spec as its run.json says), written before stores
 * were marked (distzo 0.3): marked now, if it is a safetensors file with no config.json
 * beside it (the rule of then), so the resume may replace it. Anything else: nothing. */
dz_status dz_setup_adopt_store(const char *store_spec, dz_error *err);

#endif
