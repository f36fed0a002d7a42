/* A prefix adapter in the forward pass (docs/ADAPTERS.md): each layer's N virtual keys and
 * values come in t[] at DZ_L_PREFIX_K/V and the attention sees them before every
 * sequence's own keys (dz_attn_args' virtual rows); the sequence's tokens sit at positions
 * N, N+1, ... as under Hugging Face's past_key_values, so the virtual keys are used as
 * given (never rotated again). Also MeZO's init: the keys and values of real tokens. */
#include <stdlib.h>
#include <string.h>

#include "model/forward_internal.h"

void dz_forward_prefix_free(dz_forward *f) {
    f->be->ops->free(f->be, f->virt_rope);
    f->be->ops->free(f->be, f->virt_scratch);
    f->virt_rope = f->virt_scratch = NULL;
    f->n_virtual = 0;
}

/* The rotary table of positions 0 .. max_seq + N - 1, computed on the host. */
static dz_status fill_rope(dz_forward *f, int positions, dz_error *err) {
    const dz_config *c = &f->m->cfg;
    const size_t bytes = (size_t)positions * c->head_dim * sizeof(float);
    float *host = malloc(bytes);
    f->virt_rope = f->be->ops->alloc(f->be, bytes);
    if (!host || !f->virt_rope) {
        free(host);
        return dz_fail(err, DZ_ERR_NOMEM, "forward: cannot allocate the prefix's rotary table");
    }
    dz_rope_table_fill(host, positions, c->head_dim, c->rope_theta);
    f->be->ops->upload(f->be, f->virt_rope, host, bytes);
    f->lora_bytes += bytes, f->bytes += bytes;
    free(host);
    return DZ_OK;
}

dz_status dz_forward_prefix_attach(dz_forward *f, int n_tokens, dz_error *err) {
    const dz_config *c = &f->m->cfg;
    const int keys = f->max_seq + n_tokens;
    if (c->pos_offset > 0 && keys > c->max_seq_len) /* learned positions: the last must exist */
        return dz_fail(err, DZ_ERR_INVALID, "forward: %d prefix tokens and sequences of %d tokens need %d positions; "
                       "the model has %d", n_tokens, f->max_seq, keys, c->max_seq_len);
    const size_t scratch = (size_t)f->scratch_threads * dz_attn_scratch_floats(c->head_dim, keys) * sizeof(float);
    if (!(f->virt_scratch = f->be->ops->alloc(f->be, scratch)))
        return dz_fail(err, DZ_ERR_NOMEM, "forward: cannot allocate the prefix's attention scratch");
    f->lora_bytes += scratch, f->bytes += scratch;
    dz_status st = c->arch == DZ_ARCH_LLAMA ? fill_rope(f, keys, err) : DZ_OK;
    if (st == DZ_OK) f->n_virtual = n_tokens;
    return st;
}

/* Layer l's keys and values of the one sequence the forward ran, positions 0 .. n-1. */
static void take_layer(dz_forward *f, int l, int n, dz_model *adapter) {
    const size_t kvd = (size_t)f->m->cfg.n_kv_heads * f->m->cfg.head_dim;
    const size_t lo = (size_t)l * f->max_batch * f->max_seq * kvd;
    const int k = adapter->ids[l][DZ_L_PREFIX_K], v = adapter->ids[l][DZ_L_PREFIX_V];
    f->be->ops->download(f->be, adapter->data[k], f->st[0].kcache + lo, (size_t)n * kvd * sizeof(float));
    f->be->ops->download(f->be, adapter->data[v], f->st[0].vcache + lo, (size_t)n * kvd * sizeof(float));
}

dz_status dz_forward_prefix_init(const dz_model *base, const int *tokens, int n, dz_model *adapter, dz_error *err) {
    dz_forward *f = NULL;
    dz_status st = dz_forward_create(base, 1, n, 1, &f, err); /* a KV cache: every layer's keys are kept */
    const dz_weight_source w = dz_model_weights(base);
    if (st == DZ_OK) st = dz_forward_run(f, &w, tokens, NULL, 1, n, 0, err);
    if (st == DZ_OK) f->be->ops->synchronize(f->be);
    for (int l = 0; st == DZ_OK && l < base->cfg.n_layers; l++) take_layer(f, l, n, adapter);
    dz_forward_free(f);
    return st;
}
