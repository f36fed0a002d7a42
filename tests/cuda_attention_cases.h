/* Attention cases run on a CUDA backend instance (backend/cuda/cuda_backend.h) and on the
 * reference backend, compared to a tolerance: through the host seam in the CPU suite
 * (test_cuda_attention.c), through the CUDA runtime on a GPU (test_cuda_gpu.c).
 *
 * A case is a batch of sequences, each with its first query position (start), its length
 * (one past its last real position), its rows in q and out (the real ones, then padding)
 * and the sequence whose key/value slot holds its positions below start (itself, or
 * another: a tree batch's continuation of a prompt). Each sequence's slot is a device
 * buffer of exactly `length` positions, so a read past the keys it has is an overrun the
 * host seam reports. q holds N(0, 1) values; keys grow with their position, so the running
 * max of a row moves from one key tile to the next (the rescaling is exercised). The
 * instance's out starts as garbage, so a row it fails to write (padding included) fails.
 * Header-only, for those two tests (after cmocka.h). */
#ifndef DZ_TESTS_CUDA_ATTENTION_CASES_H
#define DZ_TESTS_CUDA_ATTENTION_CASES_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "backend/backend.h"

#define ATTN_MAX_SEQS 4
#define ATTN_TOL 1e-5 /* max |got - want| / (1 + |want|): test_backend_ops' attention tolerance */
#define ATTN_GARBAGE 0xFF /* out's bytes before the op: NaN (a small float such as 0xA5A5A5A5 would pass for 0) */

typedef struct attn_seq_spec {
    int start, length, rows;
    int prefix_of; /* the sequence whose slot holds positions < start (-1: its own) */
} attn_seq_spec;

typedef struct attn_layout {
    const char *name;
    int packed; /* rows through row0 (else every sequence has n_new = rows rows) */
    int batch;
    attn_seq_spec seq[ATTN_MAX_SEQS];
    int n_virtual; /* prefix tuning's rows (a buffer of their own) that every query sees first */
} attn_layout;

static const attn_layout attn_layouts[] = {
    /* same-length rows, padding at the end of two; one sequence all padding */
    {"padded batch", 0, 4, {{0, 24, 24, -1}, {0, 17, 24, -1}, {0, 5, 24, -1}, {0, 0, 24, -1}}, 0},
    /* a prompt and continuations reading its slot below their start: a whole one, a
     * branch at position 5 with padding, one whose start is past its length (all padding) */
    {"tree batch", 0, 4, {{0, 9, 9, -1}, {9, 16, 9, 0}, {5, 12, 9, 0}, {12, 10, 9, 1}}, 0},
    /* packed rows (row0): a sequence of no rows, one of more rows than a query tile with a
     * prefix of another's slot, padding rows between sequences */
    {"packed rows", 1, 4, {{0, 7, 7, -1}, {0, 20, 23, -1}, {4, 9, 0, 0}, {3, 70, 67, 1}}, 0},
    /* long: 300 keys (ten key tiles), 300 and 50 query rows, a continuation from 250 */
    {"long", 1, 2, {{0, 300, 300, -1}, {250, 300, 50, 0}}, 0},
    /* 37 virtual rows (more than a key tile) before a tree batch's keys, packed */
    {"virtual rows", 1, 3, {{0, 9, 9, -1}, {9, 16, 7, 0}, {2, 40, 38, -1}}, 37},
};

/* One case's inputs on the host and on the instance, and the reference's result. */
typedef struct attn_run {
    const attn_layout *lay;
    int hd, heads, kv, total_rows, n_new;
    size_t out_floats;
    float *q, *k[ATTN_MAX_SEQS], *v[ATTN_MAX_SEQS], *want, *got; /* host */
    float *dq, *dk[ATTN_MAX_SEQS], *dv[ATTN_MAX_SEQS], *dout;    /* the instance's buffers */
    float *vk, *vv, *dvk, *dvv; /* the virtual rows, host and instance (NULL: none) */
    int start[ATTN_MAX_SEQS], lengths[ATTN_MAX_SEQS], row0[ATTN_MAX_SEQS + 1];
    const float *pk[ATTN_MAX_SEQS], *pv[ATTN_MAX_SEQS], *ok[ATTN_MAX_SEQS], *ov[ATTN_MAX_SEQS];
    dz_attn_args args; /* the instance's (device pointers) */
} attn_run;

static float *attn_floats(size_t n) {
    float *p = malloc(sizeof(float) * (n ? n : 1));
    assert_non_null(p);
    return p;
}

static float *attn_upload(const dz_backend *be, const float *host, size_t n) {
    float *d = be->ops->alloc(be, sizeof(float) * n);
    if (n) assert_non_null(d);
    be->ops->upload(be, d, host, sizeof(float) * n);
    return d;
}

/* The args over slots k, v (host or device) and q's layout. */
static dz_attn_args attn_args_of(attn_run *r, const float *const *k, const float *const *v, const float **pk,
                                 const float **pv, const float **ok, const float **ov, const float *vk,
                                 const float *vv) {
    for (int b = 0; b < r->lay->batch; b++) {
        const int p = r->lay->seq[b].prefix_of < 0 ? b : r->lay->seq[b].prefix_of;
        pk[b] = k[p], pv[b] = v[p], ok[b] = k[b], ov[b] = v[b];
    }
    return (dz_attn_args){.batch = r->lay->batch, .n_new = r->n_new, .max_keys = 300, .n_heads = r->heads,
                          .n_kv_heads = r->kv, .head_dim = r->hd, .start = r->start, .lengths = r->lengths,
                          .row0 = r->lay->packed ? r->row0 : NULL, .prefix_k = pk, .prefix_v = pv, .own_k = ok,
                          .own_v = ov, .scale = 1.0f / sqrtf((float)r->hd), .n_virtual = r->lay->n_virtual,
                          .virtual_k = vk, .virtual_v = vv};
}

/* Host data of the case, the reference's result in want. */
static void attn_host_make(attn_run *r, const attn_layout *lay, int hd, int kv) {
    memset(r, 0, sizeof *r);
    r->lay = lay, r->hd = hd, r->heads = 4, r->kv = kv;
    uint64_t rng = 0x5eed0000u + (uint64_t)hd * 16 + (uint64_t)kv;
    for (int b = 0; b < lay->batch; b++) {
        const attn_seq_spec *s = &lay->seq[b];
        r->start[b] = s->start, r->lengths[b] = s->length, r->row0[b] = r->total_rows;
        r->total_rows += lay->packed ? s->rows : lay->seq[0].rows;
        const size_t n = (size_t)s->length * kv * hd;
        r->k[b] = attn_floats(n), r->v[b] = attn_floats(n);
        for (size_t i = 0; i < n; i++) {
            const double grow = 0.5 + (double)(i / ((size_t)kv * hd)) / 100.0; /* by position */
            r->k[b][i] = (float)(grow * dz_normal(&rng)), r->v[b][i] = (float)dz_normal(&rng);
        }
    }
    if (lay->n_virtual) {
        const size_t n = (size_t)lay->n_virtual * kv * hd;
        r->vk = attn_floats(n), r->vv = attn_floats(n);
        for (size_t i = 0; i < n; i++) r->vk[i] = (float)dz_normal(&rng), r->vv[i] = (float)dz_normal(&rng);
    }
    r->row0[lay->batch] = r->total_rows, r->n_new = lay->seq[0].rows;
    r->out_floats = (size_t)r->total_rows * r->heads * hd;
    r->q = attn_floats(r->out_floats), r->want = attn_floats(r->out_floats), r->got = attn_floats(r->out_floats);
    for (size_t i = 0; i < r->out_floats; i++) r->q[i] = (float)dz_normal(&rng);
    const float *pk[ATTN_MAX_SEQS], *pv[ATTN_MAX_SEQS], *ok[ATTN_MAX_SEQS], *ov[ATTN_MAX_SEQS];
    const dz_attn_args ref_args =
        attn_args_of(r, (const float *const *)r->k, (const float *const *)r->v, pk, pv, ok, ov, r->vk, r->vv);
    const dz_backend *ref = dz_backend_ref(); /* its ops take host pointers (backend.h) */
    ref->ops->attention(ref, r->want, r->q, &ref_args);
}

/* The case's inputs as buffers of be, out filled with garbage (NaN). */
static void attn_device_make(attn_run *r, const dz_backend *be) {
    for (int b = 0; b < r->lay->batch; b++) {
        const size_t n = (size_t)r->lay->seq[b].length * r->kv * r->hd;
        r->dk[b] = attn_upload(be, r->k[b], n), r->dv[b] = attn_upload(be, r->v[b], n);
    }
    r->dq = attn_upload(be, r->q, r->out_floats);
    memset(r->got, ATTN_GARBAGE, sizeof(float) * r->out_floats);
    r->dout = attn_upload(be, r->got, r->out_floats);
    const size_t nv = (size_t)r->lay->n_virtual * r->kv * r->hd;
    r->dvk = nv ? attn_upload(be, r->vk, nv) : NULL, r->dvv = nv ? attn_upload(be, r->vv, nv) : NULL;
    r->args = attn_args_of(r, (const float *const *)r->dk, (const float *const *)r->dv, r->pk, r->pv, r->ok, r->ov,
                           r->dvk, r->dvv);
}

static void attn_case_make(attn_run *r, const dz_backend *be, const attn_layout *lay, int hd, int kv) {
    attn_host_make(r, lay, hd, kv);
    attn_device_make(r, be);
}

/* The instance's result (after its synchronize) against the reference's: the worst
 * relative error (NaN and garbage count as infinite). */
static double attn_case_error(attn_run *r, const dz_backend *be) {
    be->ops->synchronize(be);
    be->ops->download(be, r->got, r->dout, sizeof(float) * r->out_floats);
    double worst = 0.0;
    for (size_t i = 0; i < r->out_floats; i++) {
        const double e = fabs((double)r->got[i] - r->want[i]) / (1.0 + fabs((double)r->want[i]));
        if (!(e <= worst)) worst = isnan(e) ? INFINITY : e;
    }
    return worst;
}

static void attn_device_free(attn_run *r, const dz_backend *be) {
    for (int b = 0; b < r->lay->batch; b++) be->ops->free(be, r->dk[b]), be->ops->free(be, r->dv[b]);
    be->ops->free(be, r->dq), be->ops->free(be, r->dout);
    be->ops->free(be, r->dvk), be->ops->free(be, r->dvv);
}

static void attn_case_free(attn_run *r, const dz_backend *be) {
    attn_device_free(r, be);
    for (int b = 0; b < r->lay->batch; b++) free(r->k[b]), free(r->v[b]);
    free(r->q), free(r->want), free(r->got), free(r->vk), free(r->vv);
}

/* r's case run on instance twin gives the bits r->got holds. */
static void attn_twin_same_bits(const attn_run *r, const dz_backend *twin) {
    attn_run t = *r; /* the host data; its own buffers and result */
    t.got = attn_floats(r->out_floats);
    attn_device_make(&t, twin);
    twin->ops->attention(twin, t.dout, t.dq, &t.args);
    attn_case_error(&t, twin);
    for (size_t i = 0; i < r->out_floats; i++)
        if (memcmp(&t.got[i], &r->got[i], sizeof(float)))
            fail_msg("attention, %s, head_dim %d, %d kv heads: element %zu is %.9g, %.9g on the twin instance",
                     r->lay->name, r->hd, r->kv, i, r->got[i], t.got[i]);
    attn_device_free(&t, twin);
    free(t.got);
}

/* Layout lay at head_dim hd with 4 query heads on kv kv heads: the instance's error. With
 * twin (another instance: the GPU's test gives the host seam's), twin must give be's bits. */
static double attn_case_check(const dz_backend *be, const dz_backend *twin, const attn_layout *lay, int hd, int kv) {
    attn_run r;
    attn_case_make(&r, be, lay, hd, kv);
    be->ops->attention(be, r.dout, r.dq, &r.args);
    const double e = attn_case_error(&r, be);
    if (twin) attn_twin_same_bits(&r, twin);
    attn_case_free(&r, be);
    return e;
}

static double attn_case_within_tol(const dz_backend *be, const dz_backend *twin, const attn_layout *lay, int hd,
                                   int kv) {
    const double e = attn_case_check(be, twin, lay, hd, kv);
    if (!(e <= ATTN_TOL))
        fail_msg("attention, %s, head_dim %d, %d kv heads: relative error %.3g > %.1g on %s", lay->name, hd, kv, e,
                 ATTN_TOL, be->name);
    return e;
}

/* Every layout (the long one at head_dim 64 only: the reference is slow) at head_dim 8,
 * 16 and 64 with 4, 2 and 1 kv heads, and the tree batch at head_dim 100 and 256 (the
 * kernel's larger row arrays; 64 KiB of staged tiles at 256), each within ATTN_TOL and,
 * with twin, bitwise twin's; the worst error seen. */
static double attn_every_case_matches_ref(const dz_backend *be, const dz_backend *twin) {
    static const int hds[] = {8, 16, 64}, kvs[] = {4, 2, 1}, wide[] = {100, 256};
    double worst = 0.0;
    for (size_t l = 0; l < sizeof attn_layouts / sizeof attn_layouts[0]; l++)
        for (int h = 0; h < 3; h++)
            for (int k = 0; k < 3; k++) {
                const attn_layout *lay = &attn_layouts[l];
                if (strcmp(lay->name, "long") == 0 && hds[h] != 64) continue;
                worst = fmax(worst, attn_case_within_tol(be, twin, lay, hds[h], kvs[k]));
            }
    for (int w = 0; w < 2; w++) worst = fmax(worst, attn_case_within_tol(be, twin, &attn_layouts[1], wide[w], 2));
    return worst;
}

#endif
