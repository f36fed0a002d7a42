/* The host seam's forward kernels (seam_host.h): each launch is checked as the GPU would
 * need it (shapes, positions and rows in range, every array inside one device buffer: a
 * read or write past it is DZ_CUDA_ERR_OVERRUN), its ranges are raced against the other
 * streams' work, and it runs lazily through the element code the kernels run
 * (backend/forward_element.h: dz_fw_run_host). */
#include "backend/cuda/seam_host.h"

#include <stdio.h>

static const char *mode_name(dz_fw_mode m) {
    static const char *const names[] = {"bias", "layernorm", "rmsnorm", "rope", "relu", "swiglu", "add", "fill",
                                        "copy_rows", "logsumexp_update", "pick_target", "logprob_finish"};
    return (unsigned)m < sizeof names / sizeof names[0] ? names[m] : "?";
}

/* Floats [first, first + count) of array p, checked and added to op's ranges. */
static int fw_range(hs_state *h, hs_op *op, const float *p, uint64_t first, uint64_t count, int write,
                    const char *name) {
    if (count == 0) return DZ_CUDA_OK;
    if (op->nr == HS_RANGES) return hs_fail(h, DZ_CUDA_ERR_INVALID, "fw_launch: more arrays than ranges");
    char what[64];
    snprintf(what, sizeof what, "fw_launch %s: %s", mode_name(op->u.fw.mode), name);
    const float *lo = p + first;
    const int st = hs_check_device(h, p ? lo : NULL, count * sizeof(float), what);
    if (st == DZ_CUDA_OK) op->r[op->nr++] = (hs_range){(uintptr_t)lo, (uintptr_t)(lo + count), write};
    return st;
}

/* The smallest and largest of idx[k][0 .. rows); an error for a negative one. */
static int idx_span(hs_state *h, const dz_fw_launch *L, int k, const char *name, uint64_t *lo, uint64_t *hi) {
    int mn = L->idx[k][0], mx = L->idx[k][0];
    for (int i = 0; i < L->rows; i++) {
        if (L->idx[k][i] < 0)
            return hs_fail(h, DZ_CUDA_ERR_INVALID, "fw_launch %s: %s[%d] = %d is negative", mode_name(L->mode), name,
                           i, L->idx[k][i]);
        mn = L->idx[k][i] < mn ? L->idx[k][i] : mn, mx = L->idx[k][i] > mx ? L->idx[k][i] : mx;
    }
    *lo = (uint64_t)mn, *hi = (uint64_t)mx + 1;
    return DZ_CUDA_OK;
}

/* Rows of host indices of one launch: the ops carry at most DZ_FW_MAX_ROWS. */
static int shape_checks(hs_state *h, const dz_fw_launch *L) {
    const int indexed = L->mode == DZ_FW_ROPE || L->mode == DZ_FW_COPY_ROWS || L->mode == DZ_FW_PICK;
    if (L->rows < 0 || L->cols < 0 || (indexed && L->rows > DZ_FW_MAX_ROWS))
        return hs_fail(h, DZ_CUDA_ERR_INVALID, "fw_launch %s: rows %d, cols %d", mode_name(L->mode), L->rows,
                       L->cols);
    if (L->mode == DZ_FW_ROPE && (L->heads <= 0 || L->cols <= 0 || L->cols % 2))
        return hs_fail(h, DZ_CUDA_ERR_INVALID, "fw_launch rope: %d heads of %d", L->heads, L->cols);
    return DZ_CUDA_OK;
}

/* Every array the launch touches, by its mode. */
static int fw_ranges(hs_state *h, hs_op *op) {
    const dz_fw_launch *L = &op->u.fw;
    const uint64_t rows = (uint64_t)L->rows, cols = (uint64_t)L->cols, rc = rows * cols;
    uint64_t lo = 0, hi = 0, lo2 = 0, hi2 = 0;
    int st = DZ_CUDA_OK;
    switch (L->mode) {
    case DZ_FW_BIAS:
        if ((st = fw_range(h, op, L->y, 0, rc, 1, "y")) == DZ_CUDA_OK) st = fw_range(h, op, L->x, 0, cols, 0, "bias");
        return st;
    case DZ_FW_LAYERNORM:
    case DZ_FW_RMSNORM:
        if ((st = fw_range(h, op, L->y, 0, rc, 1, "y")) == DZ_CUDA_OK) st = fw_range(h, op, L->x, 0, rc, 0, "x");
        if (st == DZ_CUDA_OK) st = fw_range(h, op, L->w, 0, cols, 0, "w");
        if (st == DZ_CUDA_OK && L->mode == DZ_FW_LAYERNORM && L->b) st = fw_range(h, op, L->b, 0, cols, 0, "b");
        return st;
    case DZ_FW_ROPE:
        if ((st = idx_span(h, L, 0, "positions", &lo, &hi)) == DZ_CUDA_OK)
            st = fw_range(h, op, L->y, 0, rc * (uint64_t)L->heads, 1, "x");
        return st == DZ_CUDA_OK && rows ? fw_range(h, op, L->x, lo * cols, (hi - lo) * cols, 0, "cos_sin") : st;
    case DZ_FW_RELU:
    case DZ_FW_FILL: return fw_range(h, op, L->y, 0, L->n, 1, "x");
    case DZ_FW_SWIGLU:
    case DZ_FW_ADD:
        if ((st = fw_range(h, op, L->y, 0, L->n, 1, "y")) == DZ_CUDA_OK) st = fw_range(h, op, L->x, 0, L->n, 0, "x");
        return st;
    case DZ_FW_COPY_ROWS:
        if (rows == 0 || cols == 0) return DZ_CUDA_OK;
        st = idx_span(h, L, 0, "dst_rows", &lo, &hi);
        if (st == DZ_CUDA_OK) st = idx_span(h, L, 1, "src_rows", &lo2, &hi2);
        if (st == DZ_CUDA_OK) st = fw_range(h, op, L->y, lo * cols, (hi - lo) * cols, 1, "dst");
        return st == DZ_CUDA_OK ? fw_range(h, op, L->x, lo2 * cols, (hi2 - lo2) * cols, 0, "src") : st;
    case DZ_FW_LOGSUMEXP:
        if ((st = fw_range(h, op, L->x, 0, rc, 0, "logits")) == DZ_CUDA_OK) st = fw_range(h, op, L->m, 0, rows, 1, "m");
        return st == DZ_CUDA_OK ? fw_range(h, op, L->s, 0, rows, 1, "s") : st;
    case DZ_FW_PICK:
        st = fw_range(h, op, L->y, 0, rows, 1, "out");
        return st == DZ_CUDA_OK ? fw_range(h, op, L->x, 0, rc, 0, "logits") : st;
    case DZ_FW_LOGPROB:
        st = fw_range(h, op, L->y, 0, rows, 1, "out");
        if (st == DZ_CUDA_OK) st = fw_range(h, op, L->x, 0, rows, 0, "target");
        if (st == DZ_CUDA_OK) st = fw_range(h, op, L->m, 0, rows, 0, "m");
        return st == DZ_CUDA_OK ? fw_range(h, op, L->s, 0, rows, 0, "s") : st;
    }
    return hs_fail(h, DZ_CUDA_ERR_INVALID, "fw_launch: unknown mode %d", (int)L->mode);
}

static int fw_launch(dz_cuda_seam *s, const dz_fw_launch *L, dz_cuda_stream st) {
    hs_state *h = hs_of(s);
    int i = 0, status = hs_stream_index(h, st, &i);
    if (status == DZ_CUDA_OK) status = shape_checks(h, L);
    const int empty = dz_fw_is_row_op(L->mode) ? L->rows == 0 : dz_fw_items(L) == 0;
    if (status != DZ_CUDA_OK || empty) return status;
    hs_op op = {.kind = HS_FW, .u.fw = *L};
    status = fw_ranges(h, &op);
    return status != DZ_CUDA_OK ? status : hs_enqueue(h, i, &op);
}

void hs_forward_api(dz_cuda_seam *s) { s->fw_launch = fw_launch; }
