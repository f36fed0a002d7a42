/* The forward pass of OPT and LLaMA-family decoders, one code path for both:
 * embed -> n_layers x (attention, FFN) -> final norm -> head streamed over the vocabulary.
 *
 * Streams are independent activation states (the residual stream x and the head's
 * per-row state) that share one workspace: the ZO trainer runs the +eps and -eps
 * forwards as two streams through each block while the block is resident, and the head
 * visits each vocabulary chunk once for all streams. A stream's rows are its real
 * positions only, packed sequence after sequence: padding never goes through the layers
 * (callers still name head rows by their padded index). All buffers are sized at creation
 * (forward_buffers.c; the whole-block weight scratch on first use); a call allocates nothing.
 *
 * Every numeric step is an op of the forward's backend (backend/backend.h), on buffers the
 * backend allocated; between the weight source and the log-probs the host only computes
 * indices and moves data through upload/download. The weight source writes host fp32 rows:
 * on a backend with host buffers (the CPU's) straight into the op buffers, and a weight
 * tensor is used where the source points (zero-copy upload_view); on any other backend
 * into a host staging buffer, then uploaded. A source of backend rows (a ZO trainer's whose
 * masters are resident on the device: dz_weight_source.backend_rows) writes into and hands
 * out the backend's buffers themselves: nothing is staged or uploaded. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/threads.h"
#include "core/util.h"
#include "model/forward_internal.h"
#include "model/forward_pair.h"

/* Where source w writes rows bound for the backend buffer buf: the buffer itself when its
 * rows are backend buffers or the backend's buffers are host memory, else the stage. */
static float *rows_dest(const dz_forward *f, const dz_weight_source *w, float *buf) {
    return w->backend_rows ? buf : staged(f, buf);
}

/* The rows src that w handed out, readable by ops: src itself when they are backend rows,
 * else uploaded into dst (zero-copy on a backend with host buffers). */
static const float *rows_view(const dz_forward *f, const dz_weight_source *w, float *dst, const float *src,
                              size_t floats) {
    return w->backend_rows ? src : f->be->ops->upload_view(f->be, dst, src, floats * sizeof(float));
}

/* Fetches every tensor of a block as fp32 for stream s (NULL for roles the architecture
 * lacks). The scratch for dtype conversion is allocated on first use. */
static dz_status fetch_block(dz_forward *f, const dz_weight_source *w, int s, int block, int nroles, const float **t,
                             dz_error *err) {
    const dz_model *m = f->m;
    if (!f->wscratch) {
        f->wscratch = f->be->ops->alloc(f->be, f->wscratch_floats * sizeof(float));
        if (!f->wscratch) return dz_fail(err, DZ_ERR_NOMEM, "forward: cannot allocate the block scratch");
        f->bytes += f->wscratch_floats * sizeof(float);
    }
    float *rows_at = rows_dest(f, w, f->wscratch);
    size_t off = 0;
    for (int r = 0; r < nroles; r++) {
        int id = m->ids[block][r];
        t[r] = NULL;
        if (id < 0 || read_by_rows(&m->cfg, block, r)) continue;
        const dz_param *p = &m->table.params[id];
        const size_t n = (size_t)dz_param_numel(p);
        const float *src = w->rows(w->self, s, id, 0, p->rows, rows_at + off);
        t[r] = rows_view(f, w, f->wscratch + off, src, n);
        off += n;
    }
    return DZ_OK;
}

/* Small global tensors (projections, final norm) for stream s, read into rscratch. */
static void fetch_small_globals(dz_forward *f, const dz_weight_source *w, int s, const float **g) {
    const dz_model *m = f->m;
    float *rows_at = rows_dest(f, w, f->rscratch);
    size_t off = 0;
    for (int r = 0; r < DZ_G_COUNT; r++) {
        const int id = m->ids[m->cfg.n_layers][r];
        g[r] = NULL;
        if (id < 0 || read_by_rows(&m->cfg, m->cfg.n_layers, r)) continue;
        const dz_param *p = &m->table.params[id];
        const size_t n = (size_t)dz_param_numel(p);
        const float *src = w->rows(w->self, s, id, 0, p->rows, rows_at + off);
        g[r] = rows_view(f, w, f->rscratch + off, src, n);
        off += n;
    }
}

/* Rows src_rows[r] (+ row_offset) of tensor id for r < n, gathered by the weight source into
 * the backend buffer buf[n, cols]. */
static void gather_rows(dz_forward *f, const dz_weight_source *w, int s, int id, const int *src_rows, int row_offset,
                        int n, int cols, float *buf) {
    float *rows_at = rows_dest(f, w, buf);
    for (int r = 0; r < n; r++) {
        float *dst = rows_at + (size_t)r * cols;
        const float *src = w->rows(w->self, s, id, src_rows[r] + row_offset, 1, dst);
        if (src == dst) continue;
        if (w->backend_rows) f->be->ops->copy_rows(f->be, dst, NULL, src, NULL, 1, cols);
        else memcpy(dst, src, sizeof(float) * cols);
    }
    if (!w->backend_rows) f->be->ops->upload(f->be, buf, rows_at, sizeof(float) * (size_t)n * cols);
}

/* Token embeddings (projected in if the model has project_in) plus position embeddings,
 * of the stream's rows (tokens: one per row). */
static void embed(dz_forward *f, const dz_weight_source *w, int s, const int *tokens) {
    const dz_model *m = f->m;
    const dz_config *c = &m->cfg;
    stream *st = &f->st[s];
    const int N = st->n_rows;
    const int tok_id = m->ids[c->n_layers][DZ_G_TOK_EMB], pos_id = m->ids[c->n_layers][DZ_G_POS_EMB];
    const int has_proj = m->ids[c->n_layers][DZ_G_PROJ_IN] >= 0;
    /* without projection, straight into x */
    gather_rows(f, w, s, tok_id, tokens, 0, N, c->embed_dim, has_proj ? f->emb : st->x);
    if (has_proj) {
        const float *g[DZ_ROLE_MAX];
        fetch_small_globals(f, w, s, g);
        f->be->ops->matmul(f->be, st->x, f->emb, g[DZ_G_PROJ_IN], NULL, N, c->dim, c->embed_dim);
    }
    if (pos_id < 0) return;
    gather_rows(f, w, s, pos_id, st->pos, c->pos_offset, N, c->dim, f->xb);
    f->be->ops->add(f->be, st->x, f->xb, (size_t)N * c->dim);
}

static void norm(const dz_forward *f, float *y, const float *x, const float *wt, const float *b, int rows) {
    const dz_config *c = &f->m->cfg;
    if (c->arch == DZ_ARCH_OPT) f->be->ops->layernorm(f->be, y, x, wt, b, rows, c->dim, c->norm_eps);
    else f->be->ops->rmsnorm(f->be, y, x, wt, rows, c->dim, c->norm_eps);
}

/* One layer on one stream, or on both signs' streams op by op (a pair: each matrix's GEMMs
 * of both signs in one matmul_pair from its masters, mats). */
typedef struct layer_run {
    int n, s[2], l;
    const float *const *t[2];
    layer_bufs b[2];
    const dz_layer_pair_mats *mats; /* NULL: every matrix from t */
} layer_run;

static int run_rows(const dz_forward *f, const layer_run *r, int k) { return f->st[r->s[k]].n_rows; }

/* y[k] = x[k] W_role^T (+ t[k][bias], bias >= 0) on M[k] rows of each stream k, and an
 * adapter's LoRA term; a pair's from theta, both signs in one call (M = 0 still updates
 * theta, so a pair passes every row at once). */
static void run_linear(dz_forward *f, const layer_run *r, const int M[2], int role, int bias, float *const y[2],
                       const float *const x[2], int out, int in) {
    const dz_backend *be = f->be;
    if (r->mats) {
        const float *const b2[2] = {bias >= 0 ? r->t[0][bias] : NULL, bias >= 0 ? r->t[1][bias] : NULL};
        be->ops->matmul_pair(be, y, x, M, r->mats->theta[role], b2, out, in, &r->mats->pt[role]);
        return;
    }
    for (int k = 0; k < r->n; k++) {
        if (M[k] == 0) continue;
        be->ops->matmul(be, y[k], x[k], r->t[k][role], bias >= 0 ? r->t[k][bias] : NULL, M[k], out, in);
        if (f->lora) dz_forward_lora_add(f, y[k], x[k], r->t[k], role, M[k], out, in);
    }
}

/* Stream k's input to the block after its residual stream (normed first when pre-norm). */
static const float *block_input(dz_forward *f, const layer_run *r, int k, int norm_w, int norm_b) {
    stream *st = &f->st[r->s[k]];
    if (!f->m->cfg.pre_norm) return st->x;
    norm(f, r->b[k].xb, st->x, r->t[k][norm_w], r->t[k][norm_b], st->n_rows);
    return r->b[k].xb;
}

/* Stream k's attention after its q, k, v projections: rotary, keys and values into the
 * slots, attention into b.att. */
static void attend(dz_forward *f, const layer_run *r, int k) {
    const dz_config *c = &f->m->cfg;
    const dz_backend *be = f->be;
    stream *st = &f->st[r->s[k]];
    const layer_bufs *lb = &r->b[k];
    const float *const *t = r->t[k];
    const int N = st->n_rows, kvd = c->n_kv_heads * c->head_dim;
    const size_t layer_stride = (size_t)f->max_batch * f->max_seq * kvd, slot = (size_t)f->max_seq * kvd;
    const size_t lo = f->kv_cache ? (size_t)r->l * layer_stride : 0;
    float *kc = st->kcache + lo, *vc = st->vcache + lo;
    if (c->arch == DZ_ARCH_LLAMA) {
        const float *cs = f->n_virtual ? f->virt_rope : f->rope_cs; /* positions past max_seq under a prefix */
        be->ops->rope(be, lb->q, N, st->pos, c->n_heads, c->head_dim, cs);
        be->ops->rope(be, lb->kn, N, st->pos, c->n_kv_heads, c->head_dim, cs);
    }
    be->ops->copy_rows(be, kc, st->slot, lb->kn, NULL, N, kvd); /* keys and values into the slots, by position */
    be->ops->copy_rows(be, vc, st->slot, lb->vn, NULL, N, kvd);
    const stream *ps = st->parent_stream >= 0 ? &f->st[st->parent_stream] : NULL;
    for (int b = 0; b < st->B; b++) {
        f->ok[b] = kc + (size_t)b * slot;
        f->ov[b] = vc + (size_t)b * slot;
        f->pk[b] = ps ? ps->kcache + lo + (size_t)st->parent[b] * slot : f->ok[b];
        f->pv[b] = ps ? ps->vcache + lo + (size_t)st->parent[b] * slot : f->ov[b];
    }
    dz_attn_args a = {
        .batch = st->B, .n_new = st->n_new, .max_keys = f->max_seq + f->n_virtual,
        .n_heads = c->n_heads, .n_kv_heads = c->n_kv_heads, .head_dim = c->head_dim,
        .start = st->start, .lengths = st->lengths, .row0 = st->row0, .prefix_k = f->pk, .prefix_v = f->pv, .own_k = f->ok,
        .own_v = f->ov, .scale = 1.0f / sqrtf((float)c->head_dim),
        .scratch = f->n_virtual ? f->virt_scratch : f->attn_scratch, .scratch_threads = f->scratch_threads,
        .n_virtual = t[DZ_L_PREFIX_K] ? f->n_virtual : 0, .virtual_k = t[DZ_L_PREFIX_K], .virtual_v = t[DZ_L_PREFIX_V],
    };
    be->ops->attention(be, lb->att, lb->q, &a);
}

/* Stream k's residual add of y, then the post-norm (OPT's post-norm layouts). */
static void residual(dz_forward *f, const layer_run *r, int k, const float *y, int norm_w, int norm_b) {
    stream *st = &f->st[r->s[k]];
    f->be->ops->add(f->be, st->x, y, (size_t)st->n_rows * f->m->cfg.dim);
    if (!f->m->cfg.pre_norm) norm(f, st->x, st->x, r->t[k][norm_w], r->t[k][norm_b], st->n_rows);
}

/* The two halves of a layer, each op over the run's streams (a stream without rows skips
 * all but a pair's GEMMs). */
static void run_attention(dz_forward *f, const layer_run *r) {
    const dz_config *c = &f->m->cfg;
    const int d = c->dim, qd = c->n_heads * c->head_dim, kvd = c->n_kv_heads * c->head_dim;
    const int M[2] = {run_rows(f, r, 0), run_rows(f, r, 1)};
    const float *in[2] = {NULL, NULL};
    for (int k = 0; k < r->n; k++)
        if (M[k]) in[k] = block_input(f, r, k, DZ_L_ATTN_NORM_W, DZ_L_ATTN_NORM_B);
    run_linear(f, r, M, DZ_L_WQ, DZ_L_BQ, (float *const[2]){r->b[0].q, r->b[1].q}, in, qd, d);
    run_linear(f, r, M, DZ_L_WK, DZ_L_BK, (float *const[2]){r->b[0].kn, r->b[1].kn}, in, kvd, d);
    run_linear(f, r, M, DZ_L_WV, DZ_L_BV, (float *const[2]){r->b[0].vn, r->b[1].vn}, in, kvd, d);
    for (int k = 0; k < r->n; k++)
        if (run_rows(f, r, k)) attend(f, r, k);
    run_linear(f, r, M, DZ_L_WO, DZ_L_BO, (float *const[2]){r->b[0].xb, r->b[1].xb},
               (const float *const[2]){r->b[0].att, r->b[1].att}, d, qd);
    for (int k = 0; k < r->n; k++)
        if (run_rows(f, r, k)) residual(f, r, k, r->b[k].xb, DZ_L_ATTN_NORM_W, DZ_L_ATTN_NORM_B);
}

/* The feed-forward of M[k] rows of each stream k from row r0: in[k] + r0 rows into
 * b[k].att + r0 rows, through f1 / f2 from their start. */
static void ffn_rows(dz_forward *f, const layer_run *r, const float *const in[2], int r0, const int M[2]) {
    const dz_config *c = &f->m->cfg;
    const dz_backend *be = f->be;
    const int d = c->dim, h = c->hidden_dim;
    const size_t off = (size_t)r0 * d;
    const float *const x[2] = {M[0] ? in[0] + off : NULL, M[1] ? in[1] + off : NULL};
    float *const f1[2] = {r->b[0].f1, r->b[1].f1}, *const f2[2] = {r->b[0].f2, r->b[1].f2};
    if (c->arch == DZ_ARCH_OPT) {
        run_linear(f, r, M, DZ_L_W_UP, DZ_L_B_UP, f1, x, h, d);
    } else {
        run_linear(f, r, M, DZ_L_W_GATE, -1, f1, x, h, d);
        run_linear(f, r, M, DZ_L_W_UP, -1, f2, x, h, d);
    }
    for (int k = 0; k < r->n; k++) {
        const size_t nh = (size_t)M[k] * h;
        if (nh == 0) continue;
        if (c->arch == DZ_ARCH_OPT) be->ops->relu(be, f1[k], nh);
        else be->ops->swiglu(be, f1[k], f2[k], nh);
    }
    run_linear(f, r, M, DZ_L_W_DOWN, DZ_L_B_DOWN, (float *const[2]){r->b[0].att + off, r->b[1].att + off},
               (const float *const[2]){f1[0], f1[1]}, d, h);
}

/* The feed-forward a row chunk at a time (f1 and f2 hold FFN_ROW_CHUNK rows: every op is
 * row by row or element by element and the GEMM gives each element one chain wherever its
 * row sits, so the chunks change no bit); a pair's rows at once (its GEMMs update theta,
 * once per call; its f1 / f2 hold every row). */
static void run_ffn(dz_forward *f, const layer_run *r) {
    const int N[2] = {run_rows(f, r, 0), r->n > 1 ? run_rows(f, r, 1) : 0};
    const float *in[2] = {NULL, NULL};
    for (int k = 0; k < r->n; k++)
        if (N[k]) in[k] = block_input(f, r, k, DZ_L_FFN_NORM_W, DZ_L_FFN_NORM_B);
    if (r->mats) {
        ffn_rows(f, r, in, 0, N);
    } else {
        const int most = N[0] > N[1] ? N[0] : N[1];
        for (int r0 = 0; r0 < most; r0 += FFN_ROW_CHUNK) {
            int M[2];
            for (int k = 0; k < 2; k++) M[k] = N[k] - r0 < 0 ? 0 : N[k] - r0 < FFN_ROW_CHUNK ? N[k] - r0 : FFN_ROW_CHUNK;
            ffn_rows(f, r, in, r0, M);
        }
    }
    for (int k = 0; k < r->n; k++)
        if (N[k]) residual(f, r, k, r->b[k].att, DZ_L_FFN_NORM_W, DZ_L_FFN_NORM_B);
}

static layer_bufs own_bufs(const dz_forward *f) {
    return (layer_bufs){f->xb, f->q, f->kn, f->vn, f->att, f->f1, f->f2};
}

void dz_forward_layer(dz_forward *f, int s, int l, const float *const *t) {
    if (f->st[s].n_rows == 0) return; /* every sequence of the stream is padding here */
    const layer_run r = {.n = 1, .s = {s, s}, .l = l, .t = {t, t}, .b = {own_bufs(f), own_bufs(f)}};
    run_attention(f, &r);
    run_ffn(f, &r);
    f->be->ops->synchronize(f->be); /* the caller may rewrite t's buffers once this returns */
}

int dz_forward_pair_supported(const dz_forward *f) {
    return f->be->ops->matmul_pair && !f->lora && !f->n_virtual && f->n_streams >= 2;
}

void dz_forward_layer_pair(dz_forward *f, const int s[2], int l, const float *const t[2][DZ_L_COUNT],
                           const dz_layer_pair_mats *mats) {
    const layer_run r = {.n = 2, .s = {s[0], s[1]}, .l = l, .t = {t[0], t[1]}, .b = {f->pair_bufs[0], f->pair_bufs[1]},
                         .mats = mats};
    run_attention(f, &r);
    run_ffn(f, &r);
    f->be->ops->synchronize(f->be);
}

dz_status dz_forward_embed_tree(dz_forward *f, int s, const dz_weight_source *w, const int *tokens,
                                const int *lengths, int B, int n_new, const int *start, int parent_stream,
                                const int *parent, dz_error *err) {
    const dz_config *c = &f->m->cfg;
    if (s < 0 || s >= f->n_streams) return dz_fail(err, DZ_ERR_INVALID, "forward: no stream %d", s);
    if (B < 1 || B > f->max_batch || n_new < 1)
        return dz_fail(err, DZ_ERR_INVALID, "forward: batch %d x %d tokens does not fit the %d x %d buffers", B, n_new,
                       f->max_batch, f->max_seq);
    const stream *ps = NULL;
    if (parent_stream >= 0) {
        if (parent_stream >= f->n_streams || parent_stream == s)
            return dz_fail(err, DZ_ERR_INVALID, "forward: stream %d cannot continue stream %d", s, parent_stream);
        ps = &f->st[parent_stream];
    }
    for (int b = 0; b < B; b++) {
        const int st0 = start ? start[b] : 0, len = lengths ? lengths[b] : st0 + n_new;
        if (st0 < 0 || st0 + n_new > f->max_seq || len > st0 + n_new)
            return dz_fail(err, DZ_ERR_INVALID,
                           "forward: sequence %d (positions %d..%d) does not fit the %d positions", b, st0,
                           st0 + n_new - 1, f->max_seq);
        if (ps) {
            const int p = parent[b];
            if (p < 0 || p >= ps->B || ps->start[p] != 0 || ps->lengths[p] != st0)
                return dz_fail(err, DZ_ERR_INVALID,
                               "forward: sequence %d continues prompt %d, which is not %d tokens long", b, p, st0);
        } else if (st0 > 0 && !f->kv_cache) {
            return dz_fail(err, DZ_ERR_INVALID, "forward: continuing at position %d needs a KV cache", st0);
        }
    }
    for (int i = 0; i < B * n_new; i++)
        if (tokens[i] < 0 || tokens[i] >= c->vocab_size)
            return dz_fail(err, DZ_ERR_INVALID, "forward: token id %d at index %d is outside the vocabulary (%d)",
                           tokens[i], i, c->vocab_size);
    stream *st = &f->st[s];
    st->B = B;
    st->n_new = n_new;
    st->parent_stream = parent_stream;
    /* Only real positions get rows: padding (positions at or past a sequence's length)
     * would cost the layers as much as a real token and feed nothing. Every op is row by
     * row or per sequence, so packing changes no result. */
    int n = 0;
    for (int b = 0; b < B; b++) {
        st->start[b] = start ? start[b] : 0;
        st->lengths[b] = lengths ? lengths[b] : st->start[b] + n_new;
        st->parent[b] = ps ? parent[b] : -1;
        st->row0[b] = n;
        for (int t = 0; t < n_new; t++) {
            if (st->start[b] + t >= st->lengths[b]) {
                st->row_of[b * n_new + t] = -1;
                continue;
            }
            st->row_of[b * n_new + t] = n;
            f->row_tmp[n] = tokens[b * n_new + t];
            st->pos[n] = f->n_virtual + st->start[b] + t; /* a prefix's virtual tokens come first */
            st->slot[n++] = b * f->max_seq + st->start[b] + t;
        }
    }
    st->row0[B] = st->n_rows = n;
    embed(f, w, s, f->row_tmp);
    return DZ_OK;
}

dz_status dz_forward_embed(dz_forward *f, int s, const dz_weight_source *w, const int *tokens, const int *lengths,
                           int B, int n_new, int pos0, dz_error *err) {
    if (B < 1 || B > f->max_batch) return dz_fail(err, DZ_ERR_INVALID, "forward: batch %d of at most %d", B, f->max_batch);
    for (int b = 0; b < B; b++) f->start_tmp[b] = pos0;
    return dz_forward_embed_tree(f, s, w, tokens, lengths, B, n_new, f->start_tmp, -1, NULL, err);
}

dz_status dz_forward_run(dz_forward *f, const dz_weight_source *w, const int *tokens,
                         const int *lengths, int B, int n_new, int pos0, dz_error *err) {
    static const int s0 = 0;
    dz_status st = dz_forward_embed(f, 0, w, tokens, lengths, B, n_new, pos0, err);
    return st == DZ_OK ? dz_forward_layers(f, w, 1, &s0, err) : st;
}

/* Stream s's selected rows' final hidden states into its hsel: final norm, project_out. */
static dz_status head_inputs(dz_forward *f, const dz_weight_source *w, int s, const int *rows, int nrows,
                             dz_error *err) {
    const dz_config *c = &f->m->cfg;
    stream *st = &f->st[s];
    const int N = st->B * st->n_new;
    if (nrows < 0 || nrows > N) return dz_fail(err, DZ_ERR_INVALID, "head: %d rows requested of %d", nrows, N);
    for (int i = 0; i < nrows; i++) {
        if (rows[i] < 0 || rows[i] >= N)
            return dz_fail(err, DZ_ERR_INVALID, "head: row %d is outside the %d positions of the last run", rows[i], N);
        if ((f->row_tmp[i] = st->row_of[rows[i]]) < 0)
            return dz_fail(err, DZ_ERR_INVALID, "head: row %d is padding (at or past its sequence's length)", rows[i]);
    }
    f->be->ops->copy_rows(f->be, f->xb, NULL, st->x, f->row_tmp, nrows, c->dim);
    const float *g[DZ_ROLE_MAX];
    fetch_small_globals(f, w, s, g);
    if (g[DZ_G_FINAL_NORM_W]) norm(f, f->xb, f->xb, g[DZ_G_FINAL_NORM_W], g[DZ_G_FINAL_NORM_B], nrows);
    if (g[DZ_G_PROJ_OUT])
        f->be->ops->matmul(f->be, st->hsel, f->xb, g[DZ_G_PROJ_OUT], NULL, nrows, c->embed_dim, c->dim);
    else f->be->ops->copy_rows(f->be, st->hsel, NULL, f->xb, NULL, nrows, c->dim);
    return DZ_OK;
}

/* The sets checked: distinct streams, targets inside the vocabulary. */
static dz_status head_check(const dz_forward *f, int n_sets, const dz_head_rows *sets, dz_error *err) {
    const dz_config *c = &f->m->cfg;
    if (n_sets < 1 || n_sets > f->n_streams)
        return dz_fail(err, DZ_ERR_INVALID, "head: %d streams requested of %d", n_sets, f->n_streams);
    for (int i = 0; i < n_sets; i++) {
        if (sets[i].stream < 0 || sets[i].stream >= f->n_streams)
            return dz_fail(err, DZ_ERR_INVALID, "head: no stream %d", sets[i].stream);
        for (int j = 0; j < i; j++)
            if (sets[j].stream == sets[i].stream)
                return dz_fail(err, DZ_ERR_INVALID, "head: stream %d listed twice", sets[i].stream);
        if (sets[i].targets)
            for (int r = 0; r < sets[i].nrows; r++)
                if (sets[i].targets[r] < 0 || sets[i].targets[r] >= c->vocab_size)
                    return dz_fail(err, DZ_ERR_INVALID, "head: target id %d is outside the vocabulary (%d)",
                                   sets[i].targets[r], c->vocab_size);
    }
    return DZ_OK;
}

/* Rows [r0, r0 + HEAD_ROW_CHUNK) of every set through the head: their hidden states into
 * hsel, then each vocabulary chunk once for all the sets (in their order): logits out (set
 * 0 only, if non-NULL) and/or the online log-sum-exp with each row's target logit. */
static dz_status head_row_chunk(dz_forward *f, const dz_weight_source *w, int n_sets, const dz_head_rows *sets,
                                int r0, float *logits, dz_error *err) {
    const dz_config *c = &f->m->cfg;
    for (int k = 0; k < n_sets; k++) {
        if (sets[k].nrows <= r0) continue;
        const int nr = sets[k].nrows - r0 < HEAD_ROW_CHUNK ? sets[k].nrows - r0 : HEAD_ROW_CHUNK;
        dz_status st = head_inputs(f, w, sets[k].stream, sets[k].rows + r0, nr, err);
        if (st != DZ_OK) return st;
    }
    const int head_id = f->m->ids[c->n_layers][c->tied_head ? DZ_G_TOK_EMB : DZ_G_LM_HEAD];
    for (int v0 = 0; v0 < c->vocab_size; v0 += HEAD_VOCAB_CHUNK) {
        const int nv = c->vocab_size - v0 < HEAD_VOCAB_CHUNK ? c->vocab_size - v0 : HEAD_VOCAB_CHUNK;
        const float *wchunk = NULL; /* a source the same for every stream gives the chunk once */
        for (int k = 0; k < n_sets; k++) {
            const int s = sets[k].stream;
            const int *targets = sets[k].targets ? sets[k].targets + r0 : NULL;
            stream *st = &f->st[s];
            if (sets[k].nrows <= r0) continue;
            const int nr = sets[k].nrows - r0 < HEAD_ROW_CHUNK ? sets[k].nrows - r0 : HEAD_ROW_CHUNK;
            if (!wchunk || !w->same_for_streams) {
                const float *host = w->view ? w->view(w->self, s, head_id, v0, nv) : NULL; /* a step's -eps chunk */
                if (!host) host = w->rows(w->self, s, head_id, v0, nv, rows_dest(f, w, f->rscratch));
                wchunk = rows_view(f, w, f->rscratch, host, (size_t)nv * c->embed_dim);
            }
            f->be->ops->matmul(f->be, f->hlogits, st->hsel, wchunk, NULL, nr, nv, c->embed_dim);
            if (logits && k == 0)
                for (int r = 0; r < nr; r++)
                    f->be->ops->download(f->be, logits + (size_t)(r0 + r) * c->vocab_size + v0,
                                         f->hlogits + (size_t)r * nv, sizeof(float) * nv);
            if (!targets) continue;
            f->be->ops->logsumexp_update(f->be, f->hlogits, nr, nv, st->hmax + r0, st->hsum + r0);
            f->be->ops->pick_target(f->be, st->htgt + r0, f->hlogits, nr, nv, targets, v0);
        }
    }
    return DZ_OK;
}

/* Streams the head over vocabulary chunks a row chunk at a time, so hsel holds one row
 * chunk whatever the rows (with many rows the head's weights are read once per row chunk;
 * each row's products, chunk by chunk, are the same either way). */
static dz_status head(dz_forward *f, const dz_weight_source *w, int n_sets, const dz_head_rows *sets, float *logits,
                      dz_error *err) {
    dz_status st = head_check(f, n_sets, sets, err);
    if (st != DZ_OK) return st;
    int most = 0;
    for (int k = 0; k < n_sets; k++) {
        const int s = sets[k].stream, N = f->st[s].B * f->st[s].n_new;
        if (sets[k].nrows < 0 || sets[k].nrows > N)
            return dz_fail(err, DZ_ERR_INVALID, "head: %d rows requested of %d", sets[k].nrows, N);
        f->be->ops->fill(f->be, f->st[s].hmax, -INFINITY, (size_t)sets[k].nrows);
        f->be->ops->fill(f->be, f->st[s].hsum, 0.0f, (size_t)sets[k].nrows);
        most = sets[k].nrows > most ? sets[k].nrows : most;
    }
    for (int r0 = 0; st == DZ_OK && r0 < most; r0 += HEAD_ROW_CHUNK)
        st = head_row_chunk(f, w, n_sets, sets, r0, logits, err);
    for (int k = 0; st == DZ_OK && k < n_sets; k++) {
        const stream *s = &f->st[sets[k].stream];
        if (!sets[k].targets) continue;
        f->be->ops->logprob_finish(f->be, s->htgt, s->htgt, s->hmax, s->hsum, sets[k].nrows);
        f->be->ops->download(f->be, sets[k].logprobs, s->htgt, sizeof(float) * (size_t)sets[k].nrows);
    }
    return st;
}

dz_status dz_forward_logits(dz_forward *f, const dz_weight_source *w, const int *rows, int nrows,
                            float *logits, dz_error *err) {
    return dz_forward_logits_stream(f, w, 0, rows, nrows, logits, err);
}

dz_status dz_forward_logits_stream(dz_forward *f, const dz_weight_source *w, int s, const int *rows, int nrows,
                                   float *logits, dz_error *err) {
    const dz_head_rows set = {.stream = s, .rows = rows, .nrows = nrows};
    return head(f, w, 1, &set, logits, err);
}

dz_status dz_forward_logprobs(dz_forward *f, const dz_weight_source *w, const int *rows,
                              const int *targets, int nrows, float *logprobs, dz_error *err) {
    const dz_head_rows set = {.stream = 0, .rows = rows, .targets = targets, .nrows = nrows, .logprobs = logprobs};
    return head(f, w, 1, &set, NULL, err);
}

dz_status dz_forward_logprobs_sets(dz_forward *f, const dz_weight_source *w, int n_sets, const dz_head_rows *sets,
                                   dz_error *err) {
    return head(f, w, n_sets, sets, NULL, err);
}

dz_status dz_forward_logprobs_streams(dz_forward *f, const dz_weight_source *w, int n_streams, const int *streams,
                                      const int *rows, const int *targets, int nrows, float *const *logprobs,
                                      dz_error *err) {
    if (n_streams < 1 || n_streams > f->n_streams)
        return dz_fail(err, DZ_ERR_INVALID, "head: %d streams requested of %d", n_streams, f->n_streams);
    for (int k = 0; k < n_streams; k++)
        f->head_sets[k] = (dz_head_rows){.stream = streams[k], .rows = rows, .targets = targets, .nrows = nrows,
                                         .logprobs = logprobs[k]};
    return head(f, w, n_streams, f->head_sets, NULL, err);
}

dz_status dz_forward_layer_weights(dz_forward *f, const dz_weight_source *w, int s, int layer, const float **t,
                                   dz_error *err) {
    dz_status st = fetch_block(f, w, s, layer, DZ_L_COUNT, t, err);
    if (st == DZ_OK) dz_forward_lora_fetch(f, s, layer, t);
    return st;
}

dz_status dz_forward_layers(dz_forward *f, const dz_weight_source *w, int n_streams, const int *streams, dz_error *err) {
    const float *t[DZ_ROLE_MAX];
    dz_status st = DZ_OK;
    for (int l = 0; st == DZ_OK && l < f->m->cfg.n_layers; l++)
        for (int k = 0; st == DZ_OK && k < n_streams; k++) { /* t stays valid: a layer only reads it */
            const int same = w->same_for_streams && (!f->lora || f->lora_src.same_for_streams);
            if (k == 0 || !same) st = dz_forward_layer_weights(f, w, streams[k], l, t, err);
            if (st == DZ_OK) dz_forward_layer(f, streams[k], l, t);
        }
    return st;
}

int dz_forward_n_streams(const dz_forward *f) { return f->n_streams; }

double dz_forward_flops(const dz_config *c, int B, int T, int head_rows) {
    const double N = (double)B * T, d = c->dim, f = c->hidden_dim, e = c->embed_dim;
    const double qd = (double)c->n_heads * c->head_dim, kvd = (double)c->n_kv_heads * c->head_dim;
    double per_tok = d * qd + 2 * d * kvd + qd * d + (c->arch == DZ_ARCH_OPT ? 2 : 3) * d * f;
    double gemm = 2.0 * N * per_tok * c->n_layers;
    if (e != d) gemm += 2.0 * N * 2 * d * e;
    double attn = 2.0 * 2.0 * qd * (double)B * T * (T + 1) / 2.0 * c->n_layers; /* QK^T and PV, causal */
    double headf = 2.0 * head_rows * (double)c->vocab_size * e;
    return gemm + attn + headf;
}
