/* The host seam's attention kernel (seam_host.h): the launch is checked as the runtime
 * checks it and queued with its ranges (q read, out written, the sequences read); when it
 * runs, the sequences it reads from device memory are checked (rows inside q and out,
 * every key and value row its real queries read inside a device buffer) before anything
 * is written, and then each block runs the kernel's element code (attention_element.h) in
 * the order the kernel's threads do: stage a key tile, move every row of the block on. */
#include "backend/cuda/seam_host.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The bytes of a slot that hold positions [from, from + n): a row per position. */
static int check_slot(hs_state *h, const float *slot, int from, int n, size_t row, int b, const char *name) {
    char what[64];
    snprintf(what, sizeof what, "attention: sequence %d's %s", b, name);
    return hs_check_device(h, (const char *)slot + (size_t)from * row, (size_t)n * row, what);
}

static int check_seq(hs_state *h, const dz_attn_launch *L, const dz_attn_seq *s, int b) {
    if (s->rows < 0 || s->start < 0 || s->queries < 0 || s->queries > s->rows || s->row0 < 0 ||
        s->row0 > L->total_rows - s->rows)
        return hs_fail(h, DZ_CUDA_ERR_OVERRUN, "attention: sequence %d's rows [%d, %d) (%d real, from position %d) "
                       "are not inside q's %d rows", b, s->row0, s->row0 + s->rows, s->queries, s->start,
                       L->total_rows);
    if (s->rows > L->query_tiles * DZ_ATTN_QUERY_TILE)
        return hs_fail(h, DZ_CUDA_ERR_INVALID, "attention: sequence %d's %d rows are more than %d query tiles cover",
                       b, s->rows, L->query_tiles);
    if (s->queries == 0) return DZ_CUDA_OK; /* padding only: no key is read */
    const size_t row = sizeof(float) * (size_t)L->n_kv_heads * (size_t)L->head_dim;
    int st = DZ_CUDA_OK;
    if (s->start > 0) st = check_slot(h, s->prefix_k, 0, s->start, row, b, "prefix keys");
    if (st == DZ_CUDA_OK && s->start > 0) st = check_slot(h, s->prefix_v, 0, s->start, row, b, "prefix values");
    if (st == DZ_CUDA_OK) st = check_slot(h, s->own_k, s->start, s->queries, row, b, "own keys");
    if (st == DZ_CUDA_OK) st = check_slot(h, s->own_v, s->start, s->queries, row, b, "own values");
    if (st == DZ_CUDA_OK && s->n_virtual < 0)
        st = hs_fail(h, DZ_CUDA_ERR_INVALID, "attention: sequence %d's %d virtual rows", b, s->n_virtual);
    if (st == DZ_CUDA_OK && s->n_virtual > 0) st = check_slot(h, s->virtual_k, 0, s->n_virtual, row, b, "virtual keys");
    if (st == DZ_CUDA_OK && s->n_virtual > 0)
        st = check_slot(h, s->virtual_v, 0, s->n_virtual, row, b, "virtual values");
    return st;
}

/* Block (tile, h) of sequence s, its threads' rows in rows[]. */
static void run_block(const dz_attn_launch *L, const dz_attn_seq *s, int h, int tile, float *kt, float *vt,
                      dz_attn_row *rows) {
    const int hd = L->head_dim, kvh = h / (L->n_heads / L->n_kv_heads), first = tile * DZ_ATTN_QUERY_TILE;
    const int end = first + DZ_ATTN_QUERY_TILE < s->rows ? first + DZ_ATTN_QUERY_TILE : s->rows;
    const int real_end = end < s->queries ? end : s->queries, nkeys = dz_attn_tile_keys(s, tile);
    for (int i = first; i < real_end; i++) dz_attn_row_begin(&rows[i - first], L->q + dz_attn_offset(L, s, i, h), hd);
    for (int k0 = 0; k0 < nkeys; k0 += DZ_ATTN_KEY_TILE) {
        for (int e = 0; e < DZ_ATTN_KEY_TILE * hd; e++) dz_attn_stage(kt, vt, s, L, kvh, k0, nkeys, e);
        for (int i = first; i < real_end; i++) {
            const int n = dz_attn_row_keys(s, i, k0);
            if (n > 0) dz_attn_row_tile(&rows[i - first], kt, vt, n, hd, L->scale);
        }
    }
    for (int i = first; i < end; i++) {
        float *o = L->out + dz_attn_offset(L, s, i, h);
        if (i < real_end) dz_attn_row_end(&rows[i - first], o, hd);
        else memset(o, 0, sizeof(float) * (size_t)hd); /* padding */
    }
}

int hs_attention_run(hs_state *h, const dz_attn_launch *L) {
    for (int b = 0; b < L->batch; b++) {
        const int st = check_seq(h, L, &L->seqs[b], b);
        if (st != DZ_CUDA_OK) return st;
    }
    const size_t hd = (size_t)L->head_dim; /* a block: the staged tiles, then each row's q and acc */
    float *staged = malloc(sizeof(float) * 2 * hd * (DZ_ATTN_KEY_TILE + DZ_ATTN_QUERY_TILE));
    dz_attn_row rows[DZ_ATTN_QUERY_TILE];
    int st = DZ_CUDA_OK;
    if (!staged) st = hs_fail(h, DZ_CUDA_ERR_MEMORY, "attention: out of host memory for a block");
    for (int i = 0; i < DZ_ATTN_QUERY_TILE && staged; i++)
        rows[i].q = staged + 2 * hd * (DZ_ATTN_KEY_TILE + (size_t)i), rows[i].acc = rows[i].q + hd;
    for (int b = 0; b < L->batch && st == DZ_CUDA_OK; b++)
        for (int hh = 0; hh < L->n_heads; hh++)
            for (int t = 0; t < L->query_tiles && t * DZ_ATTN_QUERY_TILE < L->seqs[b].rows; t++)
                run_block(L, &L->seqs[b], hh, t, staged, staged + DZ_ATTN_KEY_TILE * hd, rows);
    free(staged);
    return st;
}

/* One range of the launch, checked against its device buffer. */
static int launch_range(hs_state *h, hs_op *op, const void *p, size_t bytes, int write, const char *name) {
    char what[48];
    snprintf(what, sizeof what, "attention: %s", name);
    const int st = hs_check_device(h, p, bytes, what);
    if (st == DZ_CUDA_OK) op->r[op->nr++] = (hs_range){(uintptr_t)p, (uintptr_t)p + bytes, write};
    return st;
}

static int attention(dz_cuda_seam *s, const dz_attn_launch *L, dz_cuda_stream st) {
    hs_state *h = hs_of(s);
    int i = 0, status = hs_stream_index(h, st, &i);
    if (status != DZ_CUDA_OK) return status;
    const char *bad = dz_attn_launch_invalid(L);
    if (bad) return hs_fail(h, DZ_CUDA_ERR_INVALID, "attention: %s", bad);
    if (L->batch == 0 || L->query_tiles == 0) return DZ_CUDA_OK; /* an empty grid */
    hs_op op = {.kind = HS_ATTN, .u.attn = *L};
    const size_t mat = sizeof(float) * (size_t)L->total_rows * (size_t)L->n_heads * (size_t)L->head_dim;
    status = launch_range(h, &op, L->seqs, sizeof(dz_attn_seq) * (size_t)L->batch, 0, "sequences");
    if (status == DZ_CUDA_OK && mat) status = launch_range(h, &op, L->q, mat, 0, "q");
    if (status == DZ_CUDA_OK && mat) status = launch_range(h, &op, L->out, mat, 1, "out");
    return status != DZ_CUDA_OK ? status : hs_enqueue(h, i, &op);
}

void hs_attention_api(dz_cuda_seam *s) { s->attention = attention; }
