/* The compute of a run (floor 1 of src/run; see trainer.h for the floors): the process
 * group and its layout, the weights, the forward and the ZO engine over them, and the
 * tokenizer. It knows nothing of the examples or the run folder. */
#ifndef DZ_RUN_COMPUTE_H
#define DZ_RUN_COMPUTE_H

#include "distzo/distzo.h"
#include "distzo/setup.h"
#include "distzo/train.h"
#include "parallel/layout.h"

typedef struct dz_compute {
    const dz_train_config *cfg;       /* the settings it is made from (the caller's) */
    dz_comm *comm, *own_comm;         /* own_comm: a one-process group made here */
    dz_layout lay;
    int rank0;                        /* world rank 0 (owns the run folder, logs) */
    int node_shared;                  /* the node's ranks share one copy of the masters */
    int verify_warned;                /* --verify-every said once that there is one copy only */
    dz_zo_setup *setup;               /* owns the four below */
    dz_model *m;
    dz_store *store;                  /* --store disk:PATH: the layer masters */
    dz_forward *f;                    /* NULL before dz_compute_engine */
    dz_zo_engine *e;                  /* NULL before dz_compute_engine */
    dz_tokenizer *tok;
    char lora_init_fingerprint[17];   /* --adapter DIR's file when the run starts from it (run.json keeps it) */
    char model_table[17];             /* the base's table fingerprint (run.json's model_table) */
} dz_compute;

/* compute.c: a zeroed compute's start: its settings and its communicator (comm, or NULL:
 * a one-process group of its own). */
dz_status dz_compute_begin(dz_compute *c, const dz_train_config *cfg, dz_comm *comm, dz_error *err);
/* The layout, the weights (from `weights`; from_checkpoint: its own tokenizer comes
 * first) and the tokenizer. */
dz_status dz_compute_load(dz_compute *c, const char *weights, int from_checkpoint, dz_error *err);
/* The forward and the engine, sized by es. */
dz_status dz_compute_engine(dz_compute *c, const dz_engine_spec *es, dz_error *err);
/* Frees what begin, load and engine made. */
void dz_compute_free(dz_compute *c);
/* A fingerprint of a tensor table: its names and shapes (federated workers use it too). */
uint64_t dz_compute_table_hash(const dz_param_table *t);

/* replicas.c: the weights' checksum (--verify-every's, written with each checkpoint): the
 * masters hashed, a node's slices summed. Collective over the node with shared masters. */
dz_status dz_compute_weights_checksum(const dz_compute *c, uint64_t *sum, dz_error *err);
/* --verify-every: the nodes' masters compared by checksum after step done. */
dz_status dz_compute_verify_replicas(dz_compute *c, int done, dz_error *err);

#endif
