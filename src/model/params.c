/* The parameter table: which tensors an architecture has, their shapes and HF names. */
#include <stdio.h>
#include <stdlib.h>

#include "distzo/model.h"

typedef struct table_builder {
    dz_param_table *t;
    int cap;
} table_builder;

static int add_param(table_builder *b, int block, int role, int64_t rows, int64_t cols,
                     dz_param_kind kind, const char *name) {
    if (b->t->count == b->cap) {
        int cap = b->cap ? b->cap * 2 : 64;
        dz_param *p = realloc(b->t->params, (size_t)cap * sizeof *p);
        if (!p) return -1;
        b->t->params = p;
        b->cap = cap;
    }
    dz_param *p = &b->t->params[b->t->count++];
    p->block = block;
    p->role = role;
    p->rows = rows;
    p->cols = cols;
    p->kind = kind;
    snprintf(p->hf_name, sizeof p->hf_name, "%s", name);
    return 0;
}

#define ADD(block, role, rows, cols, kind, ...)                                \
    do {                                                                        \
        char name_[96];                                                         \
        snprintf(name_, sizeof name_, __VA_ARGS__);                             \
        if (add_param(&b, block, role, rows, cols, kind, name_) != 0) goto oom; \
    } while (0)

static dz_status build_opt(const dz_config *c, table_builder *tb, dz_error *err) {
    table_builder b = *tb;
    const int64_t d = c->dim, f = c->hidden_dim, v = c->vocab_size, e = c->embed_dim;
    const int g = c->n_layers;
    for (int l = 0; l < c->n_layers; l++) {
        const char *pre = "model.decoder.layers";
        ADD(l, DZ_L_ATTN_NORM_W, 1, d, DZ_PARAM_NORM, "%s.%d.self_attn_layer_norm.weight", pre, l);
        ADD(l, DZ_L_ATTN_NORM_B, 1, d, DZ_PARAM_NORM, "%s.%d.self_attn_layer_norm.bias", pre, l);
        static const char *proj[] = {"q_proj", "k_proj", "v_proj", "out_proj"};
        static const int wrole[] = {DZ_L_WQ, DZ_L_WK, DZ_L_WV, DZ_L_WO};
        for (int i = 0; i < 4; i++) {
            ADD(l, wrole[i], d, d, DZ_PARAM_MATRIX, "%s.%d.self_attn.%s.weight", pre, l, proj[i]);
            int has_bias = i < 3 ? c->qkv_bias : c->out_bias;
            if (has_bias) ADD(l, wrole[i] + 1, 1, d, DZ_PARAM_BIAS, "%s.%d.self_attn.%s.bias", pre, l, proj[i]);
        }
        ADD(l, DZ_L_FFN_NORM_W, 1, d, DZ_PARAM_NORM, "%s.%d.final_layer_norm.weight", pre, l);
        ADD(l, DZ_L_FFN_NORM_B, 1, d, DZ_PARAM_NORM, "%s.%d.final_layer_norm.bias", pre, l);
        ADD(l, DZ_L_W_UP, f, d, DZ_PARAM_MATRIX, "%s.%d.fc1.weight", pre, l);
        if (c->out_bias) ADD(l, DZ_L_B_UP, 1, f, DZ_PARAM_BIAS, "%s.%d.fc1.bias", pre, l);
        ADD(l, DZ_L_W_DOWN, d, f, DZ_PARAM_MATRIX, "%s.%d.fc2.weight", pre, l);
        if (c->out_bias) ADD(l, DZ_L_B_DOWN, 1, d, DZ_PARAM_BIAS, "%s.%d.fc2.bias", pre, l);
    }
    ADD(g, DZ_G_TOK_EMB, v, e, DZ_PARAM_EMBEDDING, "model.decoder.embed_tokens.weight");
    ADD(g, DZ_G_POS_EMB, c->max_seq_len + c->pos_offset, d, DZ_PARAM_EMBEDDING,
        "model.decoder.embed_positions.weight");
    if (e != d) {
        ADD(g, DZ_G_PROJ_IN, d, e, DZ_PARAM_MATRIX, "model.decoder.project_in.weight");
        ADD(g, DZ_G_PROJ_OUT, e, d, DZ_PARAM_MATRIX, "model.decoder.project_out.weight");
    }
    if (c->final_norm) {
        ADD(g, DZ_G_FINAL_NORM_W, 1, d, DZ_PARAM_NORM, "model.decoder.final_layer_norm.weight");
        ADD(g, DZ_G_FINAL_NORM_B, 1, d, DZ_PARAM_NORM, "model.decoder.final_layer_norm.bias");
    }
    if (!c->tied_head) ADD(g, DZ_G_LM_HEAD, v, e, DZ_PARAM_MATRIX, "lm_head.weight");
    *tb = b;
    return DZ_OK;
oom:
    *tb = b;
    return dz_fail(err, DZ_ERR_NOMEM, "parameter table: out of memory");
}

static dz_status build_llama(const dz_config *c, table_builder *tb, dz_error *err) {
    table_builder b = *tb;
    const int64_t d = c->dim, f = c->hidden_dim, v = c->vocab_size;
    const int64_t qd = (int64_t)c->n_heads * c->head_dim, kvd = (int64_t)c->n_kv_heads * c->head_dim;
    const int g = c->n_layers;
    for (int l = 0; l < c->n_layers; l++) {
        const char *pre = "model.layers";
        ADD(l, DZ_L_ATTN_NORM_W, 1, d, DZ_PARAM_NORM, "%s.%d.input_layernorm.weight", pre, l);
        ADD(l, DZ_L_WQ, qd, d, DZ_PARAM_MATRIX, "%s.%d.self_attn.q_proj.weight", pre, l);
        if (c->qkv_bias) ADD(l, DZ_L_BQ, 1, qd, DZ_PARAM_BIAS, "%s.%d.self_attn.q_proj.bias", pre, l);
        ADD(l, DZ_L_WK, kvd, d, DZ_PARAM_MATRIX, "%s.%d.self_attn.k_proj.weight", pre, l);
        if (c->qkv_bias) ADD(l, DZ_L_BK, 1, kvd, DZ_PARAM_BIAS, "%s.%d.self_attn.k_proj.bias", pre, l);
        ADD(l, DZ_L_WV, kvd, d, DZ_PARAM_MATRIX, "%s.%d.self_attn.v_proj.weight", pre, l);
        if (c->qkv_bias) ADD(l, DZ_L_BV, 1, kvd, DZ_PARAM_BIAS, "%s.%d.self_attn.v_proj.bias", pre, l);
        ADD(l, DZ_L_WO, d, qd, DZ_PARAM_MATRIX, "%s.%d.self_attn.o_proj.weight", pre, l);
        ADD(l, DZ_L_FFN_NORM_W, 1, d, DZ_PARAM_NORM, "%s.%d.post_attention_layernorm.weight", pre, l);
        ADD(l, DZ_L_W_UP, f, d, DZ_PARAM_MATRIX, "%s.%d.mlp.up_proj.weight", pre, l);
        ADD(l, DZ_L_W_GATE, f, d, DZ_PARAM_MATRIX, "%s.%d.mlp.gate_proj.weight", pre, l);
        ADD(l, DZ_L_W_DOWN, d, f, DZ_PARAM_MATRIX, "%s.%d.mlp.down_proj.weight", pre, l);
    }
    ADD(g, DZ_G_TOK_EMB, v, d, DZ_PARAM_EMBEDDING, "model.embed_tokens.weight");
    ADD(g, DZ_G_FINAL_NORM_W, 1, d, DZ_PARAM_NORM, "model.norm.weight");
    if (!c->tied_head) ADD(g, DZ_G_LM_HEAD, v, d, DZ_PARAM_MATRIX, "lm_head.weight");
    *tb = b;
    return DZ_OK;
oom:
    *tb = b;
    return dz_fail(err, DZ_ERR_NOMEM, "parameter table: out of memory");
}

dz_status dz_param_table_build(const dz_config *cfg, dz_param_table *out, dz_error *err) {
    out->count = 0;
    out->params = NULL;
    table_builder b = {out, 0};
    dz_status st = cfg->arch == DZ_ARCH_OPT ? build_opt(cfg, &b, err) : build_llama(cfg, &b, err);
    if (st != DZ_OK) dz_param_table_free(out);
    return st;
}

void dz_param_table_free(dz_param_table *t) {
    if (!t) return;
    free(t->params);
    t->params = NULL;
    t->count = 0;
}

int dz_param_find(const dz_param_table *t, int block, int role) {
    for (int i = 0; i < t->count; i++)
        if (t->params[i].block == block && t->params[i].role == role) return i;
    return -1;
}

int64_t dz_param_numel(const dz_param *p) { return p->rows * p->cols; }

int64_t dz_param_table_numel(const dz_param_table *t) {
    int64_t n = 0;
    for (int i = 0; i < t->count; i++) n += dz_param_numel(&t->params[i]);
    return n;
}
