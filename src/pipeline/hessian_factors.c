/* HiZOO-L: HiZOO's curvature H of a 2-D tensor (rows x cols: weight matrices, embeddings,
 * adapter matrices) kept in rank 1, Adafactor's factorization (Shazeer and Stern 2018):
 * a row factor R (rows floats), a column factor C (cols floats) and mean(R), with
 *
 *   H_ij = (R_i * C_j) / mean(R)                                  (f32, in this order)
 *
 * (R and C start at 1: H = 1). Vectors (norms, biases) keep hessian_z.c's diagonal. The
 * update of step t (g, c) first moves the factors, over the whole tensor, with z of draw t:
 *
 *   T_ij  = HiZOO's moved H of H_ij: k = z*z; k = H_ij*k; k = c*k; T_ij = H_ij*(1-alpha) + k
 *   R_i   = f32(sum_j T_ij / cols)       the row means, sums in double over j = 0..cols-1
 *   C_j   = f32(sum_i T_ij / rows)       the column means, sums in double over i = 0..rows-1
 *   mean  = f32(sum_i double(R_i) / rows)
 *
 * then the update's spans (and the perturbations after it) read H from the new factors:
 * theta -= lr (g z / sqrt(H_ij) + wd theta), as HiZOO's update with the new H. A tensor's
 * sums run on one thread in that fixed order (the tensors over the pool's threads), no
 * FMA: the same bits on every thread count and ISA level. The cost: one more z of every
 * element of the 2-D tensors a step (the tensors' T is never stored: no rows x cols buffer)
 * and cols doubles per tensor for the column sums. */
#include <string.h>

#include "backend/cpu_simd.h"
#include "core/threads.h"
#include "pipeline/internal.h"

enum { SEG = 1024 };

int dz_hz_factored(const dz_param *t, int factored) { return factored && t->rows > 1 && t->cols > 1; }

size_t dz_hz_tensor_floats(const dz_param *t, int factored) {
    if (dz_hz_factored(t, factored)) return (size_t)t->rows + (size_t)t->cols + 1;
    return (size_t)t->rows * (size_t)t->cols;
}

size_t dz_hz_colsum_count(const dz_param_table *t, int factored) {
    size_t n = 0;
    for (int i = 0; i < t->count; i++)
        if (dz_hz_factored(&t->params[i], factored)) n += (size_t)t->params[i].cols;
    return n;
}

/* The element-wise pieces, one variant per ISA level (element-wise: the same bits on each). */
/* out = (r * c) / mean: H of a run of one row. */
DZ_ISA_VARIANTS(hf_expand, (float *out, const float *c, float r, float mean, size_t n), (out, c, r, mean, n)) {
    for (size_t k = 0; k < n; k++) out[k] = r * c[k] / mean;
}

/* t = HiZOO's move of H = (r * c) / mean with z; colsum += t. */
DZ_ISA_VARIANTS(hf_move, (float *t, double *colsum, const float *z, const float *c, float r, float mean, float keep,
                          float cs, size_t n), (t, colsum, z, c, r, mean, keep, cs, n)) {
    for (size_t k = 0; k < n; k++) {
        const float h = r * c[k] / mean;
        float x = z[k] * z[k];
        x = h * x;
        x = cs * x;
        t[k] = h * keep + x;
        colsum[k] += (double)t[k];
    }
}

void dz_hz_expand(const dz_pipeline *p, int id, uint64_t i0, size_t n, float *out) {
    const size_t cols = (size_t)dz_model_params(p->m)->params[id].cols;
    const size_t rows = (size_t)dz_model_params(p->m)->params[id].rows;
    const float *r = p->hess.h + p->hess.off[id], *c = r + rows, mean = c[cols];
    size_t row = (size_t)(i0 / cols), col = (size_t)(i0 % cols);
    for (size_t k = 0; k < n; row++, col = 0) { /* run by run within a row */
        const size_t len = cols - col < n - k ? cols - col : n - k;
        hf_expand(out + k, c + col, r[row], mean, len);
        k += len;
    }
}

/* One row's T: its sum (returned, in index order) and each element added to its column's sum. */
static double row_move(const dz_pipeline *p, int id, size_t row, size_t cols, const float *c, float r, float mean,
                       const dz_zo_update *u, double *colsum) {
    float z[SEG], t[SEG];
    double sum = 0.0;
    for (size_t a = 0; a < cols; a += SEG) {
        const size_t len = cols - a < SEG ? cols - a : SEG;
        p->be->ops->z_fill(p->be, z, p->z.seed, (uint32_t)id, u->step * (uint32_t)u->q, (uint64_t)row * cols + a, len,
                           p->z.dist);
        hf_move(t, colsum + a, z, c + a, r, mean, 1.0f - p->z.smooth, u->curv, len);
        for (size_t k = 0; k < len; k++) sum += (double)t[k];
    }
    return sum;
}

/* R, C and mean(R) of tensor id moved by the pending update (R_i is rewritten once row i
 * is done: no later row reads it; C and the mean once every row is). */
static void refactor_tensor(const dz_pipeline *p, int id) {
    const dz_param *t = &dz_model_params(p->m)->params[id];
    const size_t rows = (size_t)t->rows, cols = (size_t)t->cols;
    float *r = p->hess.h + p->hess.off[id], *c = r + rows, *mean = c + cols;
    double *colsum = p->hess.colsum + p->hess.coff[id];
    memset(colsum, 0, cols * sizeof(double));
    for (size_t i = 0; i < rows; i++) r[i] = (float)(row_move(p, id, i, cols, c, r[i], *mean, &p->upd.rule, colsum) /
                                                      (double)cols);
    double rsum = 0.0;
    for (size_t j = 0; j < cols; j++) c[j] = (float)(colsum[j] / (double)rows);
    for (size_t i = 0; i < rows; i++) rsum += (double)r[i];
    *mean = (float)(rsum / (double)rows);
}

static void refactor_task(void *ctx, int id, int thread) {
    (void)thread;
    const dz_pipeline *p = ctx;
    if (dz_hz_factored(&dz_model_params(p->m)->params[id], p->z.factored)) refactor_tensor(p, id);
}

void dz_hz_refactor(dz_pipeline *p) {
    if (!p->z.factored || !p->upd.pending) return;
    dz_parallel_for_dynamic(dz_model_params(p->m)->count, refactor_task, p);
}
