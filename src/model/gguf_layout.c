/* The parameter table's GGUF names and the rotary row permutation (gguf_layout.h). */
#include "model/gguf_layout.h"

#include <stdio.h>

void dz_gguf_tensor_name(const dz_param *p, int n_layers, char *out, size_t cap) {
    if (p->block == n_layers) {
        const char *n = p->role == DZ_G_TOK_EMB ? "token_embd" : p->role == DZ_G_FINAL_NORM_W ? "output_norm" : "output";
        snprintf(out, cap, "%s.weight", n);
        return;
    }
    static const struct { int role; const char *name; } layer[] = {
        {DZ_L_ATTN_NORM_W, "attn_norm.weight"}, {DZ_L_WQ, "attn_q.weight"},    {DZ_L_BQ, "attn_q.bias"},
        {DZ_L_WK, "attn_k.weight"},             {DZ_L_BK, "attn_k.bias"},      {DZ_L_WV, "attn_v.weight"},
        {DZ_L_BV, "attn_v.bias"},               {DZ_L_WO, "attn_output.weight"}, {DZ_L_FFN_NORM_W, "ffn_norm.weight"},
        {DZ_L_W_UP, "ffn_up.weight"},           {DZ_L_W_GATE, "ffn_gate.weight"}, {DZ_L_W_DOWN, "ffn_down.weight"},
    };
    for (size_t i = 0; i < sizeof layer / sizeof layer[0]; i++)
        if (layer[i].role == p->role) {
            snprintf(out, cap, "blk.%d.%s", p->block, layer[i].name);
            return;
        }
    snprintf(out, cap, "blk.%d.<role %d>", p->block, p->role);
}

int64_t dz_gguf_model_row(int64_t row, int head_dim) {
    const int64_t head = row / head_dim, within = row % head_dim, half = head_dim / 2;
    return head * head_dim + (within % 2) * half + within / 2;
}

int64_t dz_gguf_file_row(int64_t row, int head_dim) {
    const int64_t head = row / head_dim, within = row % head_dim, half = head_dim / 2;
    return head * head_dim + 2 * (within % half) + within / half;
}

int dz_gguf_permuted(const dz_param *p, int n_layers, int interleaved_rope) {
    return interleaved_rope && p->block < n_layers && (p->role == DZ_L_WQ || p->role == DZ_L_WK);
}
