/* The compute of a run (compute.h): the layout, the weights, the tokenizer, the engine. */
#include <stdio.h>
#include <string.h>

#include "core/hash.h"
#include "parallel/comm.h"
#include "run/compute.h"
#include "run/peft.h"
#include "run/setup.h"

/* The parallel layout: this rank's forwards and examples, and how it updates masters it
 * shares with its node. */
static dz_status setup_layout(dz_compute *c, dz_error *err) {
    const dz_train_layout *l = &c->cfg->layout;
    const int batch = c->cfg->optim.batch;
    dz_status st = dz_layout_make(dz_comm_size(c->comm), dz_comm_rank(c->comm), l->pertp, l->dp, &c->lay, err);
    if (st != DZ_OK) return st;
    if (batch < c->lay.d)
        return dz_fail(err, DZ_ERR_INVALID, "--batch %d is smaller than the %d data-parallel groups (--dp)", batch,
                       c->lay.d);
    c->rank0 = c->lay.rank == 0;
    c->node_shared = dz_comm_node_size(c->comm) > 1;
    return DZ_OK;
}

/* The tokenizer: --tokenizer, a checkpoint's own (llama2.c models carry tokenizer.bin),
 * else the base model's. */
static dz_status load_tokenizer(dz_compute *c, int from_checkpoint, dz_error *err) {
    char base_tok[4200];
    const char *tp = c->cfg->tokenizer;
    if (!tp && from_checkpoint) tp = dz_model_tokenizer_path(c->m);
    dz_status st = DZ_OK;
    if (!tp && (st = dz_setup_base_tokenizer(c->cfg->model, base_tok, sizeof base_tok, err)) != DZ_OK) return st;
    tp = tp ? tp : base_tok;
    st = dz_tokenizer_load(tp, dz_model_config(c->m)->vocab_size, &c->tok, err);
    const int tv = st == DZ_OK ? dz_tokenizer_vocab_size(c->tok) : 0, mv = dz_model_config(c->m)->vocab_size;
    if (st == DZ_OK && tv > mv) /* found here, not at the first forward */
        st = dz_fail(err, DZ_ERR_INVALID, "%s: the tokenizer has %d tokens but the model %s has a vocabulary of %d", tp,
                     tv, c->cfg->model, mv);
    return st;
}

dz_status dz_compute_begin(dz_compute *c, const dz_train_config *cfg, dz_comm *comm, dz_error *err) {
    c->cfg = cfg;
    c->comm = comm;
    if (!comm) {
        dz_status st = dz_comm_init(NULL, NULL, 0, 0, &c->own_comm, err);
        if (st != DZ_OK) return st;
        c->comm = c->own_comm;
    }
    c->rank0 = dz_comm_rank(c->comm) == 0;
    return DZ_OK;
}

dz_status dz_compute_load(dz_compute *c, const char *weights, int from_checkpoint, dz_error *err) {
    const dz_train_config *t = c->cfg;
    dz_status st = setup_layout(c, err);
    const char *const inputs[] = {t->data.train, t->data.test, t->tokenizer};
    dz_weights_spec ws = {.path = weights, .master_dtype = t->store.master_dtype, .store = t->store.spec,
                          .comm = c->comm, .inputs = inputs, .n_inputs = 3};
    dz_lora_spec lora;
    dz_train_peft_weights(t, &ws, &lora);
    if (st == DZ_OK) st = dz_train_peft_init_fingerprint(t, weights, c->lora_init_fingerprint, err);
    if (st == DZ_OK) st = dz_setup_weights(&ws, &c->setup, err);
    if (st != DZ_OK) return st;
    c->m = dz_setup_model(c->setup), c->store = dz_setup_store(c->setup);
    return load_tokenizer(c, from_checkpoint, err);
}

dz_status dz_compute_engine(dz_compute *c, const dz_engine_spec *es, dz_error *err) {
    dz_status st = dz_setup_engine(c->setup, es, err);
    c->f = dz_setup_forward(c->setup), c->e = dz_setup_zo_engine(c->setup);
    return st;
}

void dz_compute_free(dz_compute *c) {
    dz_setup_free(c->setup);
    dz_tokenizer_free(c->tok);
    dz_comm_finalize(c->own_comm);
    memset(c, 0, sizeof *c);
}

uint64_t dz_compute_table_hash(const dz_param_table *t) {
    uint64_t h = dz_hash_u64(DZ_HASH_START, (uint64_t)t->count);
    for (int i = 0; i < t->count; i++) {
        h = dz_hash_str(h, t->params[i].hf_name);
        h = dz_hash_u64(h, (uint64_t)t->params[i].rows);
        h = dz_hash_u64(h, (uint64_t)t->params[i].cols);
    }
    return h;
}
