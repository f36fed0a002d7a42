/* A LoRA adapter in the forward pass: each targeted projection y = x W^T (+ b) gets
 * (alpha / r) (x A^T) B^T added, PEFT's order (A, then B, then the scale, then the sum).
 * The base's tensors and the adapter's come in one t[] (the adapter's at their roles), so
 * the ZO engine hands its perturbed adapter copies in beside the read-only base. */
#include <math.h>
#include <string.h>

#include "core/util.h"
#include "model/forward_internal.h"

/* The adapter's largest layer, in floats. */
static size_t adapter_layer_floats(const dz_model *a) {
    size_t most = 0;
    for (int l = 0; l < a->cfg.n_layers; l++) {
        size_t n = 0;
        for (int i = 0; i < a->table.count; i++)
            if (a->table.params[i].block == l) n += (size_t)dz_param_numel(&a->table.params[i]);
        most = n > most ? n : most;
    }
    return most;
}

/* The widest output of the projections the adapter targets (B is [out, r]): its products'
 * buffer needs no more columns. */
static size_t adapter_widest_output(const dz_model *a) {
    size_t most = 0;
    for (int l = 0; l < a->cfg.n_layers; l++)
        for (int k = 0; k < DZ_LORA_N_TARGETS; k++) {
            const int id = a->ids[l][dz_lora_a_role(k) + 1];
            if (id >= 0 && (size_t)a->table.params[id].rows > most) most = (size_t)a->table.params[id].rows;
        }
    return most;
}

void dz_forward_lora_free(dz_forward *f) {
    float *bufs[] = {f->lora_r, f->lora_o, f->lora_w};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) f->be->ops->free(f->be, bufs[i]);
    f->lora_r = f->lora_o = f->lora_w = NULL;
    dz_free(f->lora_host);
    f->lora_host = NULL;
    dz_forward_prefix_free(f);
    f->lora = NULL;
    f->bytes -= f->lora_bytes;
    f->lora_bytes = 0;
}

dz_status dz_forward_set_adapter(dz_forward *f, const dz_model *adapter, const dz_weight_source *src, dz_error *err) {
    const dz_config *c = &f->m->cfg;
    if (!adapter || !adapter->is_lora) return dz_fail(err, DZ_ERR_INVALID, "forward: not an adapter");
    if (adapter->cfg.n_layers != c->n_layers || adapter->cfg.dim != c->dim || adapter->cfg.hidden_dim != c->hidden_dim ||
        adapter->cfg.arch != c->arch)
        return dz_fail(err, DZ_ERR_INVALID, "forward: the adapter %s was made for another model's shape", adapter->path);
    dz_forward_lora_free(f);
    const size_t rows = (size_t)f->max_batch * f->max_seq;
    const size_t widest = adapter_widest_output(adapter);
    const int prefix = adapter->lora.prefix_tokens > 0; /* no products: only a layer's tensors */
    const size_t sizes[3] = {prefix ? 0 : rows * (size_t)adapter->lora.rank, prefix ? 0 : rows * widest,
                             adapter_layer_floats(adapter)};
    float **bufs[3] = {&f->lora_r, &f->lora_o, &f->lora_w};
    for (int i = 0; i < 3; i++) {
        if (sizes[i] == 0) continue;
        *bufs[i] = f->be->ops->alloc(f->be, sizes[i] * sizeof(float));
        if (!*bufs[i]) {
            dz_forward_lora_free(f);
            return dz_fail(err, DZ_ERR_NOMEM, "forward: cannot allocate the adapter's buffers");
        }
        f->lora_bytes += sizes[i] * sizeof(float), f->bytes += sizes[i] * sizeof(float); /* dz_forward_bytes counts them */
    }
    const size_t host = sizes[1] > sizes[2] ? sizes[1] : sizes[2];
    if (!f->be->host_buffers && !(f->lora_host = dz_alloc(host * sizeof(float)))) { /* staging, scaling */
        dz_forward_lora_free(f);
        return dz_fail(err, DZ_ERR_NOMEM, "forward: cannot allocate the adapter's host buffer");
    }
    dz_status st = prefix ? dz_forward_prefix_attach(f, adapter->lora.prefix_tokens, err) : DZ_OK;
    if (st != DZ_OK) {
        dz_forward_lora_free(f);
        return st;
    }
    f->lora = adapter;
    f->lora_src = src ? *src : dz_model_weights(adapter);
    f->lora_scale = prefix ? 0.0f : adapter->lora.alpha / (float)adapter->lora.rank;
    return DZ_OK;
}

void dz_forward_lora_fetch(dz_forward *f, int s, int l, const float **t) {
    for (int r = DZ_L_LORA_FIRST; r < DZ_L_LORA_END; r++) t[r] = NULL;
    if (!f->lora) return;
    size_t off = 0;
    for (int r = DZ_L_LORA_FIRST; r < DZ_L_LORA_END; r++) {
        const int id = f->lora->ids[l][r];
        if (id < 0) continue;
        const dz_param *p = &f->lora->table.params[id];
        const size_t n = (size_t)dz_param_numel(p);
        float *rows_at = f->be->host_buffers ? f->lora_w : f->lora_host; /* host rows, then uploaded */
        const float *src = f->lora_src.rows(f->lora_src.self, s, id, 0, p->rows, rows_at + off);
        t[r] = f->be->ops->upload_view(f->be, f->lora_w + off, src, n * sizeof(float));
        off += n;
    }
}

void dz_forward_lora_add(dz_forward *f, float *y, const float *in, const float *const *t, int role, int N, int out,
                         int in_dim) {
    int target = -1;
    for (int k = 0; k < DZ_LORA_N_TARGETS && target < 0; k++)
        if (dz_lora_base_role(k) == role) target = k;
    const float *a = t[dz_lora_a_role(target)], *b = t[dz_lora_a_role(target) + 1];
    if (!a || !b) return;
    const dz_backend *be = f->be;
    const int r = f->lora->lora.rank;
    be->ops->matmul(be, f->lora_r, in, a, NULL, N, r, in_dim);
    be->ops->matmul(be, f->lora_o, f->lora_r, b, NULL, N, out, r);
    be->ops->synchronize(be);
    const size_t n = (size_t)N * out;
    float *h = be->host_buffers ? f->lora_o : f->lora_host; /* the scale on the host: no backend op scales */
    if (!be->host_buffers) be->ops->download(be, h, f->lora_o, n * sizeof(float));
    for (size_t i = 0; i < n; i++) h[i] *= f->lora_scale;
    if (!be->host_buffers) be->ops->upload(be, f->lora_o, h, n * sizeof(float));
    be->ops->add(be, y, f->lora_o, n);
}
