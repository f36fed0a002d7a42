/* llama2.c legacy checkpoints: 7 int32 header, then fp32 tensors grouped by kind
 * (all layers' wq, then all layers' wk, ...). Used in place through mmap, except wq and
 * wk: llama2.c rotates interleaved pairs (2i, 2i+1) as Meta's code does, HF rotates
 * (i, i + head_dim/2); their rows are permuted once at load (as HF's conversion script
 * does), so every model runs, trains and saves in the one HF layout. */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/io.h"
#include "core/util.h"
#include "model/model_internal.h"

typedef struct llama2c_header {
    int32_t dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len;
} llama2c_header;

static dz_status header_to_config(const llama2c_header *h, const char *path, dz_config *c, dz_error *err) {
    const struct { const char *name; int32_t v; } fields[] = {
        {"dim", h->dim}, {"hidden_dim", h->hidden_dim}, {"n_layers", h->n_layers},
        {"n_heads", h->n_heads}, {"n_kv_heads", h->n_kv_heads}, {"seq_len", h->seq_len}};
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        if (fields[i].v <= 0 || fields[i].v > (1 << 24))
            return dz_fail(err, DZ_ERR_FORMAT, "%s: header field %s = %d is not a sane size",
                           path, fields[i].name, (int)fields[i].v);
    if (h->vocab_size == 0 || h->vocab_size == INT32_MIN || (h->vocab_size < 0 ? -h->vocab_size : h->vocab_size) > (1 << 24))
        return dz_fail(err, DZ_ERR_FORMAT, "%s: header field vocab_size = %d is not a sane size", path, (int)h->vocab_size);
    memset(c, 0, sizeof *c);
    c->arch = DZ_ARCH_LLAMA;
    c->dim = h->dim;
    c->hidden_dim = h->hidden_dim;
    c->n_layers = h->n_layers;
    c->n_heads = h->n_heads;
    c->n_kv_heads = h->n_kv_heads;
    c->vocab_size = h->vocab_size < 0 ? -h->vocab_size : h->vocab_size;
    c->tied_head = h->vocab_size > 0; /* llama2.c: a negative vocab size means an own classifier */
    c->max_seq_len = h->seq_len;
    c->head_dim = h->n_heads ? h->dim / h->n_heads : 0;
    c->embed_dim = h->dim;
    c->pre_norm = 1;
    c->final_norm = 1;
    c->norm_eps = 1e-5f;
    c->rope_theta = 10000.0f;
    c->bos_id = 1;
    c->eos_id = 2;
    c->pad_id = -1;
    return dz_config_validate(c, path, err);
}

dz_status dz_config_from_llama2c(const char *path, dz_config *cfg, dz_error *err) {
    const int fd = dz_open_regular(path, err);
    if (fd < 0) return err ? err->code : DZ_ERR_IO;
    llama2c_header h;
    const ssize_t got = dz_io_pread(fd, &h, sizeof h, 0);
    close(fd);
    if (got != (ssize_t)sizeof h)
        return dz_fail(err, DZ_ERR_FORMAT, "%s: file of %zd bytes is shorter than the 28-byte header", path,
                       got < 0 ? (ssize_t)0 : got);
    return header_to_config(&h, path, cfg, err);
}

/* The order tensors appear in the file: (role, per-layer?) */
static const struct { int role; int per_layer; } file_order[] = {
    {DZ_G_TOK_EMB, 0}, {DZ_L_ATTN_NORM_W, 1}, {DZ_L_WQ, 1}, {DZ_L_WK, 1}, {DZ_L_WV, 1},
    {DZ_L_WO, 1}, {DZ_L_FFN_NORM_W, 1}, {DZ_L_W_GATE, 1}, {DZ_L_W_DOWN, 1}, {DZ_L_W_UP, 1},
    {DZ_G_FINAL_NORM_W, 0},
};

/* Row 2i + r of each head (r = 0, 1) moves to row r * head_dim/2 + i. */
static void place_rope_permuted(dz_model *m, int id, const float *src, int n_heads, size_t *arena_off) {
    const dz_param *p = &m->table.params[id];
    const int hd = m->cfg.head_dim, half = hd / 2;
    const size_t cols = (size_t)p->cols, esz = dz_dtype_size(m->dtype);
    char *dst = (char *)m->owned + *arena_off;
    *arena_off += ((size_t)dz_param_numel(p) * esz + DZ_ALIGN - 1) / DZ_ALIGN * DZ_ALIGN;
    for (int h = 0; h < n_heads; h++)
        for (int r = 0; r < 2; r++)
            for (int i = 0; i < half; i++) {
                const size_t from = (size_t)h * hd + 2 * i + r, to = (size_t)h * hd + r * half + i;
                dz_from_f32(dst + to * cols * esz, m->dtype, src + from * cols, cols);
            }
    m->data[id] = dst;
}


dz_status dz_model_load_llama2c(dz_model *m, const char *path, dz_error *err) {
    m->format = "llama2c";
    size_t size;
    dz_status st = dz_map_file(path, sizeof(llama2c_header), &m->map, &size, err);
    if (st == DZ_ERR_FORMAT)
        return dz_fail(err, DZ_ERR_FORMAT, "%s: file of %zu bytes is shorter than the 28-byte header", path, size);
    if (st != DZ_OK) return st;
    m->map_size = size;
    llama2c_header h;
    memcpy(&h, m->map, sizeof h);
    st = header_to_config(&h, path, &m->cfg, err);
    if (st == DZ_OK) st = dz_model_init_tables(m, err);
    if (st != DZ_OK) return st;

    const dz_config *c = &m->cfg;
    const size_t rope_floats = (size_t)c->max_seq_len * (size_t)c->head_dim; /* freq_cis real + imag */
    size_t need = sizeof h + 4 * (size_t)dz_param_table_numel(&m->table) + 4 * rope_floats;
    if (size != need)
        return dz_fail(err, DZ_ERR_FORMAT,
                       "%s: file is %zu bytes but its header (dim %d, hidden_dim %d, n_layers %d, "
                       "n_heads %d, n_kv_heads %d, vocab_size %d, seq_len %d) implies %zu",
                       path, size, h.dim, h.hidden_dim, h.n_layers, h.n_heads, h.n_kv_heads,
                       h.vocab_size, h.seq_len, need);
    size_t arena = 0;
    for (int i = 0; i < m->table.count; i++) {
        const dz_param *p = &m->table.params[i];
        if (m->dtype != DZ_F32 || p->role == DZ_L_WQ || p->role == DZ_L_WK)
            arena += ((size_t)dz_param_numel(p) * dz_dtype_size(m->dtype) + DZ_ALIGN - 1) / DZ_ALIGN * DZ_ALIGN;
    }
    if ((st = dz_model_alloc_arena(m, arena, err)) != DZ_OK) return st;
    const float *p = (const float *)((const char *)m->map + sizeof h);
    size_t off = 0;
    const int g = c->n_layers;
    for (size_t k = 0; k < sizeof file_order / sizeof file_order[0]; k++) {
        int nblocks = file_order[k].per_layer ? c->n_layers : 1;
        for (int b = 0; b < nblocks; b++) {
            const int role = file_order[k].role, id = m->ids[file_order[k].per_layer ? b : g][role];
            if (file_order[k].per_layer && (role == DZ_L_WQ || role == DZ_L_WK))
                place_rope_permuted(m, id, p, role == DZ_L_WQ ? c->n_heads : c->n_kv_heads, &off);
            else
                dz_model_place(m, id, p, DZ_F32, 1, &off);
            p += dz_param_numel(&m->table.params[id]);
        }
    }
    if (!c->tied_head) {
        p += rope_floats;
        dz_model_place(m, m->ids[g][DZ_G_LM_HEAD], p, DZ_F32, 1, &off);
    }
    if (m->mapped_bytes == 0) { /* every tensor was converted: the file is no longer needed */
        munmap(m->map, m->map_size);
        m->map = NULL;
    }
    dz_model_find_tokenizer(path, &m->cfg, m->tokenizer, sizeof m->tokenizer);
    return DZ_OK;
}
