/* A forward's buffers (forward_internal.h): what dz_forward_create_backend allocates from
 * the backend, counted the same way by dz_forward_bytes_for before any exists; the
 * accessors and the release. All are sized at creation, the block scratch on first use. */
#include <stdlib.h>
#include <string.h>

#include "core/threads.h"
#include "core/util.h"
#include "model/forward_internal.h"
#include "model/forward_pair.h"

/* A backend buffer of the forward; with count_only set nothing is allocated, only counted,
 * so dz_forward_bytes_for predicts exactly what create allocates. */
static float *take(dz_forward *f, size_t floats, int *ok) {
    f->bytes += floats * sizeof(float);
    if (f->count_only) return NULL;
    float *p = f->be->ops->alloc(f->be, floats * sizeof(float));
    if (!p) *ok = 0;
    return p;
}

static size_t block_floats(const dz_config *c, const dz_param_table *t, int block) {
    size_t n = 0;
    for (int i = 0; i < t->count; i++) {
        const dz_param *p = &t->params[i];
        if (p->block == block && !read_by_rows(c, block, p->role)) n += (size_t)dz_param_numel(p);
    }
    return n;
}

/* One stream's per-layer scratch, f1 / f2 of ffn_rows rows (the second of a layer pair
 * takes another). */
static layer_bufs take_layer_bufs(dz_forward *f, const dz_config *c, size_t ffn_rows, int *ok) {
    const size_t N = (size_t)f->max_batch * f->max_seq;
    const size_t qd = (size_t)c->n_heads * c->head_dim, kvd = (size_t)c->n_kv_heads * c->head_dim;
    layer_bufs b = {0};
    b.xb = take(f, N * c->dim, ok);
    b.q = take(f, N * qd, ok);
    b.kn = take(f, N * kvd, ok);
    b.vn = take(f, N * kvd, ok);
    b.att = take(f, N * (qd > (size_t)c->dim ? qd : (size_t)c->dim), ok);
    b.f1 = take(f, ffn_rows * c->hidden_dim, ok);
    if (c->arch == DZ_ARCH_LLAMA) b.f2 = take(f, ffn_rows * c->hidden_dim, ok); /* the gated FFN's second half */
    return b;
}

/* Every float buffer of a forward of f's shape (max_batch, max_seq, kv_cache, n_streams
 * and scratch_threads set): allocated, or only counted when f->count_only. */
static void take_buffers(dz_forward *f, const dz_config *c, const dz_param_table *t, int *ok) {
    const size_t N = (size_t)f->max_batch * f->max_seq;
    const size_t kvd = (size_t)c->n_kv_heads * c->head_dim;
    const size_t hdim = (size_t)(c->embed_dim > c->dim ? c->embed_dim : c->dim);
    const size_t head_rows = N < HEAD_ROW_CHUNK ? N : HEAD_ROW_CHUNK; /* the head runs a row chunk at a time */
    f->wscratch_floats = block_floats(c, t, 0);
    size_t rs = (size_t)HEAD_VOCAB_CHUNK * hdim;
    if (block_floats(c, t, c->n_layers) > rs) rs = block_floats(c, t, c->n_layers);
    for (int s = 0; s < f->n_streams; s++) {
        stream *st = &f->st[s];
        st->x = take(f, N * c->dim, ok);
        st->hsel = take(f, head_rows * hdim, ok);
        st->hmax = take(f, N, ok);
        st->hsum = take(f, N, ok);
        st->htgt = take(f, N, ok);
        const size_t layers = f->kv_cache ? (size_t)c->n_layers : 1;
        st->kcache = take(f, layers * N * kvd, ok);
        st->vcache = take(f, layers * N * kvd, ok);
    }
    const size_t ffn_rows = N < FFN_ROW_CHUNK ? N : FFN_ROW_CHUNK; /* the feed-forward runs a row chunk at a time */
    const layer_bufs lb = take_layer_bufs(f, c, ffn_rows, ok);
    f->xb = lb.xb, f->q = lb.q, f->kn = lb.kn, f->vn = lb.vn, f->att = lb.att, f->f1 = lb.f1, f->f2 = lb.f2;
    if (c->embed_dim != c->dim) f->emb = take(f, N * c->embed_dim, ok); /* project_in's input */
    if (c->arch == DZ_ARCH_LLAMA) f->rope_cs = take(f, (size_t)f->max_seq * c->head_dim, ok);
    f->attn_scratch = take(f, (size_t)f->scratch_threads * dz_attn_scratch_floats(c->head_dim, f->max_seq), ok);
    f->rscratch = take(f, rs, ok);
    f->rscratch_floats = rs;
    f->hlogits = take(f, (size_t)HEAD_ROW_CHUNK * HEAD_VOCAB_CHUNK, ok);
}

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
    f->be->ops->upload(f->be, f->rope_cs, host, (size_t)f->max_seq * c->head_dim * sizeof(float));
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
    if (!out || !m) return dz_fail(err, DZ_ERR_INVALID, "forward: no model or no place for the forward given (NULL)");
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

/* The host arrays, freed in a list as the backend's buffers are. */
static void free_each(void *const *p, size_t n) {
    for (size_t i = 0; i < n; i++) free(p[i]);
}

void dz_forward_free(dz_forward *f) {
    if (!f) return;
    for (int s = 0; s < f->n_streams; s++) {
        stream *t = &f->st[s];
        float *sb[] = {t->x, t->hsel, t->hmax, t->hsum, t->htgt, t->kcache, t->vcache};
        for (size_t i = 0; i < sizeof sb / sizeof sb[0]; i++) f->be->ops->free(f->be, sb[i]);
        void *host[] = {t->lengths, t->start, t->parent, t->pos, t->slot, t->row0, t->row_of};
        free_each(host, sizeof host / sizeof host[0]);
    }
    free(f->st);
    const layer_bufs *pb = &f->pair_bufs[1];
    float *bufs[] = {f->xb, f->q, f->kn, f->vn, f->att, f->f1, f->f2, f->emb, f->rope_cs,
                     f->attn_scratch, f->wscratch, f->rscratch, f->hlogits,
                     pb->xb, pb->q, pb->kn, pb->vn, pb->att, pb->f1, pb->f2, f->pair_bufs[0].f1, f->pair_bufs[0].f2};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) f->be->ops->free(f->be, bufs[i]);
    dz_free(f->stage);
    dz_forward_lora_free(f);
    void *host[] = {f->pk, f->pv, f->ok, f->ov, f->start_tmp, f->row_tmp, f->head_sets};
    free_each(host, sizeof host / sizeof host[0]);
    free(f);
}

/* A layer pair's scratch: the -eps stream's, and for the +eps stream f1 / f2 of every row
 * (a pair's feed-forward runs its rows at once), the rest of it this forward's own. */
dz_status dz_forward_pair_reserve(dz_forward *f, dz_error *err) {
    if (f->pair_bufs[1].xb) return DZ_OK;
    const dz_config *c = &f->m->cfg;
    const size_t N = (size_t)f->max_batch * f->max_seq, bytes0 = f->bytes;
    int ok = 1;
    const layer_bufs minus = take_layer_bufs(f, c, N, &ok);
    layer_bufs plus = {f->xb, f->q, f->kn, f->vn, f->att, NULL, NULL};
    plus.f1 = take(f, N * c->hidden_dim, &ok);
    if (c->arch == DZ_ARCH_LLAMA) plus.f2 = take(f, N * c->hidden_dim, &ok);
    if (ok) {
        f->pair_bufs[0] = plus, f->pair_bufs[1] = minus;
        return DZ_OK;
    }
    float *each[] = {minus.xb, minus.q, minus.kn, minus.vn, minus.att, minus.f1, minus.f2, plus.f1, plus.f2};
    for (size_t i = 0; i < sizeof each / sizeof each[0]; i++) f->be->ops->free(f->be, each[i]);
    f->bytes = bytes0;
    return dz_fail(err, DZ_ERR_NOMEM, "forward: cannot allocate the layer pair's scratch");
}

size_t dz_forward_bytes(const dz_forward *f) { return f->bytes; }
const dz_model *dz_forward_model(const dz_forward *f) { return f->m; }
int dz_forward_max_seq(const dz_forward *f) { return f->max_seq; }
int dz_forward_max_batch(const dz_forward *f) { return f->max_batch; }
size_t dz_forward_row_floats(const dz_forward *f) { return f->rscratch_floats; }
const dz_backend *dz_forward_backend(const dz_forward *f) { return f->be; }
