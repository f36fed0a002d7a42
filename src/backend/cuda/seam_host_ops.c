/* The host seam's work (seam_host.h): copies, GEMM as cuBLAS defines it (column-major,
 * op(A) m x k, op(B) k x n, C m x n, leading dimensions at least the stored rows) by a
 * reference loop, and the ZO kernels by the element code they run (backend/zo_element.h).
 * Each call checks its arguments as cuBLAS and the runtime do, and every range it will
 * touch against its buffer, before it is queued. */
#include "backend/cuda/seam_host.h"

#include <stdio.h>
#include <string.h>

#include "distzo/dtype.h"

static const char *copy_name(dz_cuda_copy k) { return k == DZ_COPY_H2D ? "H2D" : k == DZ_COPY_D2H ? "D2H" : "D2D"; }

static int copy_checks(hs_state *h, void *dst, const void *src, size_t n, dz_cuda_copy kind) {
    char what[64];
    snprintf(what, sizeof what, "memcpy_async %s destination", copy_name(kind));
    int st = kind == DZ_COPY_D2H ? hs_check_host(h, dst, n, what) : hs_check_device(h, dst, n, what);
    if (st != DZ_CUDA_OK) return st;
    snprintf(what, sizeof what, "memcpy_async %s source", copy_name(kind));
    return kind == DZ_COPY_H2D ? hs_check_host(h, src, n, what) : hs_check_device(h, src, n, what);
}

static int memcpy_async(dz_cuda_seam *s, void *dst, const void *src, size_t n, dz_cuda_copy kind, dz_cuda_stream st) {
    hs_state *h = hs_of(s);
    int i = 0, status = hs_stream_index(h, st, &i);
    if (status == DZ_CUDA_OK && n > 0) status = copy_checks(h, dst, src, n, kind);
    if (status != DZ_CUDA_OK || n == 0) return status;
    hs_op op = {.kind = HS_COPY, .nr = 2, .u.copy = {.dst = dst, .src = src, .n = n, .host_src = kind == DZ_COPY_H2D}};
    op.r[0] = (hs_range){(uintptr_t)src, (uintptr_t)src + n, 0};
    op.r[1] = (hs_range){(uintptr_t)dst, (uintptr_t)dst + n, 1};
    status = hs_enqueue(h, i, &op);
    if (status == DZ_CUDA_OK) h->copied[kind] += n;
    if (status != DZ_CUDA_OK || kind == DZ_COPY_D2D) return status;
    /* H2D: a download into its source that happens before it (a write-back another stream
     * made, ordered by an event) has run by the time this copy reads, so the checksum is
     * taken after it. D2H: what happens before it is run before the poison goes in. */
    status = hs_settle(h, i, kind == DZ_COPY_H2D ? 0 : 1);
    if (kind == DZ_COPY_H2D) {
        hs_stream *q = &h->streams[i];
        q->ops[q->n - 1].u.copy.src_sum = hs_checksum(src, n);
        return status;
    }
    memset(dst, 0xFF, n); /* poison until it runs */
    return status;
}

static size_t dtype_size(dz_cuda_dtype t) { return t == DZ_CUDA_R_16BF ? 2 : 4; }

static float load(const void *p, dz_cuda_dtype t, size_t i) {
    return t == DZ_CUDA_R_16BF ? dz_bf16_widen(((const uint16_t *)p)[i]) : ((const float *)p)[i];
}

/* A column-major operand of `rows` stored rows (>= 1 checked) and `cols` columns. */
static int operand_checks(hs_state *h, hs_op *op, const void *p, dz_cuda_dtype t, int rows, int cols, int ld,
                          const char *name, int write) {
    const int need = rows > 1 ? rows : 1;
    if (ld < need) return hs_fail(h, DZ_CUDA_ERR_INVALID, "gemm: ld%s = %d < %d, the rows of %s", name, ld, need, name);
    if (rows == 0 || cols == 0) return DZ_CUDA_OK;
    const size_t bytes = ((size_t)(cols - 1) * (size_t)ld + (size_t)rows) * dtype_size(t);
    char what[32];
    snprintf(what, sizeof what, "gemm: %s", name);
    const int st = hs_check_device(h, p, bytes, what);
    if (st == DZ_CUDA_OK) op->r[op->nr++] = (hs_range){(uintptr_t)p, (uintptr_t)p + bytes, write};
    return st;
}

static int gemm_checks(hs_state *h, hs_op *op) {
    const hs_gemm *g = &op->u.gemm;
    if (g->m < 0 || g->n < 0 || g->k < 0)
        return hs_fail(h, DZ_CUDA_ERR_INVALID, "gemm: m, n, k = %d, %d, %d", g->m, g->n, g->k);
    if (g->ct == DZ_CUDA_R_16BF && g->at != DZ_CUDA_R_16BF)
        return hs_fail(h, DZ_CUDA_ERR_INVALID, "gemm: a bf16 C takes bf16 A and B");
    const int k = g->m && g->n ? g->k : 0; /* A and B are read only when C has elements */
    int st = operand_checks(h, op, g->A, g->at, g->ta == DZ_GEMM_N ? g->m : k, g->ta == DZ_GEMM_N ? k : g->m, g->lda,
                            "A", 0);
    if (st == DZ_CUDA_OK)
        st = operand_checks(h, op, g->B, g->bt, g->tb == DZ_GEMM_N ? k : g->n, g->tb == DZ_GEMM_N ? g->n : k, g->ldb,
                            "B", 0);
    if (st == DZ_CUDA_OK) st = operand_checks(h, op, g->C, g->ct, g->m, g->n, g->ldc, "C", 1);
    return st;
}

/* C = alpha op(A) op(B) + beta C, each product summed in double and rounded once. */
static void gemm_run(const hs_gemm *g) {
    for (int j = 0; j < g->n; j++)
        for (int i = 0; i < g->m; i++) {
            double acc = 0.0;
            for (int l = 0; l < g->k; l++) {
                const size_t a = g->ta == DZ_GEMM_N ? (size_t)l * g->lda + i : (size_t)i * g->lda + l;
                const size_t b = g->tb == DZ_GEMM_N ? (size_t)j * g->ldb + l : (size_t)l * g->ldb + j;
                acc += (double)load(g->A, g->at, a) * load(g->B, g->bt, b);
            }
            const size_t c = (size_t)j * g->ldc + i;
            double v = (double)g->alpha * acc;
            if (g->beta != 0.0f) v += (double)g->beta * load(g->C, g->ct, c); /* beta 0: C is not read */
            if (g->ct == DZ_CUDA_R_16BF) ((uint16_t *)g->C)[c] = dz_f32_to_bf16((float)v);
            else ((float *)g->C)[c] = (float)v;
        }
}

static int gemm_ex(dz_cuda_seam *s, dz_cuda_stream st, dz_gemm_op ta, dz_gemm_op tb, int m, int n, int k, float alpha,
                   const void *A, dz_cuda_dtype at, int lda, const void *B, dz_cuda_dtype bt, int ldb, float beta,
                   void *C, dz_cuda_dtype ct, int ldc, dz_gemm_compute compute) {
    hs_state *h = hs_of(s);
    int i = 0, status = hs_stream_index(h, st, &i);
    if (status != DZ_CUDA_OK) return status;
    if (at != bt) return hs_fail(h, DZ_CUDA_ERR_INVALID, "gemm: A and B of different types");
    hs_op op = {.kind = HS_GEMM,
                .u.gemm = {.ta = ta, .tb = tb, .m = m, .n = n, .k = k, .lda = lda, .ldb = ldb, .ldc = ldc,
                           .alpha = alpha, .beta = beta, .A = A, .B = B, .C = C, .at = at, .bt = bt, .ct = ct}};
    status = gemm_checks(h, &op);
    return status != DZ_CUDA_OK ? status : hs_enqueue(h, i, &op);
}

static int sgemm(dz_cuda_seam *s, dz_cuda_stream st, dz_gemm_op ta, dz_gemm_op tb, int m, int n, int k, float alpha,
                 const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc) {
    return gemm_ex(s, st, ta, tb, m, n, k, alpha, A, DZ_CUDA_R_32F, lda, B, DZ_CUDA_R_32F, ldb, beta, C, DZ_CUDA_R_32F,
                   ldc, DZ_GEMM_COMPUTE_32F);
}

/* One range of a span's array (n elements of `size` bytes), checked. */
static int span_range(hs_state *h, hs_op *op, const void *p, size_t size, int write, const char *name) {
    if (!p) return DZ_CUDA_OK;
    if (op->nr == HS_RANGES) return hs_fail(h, DZ_CUDA_ERR_INVALID, "zo_span: more arrays than its mode uses");
    const size_t bytes = (size_t)op->u.zo.n * size;
    char what[48];
    snprintf(what, sizeof what, "zo_span: %s", name);
    const int st = hs_check_device(h, p, bytes, what);
    if (st == DZ_CUDA_OK) op->r[op->nr++] = (hs_range){(uintptr_t)p, (uintptr_t)p + bytes, write};
    return st;
}

static int zo_span(dz_cuda_seam *s, const dz_zo_span *span, dz_cuda_stream st) {
    hs_state *h = hs_of(s);
    int i = 0, status = hs_stream_index(h, st, &i);
    if (status != DZ_CUDA_OK || span->n == 0) return status;
    if (span->has_update && (span->q < 1 || span->q > DZ_ZO_SPAN_MAX_Q))
        return hs_fail(h, DZ_CUDA_ERR_INVALID, "zo_span: q = %d outside 1..%d", span->q, DZ_ZO_SPAN_MAX_Q);
    hs_op op = {.kind = HS_ZO, .u.zo = *span};
    const dz_zo_span *z = &op.u.zo;
    const int pass = z->mode == DZ_SPAN_PASS, upd = pass && z->has_update;
    if (pass && !z->in_f32 == !z->in_bf16)
        return hs_fail(h, DZ_CUDA_ERR_INVALID, "zo_span: a pass reads theta from in_f32 or in_bf16, one of them");
    if (upd && (z->in_f32 ? !z->out_f32 || z->out_bf16 : !z->out_bf16 || z->out_f32))
        return hs_fail(h, DZ_CUDA_ERR_INVALID, "zo_span: an update writes theta of the type it reads");
    if (pass && !z->w_plus != !z->w_minus)
        return hs_fail(h, DZ_CUDA_ERR_INVALID, "zo_span: a pair writes both w_plus and w_minus");
    if (z->mode == DZ_SPAN_Z) status = span_range(h, &op, z->z, 4, 1, "z");
    if (z->mode == DZ_SPAN_WORDS) status = span_range(h, &op, z->words, 4, 1, "words");
    const int round = z->mode == DZ_SPAN_ROUND;
    if (status == DZ_CUDA_OK && (pass || round)) status = span_range(h, &op, z->in_f32, 4, 0, "in_f32");
    if (status == DZ_CUDA_OK && pass) status = span_range(h, &op, z->in_bf16, 2, 0, "in_bf16");
    if (status == DZ_CUDA_OK && upd) status = span_range(h, &op, z->out_f32, 4, 1, "out_f32");
    if (status == DZ_CUDA_OK && (upd || round)) status = span_range(h, &op, z->out_bf16, 2, 1, "out_bf16");
    if (status == DZ_CUDA_OK && pass && z->w_plus) status = span_range(h, &op, z->w_plus, 4, 1, "w_plus");
    if (status == DZ_CUDA_OK && pass && z->w_plus) status = span_range(h, &op, z->w_minus, 4, 1, "w_minus");
    return status != DZ_CUDA_OK ? status : hs_enqueue(h, i, &op);
}

int hs_execute(hs_state *h, const hs_op *op) {
    if (op->kind == HS_ATTN) return hs_attention_run(h, &op->u.attn);
    if (op->kind == HS_GEMM) gemm_run(&op->u.gemm);
    else if (op->kind == HS_ZO) dz_zo_span_run_host(&op->u.zo);
    else if (op->kind == HS_FW) dz_fw_run_host(&op->u.fw);
    else if (op->kind == HS_GATHER) return hs_gather_run(h, op);
    if (op->kind != HS_COPY) return DZ_CUDA_OK;
    const hs_copy *c = &op->u.copy;
    int status = DZ_CUDA_OK;
    if (c->host_src && hs_checksum(c->src, c->n) != c->src_sum)
        status = hs_fail(h, DZ_CUDA_ERR_HAZARD,
                         "the host changed the %zu-byte source of an upload on stream %d before its stream "
                         "synchronize or event wait", c->n, op->stream);
    memcpy(c->dst, c->src, c->n);
    return status;
}

void hs_ops_api(dz_cuda_seam *s) {
    s->memcpy_async = memcpy_async, s->sgemm = sgemm, s->gemm_ex = gemm_ex, s->zo_span = zo_span;
}
