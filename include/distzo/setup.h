/* The one setup path of train, export and bench: the master weights (in memory, one copy
 * shared by a node's ranks, or a disk store), then a forward and the ZO engine over them.
 * Two calls, because what the forward must hold (batch, sequence length) is known only
 * once the caller has read the model's config and built its data. */
#ifndef DISTZO_SETUP_H
#define DISTZO_SETUP_H

#include "distzo/model.h"
#include "distzo/parallel.h"
#include "distzo/store.h"
#include "distzo/zo.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dz_zo_setup dz_zo_setup;

typedef struct dz_weights_spec {
    const char *path;       /* the weights: HF folder, llama2.c .bin or a checkpoint */
    dz_dtype master_dtype;  /* F32 or BF16 */
    const char *store;      /* NULL or "ram": in memory; "disk:PATH", "disk-nocache:PATH": layer masters in a file */
    dz_comm *comm;          /* NULL: one process; several ranks on a node share one copy in memory */
    /* Other files the run reads (its data): a disk store is never placed on one of them,
     * nor on the weights' own files (compared by device and inode, not by name). */
    const char *const *inputs;
    int n_inputs;
    /* Adapter training (--peft lora): non-NULL, the masters are a LoRA adapter over the base
     * model `base` (NULL: path), loaded read-only as master_dtype; the adapter is path's
     * when path is a PEFT folder (a checkpoint), else lora_init's, else made new from lora_seed. */
    const dz_lora_spec *lora;
    const char *base;
    uint64_t lora_seed;
    const char *lora_init;  /* a PEFT folder the adapter starts from when path is not one (NULL: new) */
    unsigned base_flags;    /* dz_model_load_flags of the base (DZ_LOAD_KEEP_QUANTIZED) */
} dz_weights_spec;

typedef struct dz_engine_spec {
    int max_batch, max_len; /* the forward: sequences and tokens it holds */
    int streams;            /* activation streams: 2, or 4 for tree batches (shared prompts) */
    dz_zo_params zo;
    int max_resident_mb;    /* with a disk store: refuse to start above this many MB resident (0: no cap) */
    int stream_globals;     /* with a disk store: the global block stays in it too */
    int signs;              /* with a process group: the forwards this rank runs (1: +eps, 2: -eps, 3: both) */
    const char *backend;    /* the backend the forward and the ZO ops run on (dz_backend_create; NULL: cpu) */
} dz_engine_spec;

/* Loads the weights and puts the masters where spec says. A disk store is rebuilt from
 * the loaded weights, so a resume never trusts a store a crash may have torn. */
dz_status dz_setup_weights(const dz_weights_spec *spec, dz_zo_setup **out, dz_error *err);
/* Then the forward and the engine over the masters: with a disk store what stays
 * resident, with a process group this rank's share of the work. */
dz_status dz_setup_engine(dz_zo_setup *s, const dz_engine_spec *spec, dz_error *err);

dz_model *dz_setup_model(const dz_zo_setup *s);         /* the masters: the model, or the adapter */
dz_model *dz_setup_base_model(const dz_zo_setup *s);    /* the model the forward runs (the base under an adapter) */
dz_forward *dz_setup_forward(const dz_zo_setup *s);    /* NULL before dz_setup_engine */
dz_zo_engine *dz_setup_zo_engine(const dz_zo_setup *s); /* NULL before dz_setup_engine */
dz_store *dz_setup_store(const dz_zo_setup *s);         /* NULL: the masters are in memory */
/* Frees the engine, the store, the forward and the model. NULL is fine. */
void dz_setup_free(dz_zo_setup *s);
/* After a start that failed (a refused option, a bad data file): removes the disk store's
 * file, which every start rebuilds from the weights, so a refused run leaves no file of the
 * model's size behind. The store stays open until dz_setup_free. No store: nothing. */
void dz_setup_discard_store(dz_zo_setup *s);

#ifdef __cplusplus
}
#endif

#endif
