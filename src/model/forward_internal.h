/* The forward's state, private to src/model: forward_buffers.c creates and sizes it,
 * forward.c runs the pass over it. */
#ifndef DZ_MODEL_FORWARD_INTERNAL_H
#define DZ_MODEL_FORWARD_INTERNAL_H

#include "backend/backend.h"
#include "model/model_internal.h"

enum { HEAD_VOCAB_CHUNK = 4096, HEAD_ROW_CHUNK = 512 };
/* The feed-forward runs this many rows at a time (f1, f2): two of the GEMM's 240-row blocks. */
enum { FFN_ROW_CHUNK = 480 };

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
    float *hsel;        /* [HEAD_ROW_CHUNK, embed_dim] hidden states of a row chunk entering the head */
    float *hmax, *hsum, *htgt;
} stream;

/* The per-layer scratch of one stream's pass through a layer. */
typedef struct layer_bufs {
    float *xb, *q, *kn, *vn, *att, *f1, *f2;
} layer_bufs;

struct dz_forward {
    const dz_model *m;
    const dz_backend *be;
    int max_batch, max_seq, kv_cache, scratch_threads, n_streams;
    stream *st;
    float *xb, *q, *kn, *vn, *att, *f1, *f2; /* f1, f2: FFN_ROW_CHUNK rows (the feed-forward's chunks) */
    float *emb;           /* project_in's input (NULL without project_in) */
    layer_bufs pair_bufs[2]; /* a layer pair's (forward_pair.h), on first use: [0] the +eps stream's
                                (this forward's own, but f1 / f2 of every row), [1] the -eps one's */
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
    int count_only;
    /* a LoRA adapter (forward_lora.c): its model (table, spec), the source of its tensors,
     * (alpha / r), and buffers for x A^T [rows, r], its B product [rows, widest output]
     * and the adapter tensors of one layer */
    const dz_model *lora;
    dz_weight_source lora_src;
    float lora_scale;
    float *lora_r, *lora_o, *lora_w;
    size_t lora_bytes;
    float *lora_host;   /* a backend without host buffers: the adapter's rows and the scale staged here */
    /* a prefix adapter (forward_prefix.c): its N virtual rows per layer come in t[] at
     * DZ_L_PREFIX_K/V; the sequences' tokens sit at positions N.., so the rotary table
     * and the attention scratch cover max_seq + N */
    int n_virtual;
    float *virt_rope, *virt_scratch;     /* dz_forward_bytes_for: sizes without buffers */
};

/* Embeddings and the head are read a few rows at a time, never whole. */
static inline int read_by_rows(const dz_config *c, int block, int role) {
    return block == c->n_layers && (role == DZ_G_TOK_EMB || role == DZ_G_POS_EMB || role == DZ_G_LM_HEAD);
}

/* Where the weight source writes host rows bound for the backend buffer buf: buf itself
 * when the backend's buffers are host memory, else the staging buffer. */
static inline float *staged(const dz_forward *f, float *buf) { return f->be->host_buffers ? buf : f->stage; }

/* forward_lora.c: y[N, out] += (alpha / r) (in A^T) B^T when the adapter targets the
 * projection of base role `role` (t[] holds its A and B); nothing otherwise. */
void dz_forward_lora_add(dz_forward *f, float *y, const float *in, const float *const *t, int role, int N, int out,
                         int in_dim);
/* The adapter's tensors of layer l into t's adapter roles (NULL without an adapter). */
void dz_forward_lora_fetch(dz_forward *f, int s, int l, const float **t);
void dz_forward_lora_free(dz_forward *f);
/* forward_prefix.c: a prefix adapter's buffers (the rotary table and attention scratch
 * for max_seq + N keys), counted in lora_bytes; its free. */
dz_status dz_forward_prefix_attach(dz_forward *f, int n_tokens, dz_error *err);
void dz_forward_prefix_free(dz_forward *f);

#endif
