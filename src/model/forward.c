/* The forward pass of OPT and LLaMA-family decoders, one code path for both:
 * embed -> n_layers x (attention, FFN) -> final norm -> head streamed over the vocabulary.
 *
 * Streams are independent activation states (the residual stream x and the head's
 * per-row state) that share one workspace: the ZO trainer runs the +eps and -eps
 * forwards as two streams through each block while the block is resident, and the head
 * visits each vocabulary chunk once for all streams. A stream's rows are its real
 * positions only, packed sequence after sequence: padding never goes through the layers
 * (callers still name head rows by their padded index). All buffers are sized at creation
 * (the whole-block weight scratch on first use); a call allocates nothing.
 *
 * Every numeric step is an op of the forward's backend (backend/backend.h), on buffers the
 * backend allocated; between the weight source and the log-probs the host only computes
 * indices and moves data through upload/download. The weight source writes host fp32 rows:
 * on a backend with host buffers (the CPU's) straight into the op buffers, and a weight
 * tensor is used where the source points (zero-copy upload_view); on any other backend
 * into a host staging buffer, then uploaded. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/threads.h"
#include "core/util.h"
#include "backend/backend.h"
#include "model/model_internal.h"

enum { HEAD_VOCAB_CHUNK = 4096, HEAD_ROW_CHUNK = 512 };

typedef struct stream {
    int B, n_new;       /* shape of the last embed: B sequences of n_new positions (padded) */
    int n_rows;         /* rows of the last embed: only the real positions, packed */
    int *lengths;       /* per sequence: one past its last real position */
    int *start;         /* per sequence: position of its first row */
    int *row0;          /* [B + 1]: sequence b's rows are [row0[b], row0[b + 1]) */
    int *row_of;        /* per padded index b * n_new + t: its row, or -1 (padding) */
    int *pos;           /* per row: its position */
    int *slot;          /* per row: its key/value row in the slots, (sequence, position) */
    int parent_stream;  /* the stream whose sequences this one continues, or -1 */
    int *parent;        /* per sequence: its prompt in parent_stream */
    float *x;           /* [n_rows, dim] residual stream */
    float *kcache, *vcache; /* key/value slots [max_batch, max_seq, kv_dim]: one layer's, or
                               with a KV cache every layer's ([n_layers][...]) */
    float *hsel;        /* [rows, embed_dim] hidden states entering the head */
    float *hmax, *hsum, *htgt;
} stream;

struct dz_forward {
    const dz_model *m;
    const dz_backend *be;
    int max_batch, max_seq, kv_cache, scratch_threads, n_streams;
    stream *st;
    float *xb, *q, *kn, *vn, *att, *f1, *f2, *emb;
    const float **pk, **pv, **ok, **ov; /* attention's per-sequence slots, [max_batch] each */
    int *start_tmp;                     /* [max_batch] */
    int *row_tmp;                       /* [max_batch * max_seq]: tokens, then head rows, by row */
    dz_head_rows *head_sets;            /* [n_streams] */
    float *attn_scratch;
    float *rope_cs;     /* LLaMA: the rotary cosines and sines of positions 0 .. max_seq-1 */
    float *wscratch;    /* fp32 copies of one block's whole tensors (allocated on first use) */
    size_t wscratch_floats, rscratch_floats;
    float *rscratch;    /* fp32 rows read by row (a head chunk, a position embedding) or the
                           small global tensors (projections, final norm) */
    float *hlogits;     /* [HEAD_ROW_CHUNK, HEAD_VOCAB_CHUNK] */
    float *stage;       /* host rows from the weight source bound for a buffer (NULL with host buffers) */
    size_t bytes;
    int count_only;     /* dz_forward_bytes_for: sizes without buffers */
};

/* A backend buffer of the forward; with count_only set nothing is allocated, only counted,
 * so dz_forward_bytes_for predicts exactly what create allocates. */
static float *take(dz_forward *f, size_t floats, int *ok) {
    f->bytes += floats * sizeof(float);
    if (f->count_only) return NULL;
    float *p = f->be->alloc(floats * sizeof(float));
    if (!p) *ok = 0;
    return p;
}

/* Embeddings and the head are read a few rows at a time, never whole. */
static int read_by_rows(const dz_config *c, int block, int role) {
    return block == c->n_layers && (role == DZ_G_TOK_EMB || role == DZ_G_POS_EMB || role == DZ_G_LM_HEAD);
}

static size_t block_floats(const dz_config *c, const dz_param_table *t, int block) {
    size_t n = 0;
    for (int i = 0; i < t->count; i++) {
        const dz_param *p = &t->params[i];
        if (p->block == block && !read_by_rows(c, block, p->role)) n += (size_t)dz_param_numel(p);
    }
    return n;
}

/* Every float buffer of a forward of f's shape (max_batch, max_seq, kv_cache, n_streams
 * and scratch_threads set): allocated, or only counted when f->count_only. */
static void take_buffers(dz_forward *f, const dz_config *c, const dz_param_table *t, int *ok) {
    const size_t N = (size_t)f->max_batch * f->max_seq;
    const size_t qd = (size_t)c->n_heads * c->head_dim, kvd = (size_t)c->n_kv_heads * c->head_dim;
    const size_t hdim = (size_t)(c->embed_dim > c->dim ? c->embed_dim : c->dim);
    f->wscratch_floats = block_floats(c, t, 0);
    size_t rs = (size_t)HEAD_VOCAB_CHUNK * hdim;
    if (block_floats(c, t, c->n_layers) > rs) rs = block_floats(c, t, c->n_layers);
    for (int s = 0; s < f->n_streams; s++) {
        stream *st = &f->st[s];
        st->x = take(f, N * c->dim, ok);
        st->hsel = take(f, N * hdim, ok);
        st->hmax = take(f, N, ok);
        st->hsum = take(f, N, ok);
        st->htgt = take(f, N, ok);
        const size_t layers = f->kv_cache ? (size_t)c->n_layers : 1;
        st->kcache = take(f, layers * N * kvd, ok);
        st->vcache = take(f, layers * N * kvd, ok);
    }
    f->xb = take(f, N * c->dim, ok);
    f->q = take(f, N * qd, ok);
    f->kn = take(f, N * kvd, ok);
    f->vn = take(f, N * kvd, ok);
    f->att = take(f, N * (qd > (size_t)c->dim ? qd : (size_t)c->dim), ok);
    f->f1 = take(f, N * c->hidden_dim, ok);
    if (c->arch == DZ_ARCH_LLAMA) f->f2 = take(f, N * c->hidden_dim, ok); /* the gated FFN's second half */
    f->emb = take(f, N * c->embed_dim, ok);
    if (c->arch == DZ_ARCH_LLAMA) f->rope_cs = take(f, (size_t)f->max_seq * c->head_dim, ok);
    f->attn_scratch = take(f, (size_t)f->scratch_threads * dz_attn_scratch_floats(c->head_dim, f->max_seq), ok);
    f->rscratch = take(f, rs, ok);
    f->rscratch_floats = rs;
    f->hlogits = take(f, (size_t)HEAD_ROW_CHUNK * HEAD_VOCAB_CHUNK, ok);
}

/* Where the weight source writes host rows bound for the backend buffer buf: buf itself
 * when the backend's buffers are host memory, else the staging buffer. */
static float *staged(const dz_forward *f, float *buf) { return f->be->host_buffers ? buf : f->stage; }

/* The staging buffer holds the largest of what is staged at once: a block's tensors, a
 * head chunk or the small globals, the embeddings of every row. */
static size_t stage_floats(const dz_forward *f, const dz_config *c) {
    const size_t N = (size_t)f->max_batch * f->max_seq;
    size_t n = f->wscratch_floats > f->rscratch_floats ? f->wscratch_floats : f->rscratch_floats;
    const size_t rows = N * (size_t)(c->embed_dim > c->dim ? c->embed_dim : c->dim);
    return n > rows ? n : rows;
}

/* Attention scratch is per thread: as many as could run (threads <= 0: this process's,
 * at least one per CPU so that raising the thread count later still uses them all). */
static int scratch_threads_for(int threads) {
    if (threads > 0) return threads;
    return dz_parallel_threads() > dz_parallel_cpus() ? dz_parallel_threads() : dz_parallel_cpus();
}

/* The rotary table, computed on the host once: in the staging buffer (the table itself
 * with host buffers, where the upload copies nothing). */
static void fill_rope_table(dz_forward *f, const dz_config *c) {
    float *host = staged(f, f->rope_cs);
    dz_rope_table_fill(host, f->max_seq, c->head_dim, c->rope_theta);
    f->be->upload(f->rope_cs, host, (size_t)f->max_seq * c->head_dim * sizeof(float));
}

size_t dz_forward_bytes_for(const dz_config *c, int max_batch, int max_seq, int kv_cache, int n_streams, int threads,
                            size_t *row_floats) {
    dz_param_table t = {0};
    stream *st = calloc((size_t)(n_streams > 0 ? n_streams : 1), sizeof *st);
    dz_forward f = {.max_batch = max_batch, .max_seq = max_seq, .kv_cache = kv_cache, .n_streams = n_streams,
                    .scratch_threads = scratch_threads_for(threads), .st = st, .count_only = 1};
    int ok = 1;
    if (st && dz_param_table_build(c, &t, NULL) == DZ_OK) {
        take_buffers(&f, c, &t, &ok);
        f.bytes += f.wscratch_floats * sizeof(float); /* the block scratch, taken at the first whole-model forward */
    }
    if (row_floats) *row_floats = f.rscratch_floats;
    dz_param_table_free(&t);
    free(st);
    return f.bytes;
}

dz_status dz_forward_create_backend(const dz_model *m, const dz_backend *backend, int max_batch, int max_seq,
                                    int kv_cache, int n_streams, dz_forward **out, dz_error *err) {
    *out = NULL;
    const dz_config *c = &m->cfg;
    if (max_batch < 1 || max_seq < 1 || n_streams < 1)
        return dz_fail(err, DZ_ERR_INVALID, "forward: batch (%d), sequence length (%d) and streams (%d) must be positive",
                       max_batch, max_seq, n_streams);
    if (c->pos_offset > 0 && max_seq > c->max_seq_len)
        return dz_fail(err, DZ_ERR_INVALID, "forward: sequence length %d exceeds the model's %d learned positions",
                       max_seq, c->max_seq_len);
    dz_forward *f = calloc(1, sizeof *f);
    stream *st = calloc((size_t)n_streams, sizeof *st);
    if (!f || !st) {
        free(f);
        free(st);
        return dz_fail(err, DZ_ERR_NOMEM, "forward: out of memory");
    }
    f->m = m;
    f->be = backend ? backend : dz_backend_cpu();
    f->max_batch = max_batch;
    f->max_seq = max_seq;
    f->kv_cache = kv_cache;
    f->n_streams = n_streams;
    f->st = st;
    const size_t N = (size_t)max_batch * max_seq;
    int ok = 1;
    for (int s = 0; s < n_streams; s++) {
        st[s].lengths = calloc((size_t)max_batch, sizeof *st[s].lengths);
        st[s].start = calloc((size_t)max_batch, sizeof *st[s].start);
        st[s].parent = calloc((size_t)max_batch, sizeof *st[s].parent);
        st[s].pos = calloc(N, sizeof *st[s].pos);
        st[s].slot = calloc(N, sizeof *st[s].slot);
        st[s].row0 = calloc((size_t)max_batch + 1, sizeof *st[s].row0);
        st[s].row_of = calloc(N, sizeof *st[s].row_of);
        st[s].parent_stream = -1;
        if (!st[s].lengths || !st[s].start || !st[s].parent || !st[s].pos || !st[s].slot || !st[s].row0 || !st[s].row_of)
            ok = 0;
    }
    f->scratch_threads = scratch_threads_for(0);
    take_buffers(f, c, &m->table, &ok);
    if (ok && !f->be->host_buffers) {
        const size_t n = stage_floats(f, c);
        f->stage = dz_alloc(n * sizeof(float));
        f->bytes += n * sizeof(float);
        if (!f->stage) ok = 0;
    }
    if (ok && f->rope_cs) fill_rope_table(f, c);
    f->pk = calloc((size_t)max_batch, sizeof *f->pk);
    f->pv = calloc((size_t)max_batch, sizeof *f->pv);
    f->ok = calloc((size_t)max_batch, sizeof *f->ok);
    f->ov = calloc((size_t)max_batch, sizeof *f->ov);
    f->start_tmp = calloc((size_t)max_batch, sizeof *f->start_tmp);
    f->row_tmp = calloc(N, sizeof *f->row_tmp);
    f->head_sets = calloc((size_t)n_streams, sizeof *f->head_sets);
    if (!f->pk || !f->pv || !f->ok || !f->ov || !f->start_tmp || !f->row_tmp || !f->head_sets) ok = 0;
    if (!ok) {
        dz_forward_free(f);
        return dz_fail(err, DZ_ERR_NOMEM, "forward: cannot allocate activations for batch %d x %d", max_batch, max_seq);
    }
    *out = f;
    return DZ_OK;
}

dz_status dz_forward_create_streams(const dz_model *m, int max_batch, int max_seq, int kv_cache, int n_streams,
                                   dz_forward **out, dz_error *err) {
    return dz_forward_create_backend(m, NULL, max_batch, max_seq, kv_cache, n_streams, out, err);
}

dz_status dz_forward_create(const dz_model *m, int max_batch, int max_seq, int kv_cache, dz_forward **out,
                            dz_error *err) {
    return dz_forward_create_backend(m, NULL, max_batch, max_seq, kv_cache, 1, out, err);
}

void dz_forward_free(dz_forward *f) {
    if (!f) return;
    for (int s = 0; s < f->n_streams; s++) {
        stream *t = &f->st[s];
        float *sb[] = {t->x, t->hsel, t->hmax, t->hsum, t->htgt, t->kcache, t->vcache};
        for (size_t i = 0; i < sizeof sb / sizeof sb[0]; i++) f->be->free(sb[i]);
        free(t->lengths);
        free(t->start);
        free(t->parent);
        free(t->pos);
        free(t->slot);
        free(t->row0);
        free(t->row_of);
    }
    free(f->st);
    float *bufs[] = {f->xb, f->q, f->kn, f->vn, f->att, f->f1, f->f2, f->emb, f->rope_cs,
                     f->attn_scratch, f->wscratch, f->rscratch, f->hlogits};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) f->be->free(bufs[i]);
    dz_free(f->stage);
    free(f->pk);
    free(f->pv);
    free(f->ok);
    free(f->ov);
    free(f->start_tmp);
    free(f->row_tmp);
    free(f->head_sets);
    free(f);
}

size_t dz_forward_bytes(const dz_forward *f) { return f->bytes; }
const dz_model *dz_forward_model(const dz_forward *f) { return f->m; }
int dz_forward_max_seq(const dz_forward *f) { return f->max_seq; }
int dz_forward_max_batch(const dz_forward *f) { return f->max_batch; }
size_t dz_forward_row_floats(const dz_forward *f) { return f->rscratch_floats; }
const dz_backend *dz_forward_backend(const dz_forward *f) { return f->be; }

/* Fetches every tensor of a block as fp32 for stream s (NULL for roles the architecture
 * lacks). The scratch for dtype conversion is allocated on first use. */
static dz_status fetch_block(dz_forward *f, const dz_weight_source *w, int s, int block, int nroles, const float **t,
                             dz_error *err) {
    const dz_model *m = f->m;
    if (!f->wscratch) {
        f->wscratch = f->be->alloc(f->wscratch_floats * sizeof(float));
        if (!f->wscratch) return dz_fail(err, DZ_ERR_NOMEM, "forward: cannot allocate the block scratch");
        f->bytes += f->wscratch_floats * sizeof(float);
    }
    float *rows_at = staged(f, f->wscratch);
    size_t off = 0;
    for (int r = 0; r < nroles; r++) {
        int id = m->ids[block][r];
        t[r] = NULL;
        if (id < 0 || read_by_rows(&m->cfg, block, r)) continue;
        const dz_param *p = &m->table.params[id];
        const size_t n = (size_t)dz_param_numel(p);
        const float *src = w->rows(w->self, s, id, 0, p->rows, rows_at + off);
        t[r] = f->be->upload_view(f->wscratch + off, src, n * sizeof(float));
        off += n;
    }
    return DZ_OK;
}

/* Small global tensors (projections, final norm) for stream s, read into rscratch. */
static void fetch_small_globals(dz_forward *f, const dz_weight_source *w, int s, const float **g) {
    const dz_model *m = f->m;
    float *rows_at = staged(f, f->rscratch);
    size_t off = 0;
    for (int r = 0; r < DZ_G_COUNT; r++) {
        const int id = m->ids[m->cfg.n_layers][r];
        g[r] = NULL;
        if (id < 0 || read_by_rows(&m->cfg, m->cfg.n_layers, r)) continue;
        const dz_param *p = &m->table.params[id];
        const size_t n = (size_t)dz_param_numel(p);
        const float *src = w->rows(w->self, s, id, 0, p->rows, rows_at + off);
        g[r] = f->be->upload_view(f->rscratch + off, src, n * sizeof(float));
        off += n;
    }
}

/* Rows src_rows[r] (+ row_offset) of tensor id for r < n, gathered by the weight source into
 * the backend buffer buf[n, cols]. */
static void gather_rows(dz_forward *f, const dz_weight_source *w, int s, int id, const int *src_rows, int row_offset,
                        int n, int cols, float *buf) {
    float *rows_at = staged(f, buf);
    for (int r = 0; r < n; r++) {
        float *dst = rows_at + (size_t)r * cols;
        const float *src = w->rows(w->self, s, id, src_rows[r] + row_offset, 1, dst);
        if (src != dst) memcpy(dst, src, sizeof(float) * cols);
    }
    f->be->upload(buf, rows_at, sizeof(float) * (size_t)n * cols);
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
        f->be->matmul(st->x, f->emb, g[DZ_G_PROJ_IN], NULL, N, c->dim, c->embed_dim);
    }
    if (pos_id < 0) return;
    gather_rows(f, w, s, pos_id, st->pos, c->pos_offset, N, c->dim, f->xb);
    f->be->add(st->x, f->xb, (size_t)N * c->dim);
}

static void norm(const dz_forward *f, float *y, const float *x, const float *wt, const float *b, int rows) {
    const dz_config *c = &f->m->cfg;
    if (c->arch == DZ_ARCH_OPT) f->be->layernorm(y, x, wt, b, rows, c->dim, c->norm_eps);
    else f->be->rmsnorm(y, x, wt, rows, c->dim, c->norm_eps);
}

void dz_forward_layer(dz_forward *f, int s, int l, const float *const *t) {
    const dz_config *c = &f->m->cfg;
    const dz_backend *be = f->be;
    stream *st = &f->st[s];
    const int N = st->n_rows, d = c->dim;
    const int qd = c->n_heads * c->head_dim, kvd = c->n_kv_heads * c->head_dim;
    const size_t layer_stride = (size_t)f->max_batch * f->max_seq * kvd, slot = (size_t)f->max_seq * kvd;
    const size_t lo = f->kv_cache ? (size_t)l * layer_stride : 0;
    float *kc = st->kcache + lo, *vc = st->vcache + lo;
    float *x = st->x;
    if (N == 0) return; /* every sequence of the stream is padding here */

    /* attention */
    const float *in = x;
    if (c->pre_norm) {
        norm(f, f->xb, x, t[DZ_L_ATTN_NORM_W], t[DZ_L_ATTN_NORM_B], N);
        in = f->xb;
    }
    be->matmul(f->q, in, t[DZ_L_WQ], t[DZ_L_BQ], N, qd, d);
    be->matmul(f->kn, in, t[DZ_L_WK], t[DZ_L_BK], N, kvd, d);
    be->matmul(f->vn, in, t[DZ_L_WV], t[DZ_L_BV], N, kvd, d);
    if (c->arch == DZ_ARCH_LLAMA) {
        be->rope(f->q, N, st->pos, c->n_heads, c->head_dim, f->rope_cs);
        be->rope(f->kn, N, st->pos, c->n_kv_heads, c->head_dim, f->rope_cs);
    }
    be->copy_rows(kc, st->slot, f->kn, NULL, N, kvd); /* keys and values into the slots, by position */
    be->copy_rows(vc, st->slot, f->vn, NULL, N, kvd);
    const stream *ps = st->parent_stream >= 0 ? &f->st[st->parent_stream] : NULL;
    for (int b = 0; b < st->B; b++) {
        f->ok[b] = kc + (size_t)b * slot;
        f->ov[b] = vc + (size_t)b * slot;
        f->pk[b] = ps ? ps->kcache + lo + (size_t)st->parent[b] * slot : f->ok[b];
        f->pv[b] = ps ? ps->vcache + lo + (size_t)st->parent[b] * slot : f->ov[b];
    }
    dz_attn_args a = {
        .batch = st->B, .n_new = st->n_new, .max_keys = f->max_seq,
        .n_heads = c->n_heads, .n_kv_heads = c->n_kv_heads, .head_dim = c->head_dim,
        .start = st->start, .lengths = st->lengths, .row0 = st->row0, .prefix_k = f->pk, .prefix_v = f->pv, .own_k = f->ok,
        .own_v = f->ov, .scale = 1.0f / sqrtf((float)c->head_dim), .scratch = f->attn_scratch,
        .scratch_threads = f->scratch_threads,
    };
    be->attention(f->att, f->q, &a);
    be->matmul(f->xb, f->att, t[DZ_L_WO], t[DZ_L_BO], N, d, qd);
    be->add(x, f->xb, (size_t)N * d);
    if (!c->pre_norm) norm(f, x, x, t[DZ_L_ATTN_NORM_W], t[DZ_L_ATTN_NORM_B], N);

    /* feed-forward */
    in = x;
    if (c->pre_norm) {
        norm(f, f->xb, x, t[DZ_L_FFN_NORM_W], t[DZ_L_FFN_NORM_B], N);
        in = f->xb;
    }
    const size_t nh = (size_t)N * c->hidden_dim;
    if (c->arch == DZ_ARCH_OPT) {
        be->matmul(f->f1, in, t[DZ_L_W_UP], t[DZ_L_B_UP], N, c->hidden_dim, d);
        be->relu(f->f1, nh);
    } else {
        be->matmul(f->f1, in, t[DZ_L_W_GATE], NULL, N, c->hidden_dim, d);
        be->matmul(f->f2, in, t[DZ_L_W_UP], NULL, N, c->hidden_dim, d);
        be->swiglu(f->f1, f->f2, nh);
    }
    be->matmul(f->att, f->f1, t[DZ_L_W_DOWN], t[DZ_L_B_DOWN], N, d, c->hidden_dim);
    be->add(x, f->att, (size_t)N * d);
    if (!c->pre_norm) norm(f, x, x, t[DZ_L_FFN_NORM_W], t[DZ_L_FFN_NORM_B], N);
    be->synchronize(); /* the caller may rewrite t's buffers once this returns */
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
            st->pos[n] = st->start[b] + t;
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
    f->be->copy_rows(f->xb, NULL, st->x, f->row_tmp, nrows, c->dim);
    const float *g[DZ_ROLE_MAX];
    fetch_small_globals(f, w, s, g);
    if (g[DZ_G_FINAL_NORM_W]) norm(f, f->xb, f->xb, g[DZ_G_FINAL_NORM_W], g[DZ_G_FINAL_NORM_B], nrows);
    if (g[DZ_G_PROJ_OUT]) f->be->matmul(st->hsel, f->xb, g[DZ_G_PROJ_OUT], NULL, nrows, c->embed_dim, c->dim);
    else f->be->copy_rows(st->hsel, NULL, f->xb, NULL, nrows, c->dim);
    return DZ_OK;
}

/* Streams the head over vocabulary chunks, each chunk visited once for all the sets (in
 * their order): logits out (set 0 only, if non-NULL) and/or the online log-sum-exp with
 * each row's target logit (if the set has targets). */
static dz_status head(dz_forward *f, const dz_weight_source *w, int n_sets, const dz_head_rows *sets, float *logits,
                      dz_error *err) {
    const dz_model *m = f->m;
    const dz_config *c = &m->cfg;
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
    for (int k = 0; k < n_sets; k++) {
        const int s = sets[k].stream;
        dz_status st = head_inputs(f, w, s, sets[k].rows, sets[k].nrows, err);
        if (st != DZ_OK) return st;
        f->be->fill(f->st[s].hmax, -INFINITY, (size_t)sets[k].nrows);
        f->be->fill(f->st[s].hsum, 0.0f, (size_t)sets[k].nrows);
    }
    const int head_id = m->ids[c->n_layers][c->tied_head ? DZ_G_TOK_EMB : DZ_G_LM_HEAD];
    for (int v0 = 0; v0 < c->vocab_size; v0 += HEAD_VOCAB_CHUNK) {
        const int nv = c->vocab_size - v0 < HEAD_VOCAB_CHUNK ? c->vocab_size - v0 : HEAD_VOCAB_CHUNK;
        for (int k = 0; k < n_sets; k++) {
            const int s = sets[k].stream, nrows = sets[k].nrows;
            const int *targets = sets[k].targets;
            stream *st = &f->st[s];
            if (nrows == 0) continue;
            const float *host = w->view ? w->view(w->self, s, head_id, v0, nv) : NULL; /* a step's -eps chunk */
            if (!host) host = w->rows(w->self, s, head_id, v0, nv, staged(f, f->rscratch));
            const float *wchunk = f->be->upload_view(f->rscratch, host, sizeof(float) * (size_t)nv * c->embed_dim);
            for (int r0 = 0; r0 < nrows; r0 += HEAD_ROW_CHUNK) {
                const int nr = nrows - r0 < HEAD_ROW_CHUNK ? nrows - r0 : HEAD_ROW_CHUNK;
                f->be->matmul(f->hlogits, st->hsel + (size_t)r0 * c->embed_dim, wchunk, NULL, nr, nv, c->embed_dim);
                if (logits && k == 0)
                    for (int r = 0; r < nr; r++)
                        f->be->download(logits + (size_t)(r0 + r) * c->vocab_size + v0, f->hlogits + (size_t)r * nv,
                                        sizeof(float) * nv);
                if (!targets) continue;
                f->be->logsumexp_update(f->hlogits, nr, nv, st->hmax + r0, st->hsum + r0);
                f->be->pick_target(st->htgt + r0, f->hlogits, nr, nv, targets + r0, v0);
            }
        }
    }
    for (int k = 0; k < n_sets; k++) {
        const stream *st = &f->st[sets[k].stream];
        if (!sets[k].targets) continue;
        f->be->logprob_finish(st->htgt, st->htgt, st->hmax, st->hsum, sets[k].nrows);
        f->be->download(sets[k].logprobs, st->htgt, sizeof(float) * (size_t)sets[k].nrows);
    }
    return DZ_OK;
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

dz_status dz_forward_layers(dz_forward *f, const dz_weight_source *w, int n_streams, const int *streams, dz_error *err) {
    const float *t[DZ_ROLE_MAX];
    dz_status st = DZ_OK;
    for (int l = 0; st == DZ_OK && l < f->m->cfg.n_layers; l++)
        for (int k = 0; st == DZ_OK && k < n_streams; k++) {
            st = fetch_block(f, w, streams[k], l, DZ_L_COUNT, t, err);
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
