/* A model whose GGUF tensors are held as the file stores them (dz_model_load_flags with
 * DZ_LOAD_KEEP_QUANTIZED): the quantized blocks stay in the read-only file mapping, and the
 * model's weight source dequantizes the rows the forward asks for (a layer block, token
 * rows, a head chunk) into the fp32 buffer the forward hands it, on every read.
 *
 * A row goes through the same two steps as at load (load_gguf.c's place_rows): ggml's
 * dequantization into fp32, then the model's dtype (a bf16 model's values are rounded to
 * bf16 and read back), so every value read is bitwise the one the dequantize-at-load model
 * holds. Rows are spread over the thread pool; each is computed the same way wherever it
 * runs. */
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/threads.h"
#include "format/ggml_quant.h"
#include "model/gguf_layout.h"
#include "model/model_internal.h"

int dz_model_tensor_quantized(const dz_model *m, int id) { return m->quant && m->quant[id].data != NULL; }

size_t dz_model_bytes_quantized(const dz_model *m) { return m->quant_bytes; }

const void *dz_model_tensor_stored(const dz_model *m, int id, size_t *nbytes) {
    const dz_param *p = &m->table.params[id];
    if (dz_model_tensor_quantized(m, id)) {
        *nbytes = (size_t)p->rows * m->quant[id].row_bytes;
        return m->quant[id].data;
    }
    *nbytes = m->data[id] ? (size_t)dz_param_numel(p) * dz_dtype_size(m->dtype) : 0;
    return m->data[id];
}

typedef struct rows_job {
    const dz_model *m;
    const dz_model_quant *q;
    int64_t row0, cols;
    float *dst;
} rows_job;

/* Rounds x[0..n) to the model's dtype and back, as a value stored in that dtype reads. */
static void round_to(dz_dtype dtype, float *x, size_t n) {
    uint16_t tmp[256];
    for (size_t i = 0; i < n; i += 256) {
        const size_t k = n - i < 256 ? n - i : 256;
        dz_from_f32(tmp, dtype, x + i, k);
        dz_to_f32(x + i, tmp, dtype, k);
    }
}

static void dequantize_row(void *ctx, int task, int thread) {
    (void)thread;
    const rows_job *j = ctx;
    const int64_t row = j->row0 + task;
    /* model row -> file row: llama.cpp's rotary order of Q and K, undone as at load */
    const int64_t file_row = j->q->head_dim ? dz_gguf_file_row(row, j->q->head_dim) : row;
    float *y = j->dst + (size_t)task * (size_t)j->cols;
    dz_ggml_dequantize(j->q->type, j->q->data + (size_t)file_row * j->q->row_bytes, y, (size_t)j->cols);
    if (j->m->dtype != DZ_F32) round_to(j->m->dtype, y, (size_t)j->cols);
}

const float *dz_model_quant_rows(const dz_model *m, int id, int64_t row0, int64_t nrows, float *dst) {
    rows_job j = {.m = m, .q = &m->quant[id], .row0 = row0, .cols = m->table.params[id].cols, .dst = dst};
    if (nrows * j.cols < 4096) /* a token's row: not worth waking the pool */
        for (int64_t r = 0; r < nrows; r++) dequantize_row(&j, (int)r, 0);
    else dz_parallel_for((int)nrows, dequantize_row, &j);
    return dst;
}

/* Drops the whole pages inside [p, p+len) of the file mapping; they are re-read if touched. */
static void release_pages(const void *p, size_t len) {
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    const uintptr_t a = ((uintptr_t)p + page - 1) / page * page, b = ((uintptr_t)p + len) / page * page;
    if (b > a) madvise((void *)a, b - a, MADV_DONTNEED);
}

int64_t dz_model_quant_first_non_finite(const dz_model *m, int id, float *buf, size_t buf_floats) {
    const dz_param *p = &m->table.params[id];
    const int64_t per = (int64_t)(buf_floats / (size_t)p->cols) > 0 ? (int64_t)(buf_floats / (size_t)p->cols) : 1;
    for (int64_t r0 = 0; r0 < p->rows; r0 += per) {
        const int64_t n = p->rows - r0 < per ? p->rows - r0 : per;
        dz_model_quant_rows(m, id, r0, n, buf);
        for (size_t i = 0; i < (size_t)(n * p->cols); i++) {
            uint32_t u;
            memcpy(&u, &buf[i], 4);
            if ((u & 0x7f800000u) == 0x7f800000u) return r0 * p->cols + (int64_t)i;
        }
    }
    /* the check must not leave the file resident: the forward reads a block when it runs it */
    release_pages(m->quant[id].data, (size_t)p->rows * m->quant[id].row_bytes);
    return -1;
}
