/* The ZO engine: its lifetime, and the calls outside a step (flush, replay, the masters'
 * source and checksum). The step itself is src/zo/estimator.c; the weights' side, the
 * block pipeline, src/pipeline. */
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "zo/internal.h"

_Static_assert((int)DZ_ZO_MAX_Q <= (int)DZ_PIPELINE_MAX_Q, "the pipeline's pending update holds every sample's g");

static const char *const ESTIMATOR_NAMES[] = {[DZ_ZO_MEZO] = "mezo", [DZ_ZO_SPARSE] = "sparse", [DZ_ZO_LOZO] = "lozo",
                                              [DZ_ZO_FZOO] = "fzoo", [DZ_ZO_HIZOO] = "hizoo"};
#define LAST_ESTIMATOR DZ_ZO_HIZOO

const char *dz_zo_estimator_name(dz_zo_estimator e) {
    return e >= DZ_ZO_MEZO && e <= LAST_ESTIMATOR ? ESTIMATOR_NAMES[e] : "unknown";
}

int dz_zo_estimator_parse(const char *name, dz_zo_estimator *out) {
    for (int e = DZ_ZO_MEZO; e <= LAST_ESTIMATOR; e++)
        if (!strcmp(name, ESTIMATOR_NAMES[e])) return *out = (dz_zo_estimator)e, 0;
    return -1;
}

static size_t logprob_rows(const dz_forward *f) { return (size_t)dz_forward_max_batch(f) * dz_forward_max_seq(f); }

dz_status dz_zo_engine_create(dz_model *m, dz_forward *f, const dz_zo_params *p, dz_zo_engine **out, dz_error *err) {
    *out = NULL;
    if (p->q < 1 || p->q > DZ_ZO_MAX_Q)
        return dz_fail(err, DZ_ERR_INVALID, "zo: --spsa-samples %d is outside 1..%d", p->q, DZ_ZO_MAX_Q);
    if (!(p->eps > 0.0f)) return dz_fail(err, DZ_ERR_INVALID, "zo: --eps must be positive");
    if (p->estimator < DZ_ZO_MEZO || p->estimator > LAST_ESTIMATOR)
        return dz_fail(err, DZ_ERR_INVALID, "zo: unknown estimator %d", (int)p->estimator);
    dz_status fst = p->estimator == DZ_ZO_FZOO ? dz_zo_fzoo_check(p, err) : DZ_OK;
    if (fst != DZ_OK) return fst;
    if (p->estimator == DZ_ZO_HIZOO && p->q != 1)
        return dz_fail(err, DZ_ERR_INVALID, "zo: --estimator hizoo takes one direction per step: --spsa-samples %d "
                       "must be 1", p->q);
    if (p->hizoo_rank != 0 && (p->hizoo_rank != 1 || p->estimator != DZ_ZO_HIZOO))
        return dz_fail(err, DZ_ERR_INVALID, "zo: --hizoo-rank %d: 0 (HiZOO) or 1 (HiZOO-L), with --estimator hizoo",
                       p->hizoo_rank);
    if (dz_model_dtype(m) != DZ_F32 && dz_model_dtype(m) != DZ_BF16)
        return dz_fail(err, DZ_ERR_UNSUPPORTED, "zo: master weights must be f32 or bf16, not %s",
                       dz_dtype_name(dz_model_dtype(m)));
    if (dz_model_bytes_mapped(m) > 0)
        return dz_fail(err, DZ_ERR_INVALID, "zo: the master weights must be owned (dz_model_make_owned)");
    dz_zo_engine *e = calloc(1, sizeof *e);
    if (!e) return dz_fail(err, DZ_ERR_NOMEM, "zo: out of memory");
    e->m = m;
    e->f = f;
    e->p = *p;
    e->par.signs = 3;
    dz_status pst = dz_zo_pair_gemm_setting(&e->pair_gemm, err);
    if (pst != DZ_OK) {
        free(e);
        return pst;
    }
    const dz_pipeline_perturbation z = dz_zo_perturbation_of(p);
    dz_status st = dz_pipeline_create(m, f, &z, p->max_device_bytes, &e->pipe, err);
    const size_t rows = logprob_rows(f);
    for (int sign = 0; st == DZ_OK && sign < 2; sign++) {
        e->lp[sign] = dz_alloc(rows * sizeof(float));
        e->plp[sign] = dz_alloc(rows * sizeof(float));
        if (!e->lp[sign] || !e->plp[sign])
            st = dz_fail(err, DZ_ERR_NOMEM, "zo: cannot allocate the log-probs of %zu rows", rows);
    }
    if (st != DZ_OK) {
        dz_zo_engine_free(e);
        return st;
    }
    *out = e;
    return DZ_OK;
}

void dz_zo_engine_free(dz_zo_engine *e) {
    if (!e) return;
    dz_pipeline_free(e->pipe);
    for (int k = 0; k < 2; k++) {
        dz_free(e->lp[k]);
        dz_free(e->plp[k]);
    }
    free(e->ex_loss);
    free(e->dec_tokens[0]);
    free(e->dec_tokens[1]);
    free(e);
}

dz_status dz_zo_engine_use_store(dz_zo_engine *e, struct dz_store *s, dz_error *err) {
    return dz_pipeline_use_store(e->pipe, s, err);
}

dz_status dz_zo_engine_set_parallel(dz_zo_engine *e, const dz_zo_parallel *p, dz_error *err) {
    if (!(p->signs >= 1 && p->signs <= 3)) return dz_fail(err, DZ_ERR_INVALID, "zo: signs must be 1, 2 or 3");
    dz_status cst = dz_zo_fzoo_check_parallel(&e->p, p, err);
    if (cst != DZ_OK) return cst;
    const dz_pipeline_node node = {
        .slice = p->slice, .n_slices = p->n_slices, .work = p->shared_work, .barrier = p->barrier, .ctx = p->ctx};
    dz_status st = dz_pipeline_share_node(e->pipe, &node, err);
    if (st != DZ_OK) return st;
    e->par = *p;
    return DZ_OK;
}

size_t dz_zo_engine_bytes(const dz_zo_engine *e) {
    return dz_pipeline_bytes(e->pipe) + dz_zo_logprob_bytes(logprob_rows(e->f));
}

size_t dz_zo_block_floats(const dz_zo_engine *e) { return dz_pipeline_block_floats(e->pipe); }

dz_status dz_zo_flush(dz_zo_engine *e, dz_error *err) { return dz_pipeline_flush(e->pipe, err); }

dz_status dz_zo_set_update(dz_zo_engine *e, uint32_t step, float lr, const float *g, dz_error *err) {
    const float curv = e->p.estimator == DZ_ZO_HIZOO ? g[e->p.q] : 0.0f; /* logged after the q values of g */
    const dz_zo_update u = {.g = g, .q = e->p.q, .lr = lr, .wd = e->p.wd, .step = step, .curv = curv};
    return dz_pipeline_set_update(e->pipe, &u, err);
}

/* Applied at once, on the device when the masters are resident there: a replay downloads
 * nothing per update (the caller's flush does, once). */
dz_status dz_zo_apply(dz_zo_engine *e, uint32_t step, float lr, const float *g, dz_error *err) {
    dz_status st = dz_pipeline_apply_pending(e->pipe, err);
    if (st == DZ_OK) st = dz_zo_set_update(e, step, lr, g, err);
    if (st == DZ_OK) st = dz_pipeline_apply_pending(e->pipe, err);
    return st;
}

dz_status dz_zo_engine_set_adapter(dz_zo_engine *e, const dz_weight_source *base, dz_error *err) {
    if (!dz_model_lora(e->m)) return dz_fail(err, DZ_ERR_INVALID, "zo: the engine's model is not an adapter");
    const dz_weight_source masters = dz_pipeline_master_source(e->pipe);
    dz_status st = dz_forward_set_adapter(e->f, e->m, &masters, err);
    if (st != DZ_OK) return st;
    e->adapter = 1;
    e->base = *base;
    return DZ_OK;
}

dz_weight_source dz_zo_master_source(const dz_zo_engine *e) {
    return e->adapter ? e->base : dz_pipeline_master_source(e->pipe);
}

dz_status dz_zo_source_status(dz_zo_engine *e, dz_error *err) { return dz_pipeline_rows_status(e->pipe, err); }

dz_status dz_zo_checksum_slice(dz_zo_engine *e, int slice, int n_slices, uint64_t *sum, dz_error *err) {
    return dz_pipeline_checksum_slice(e->pipe, slice, n_slices, sum, err);
}
