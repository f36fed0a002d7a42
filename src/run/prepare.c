/* The compute and the data of a run, made together (prepare.h). */
#include "run/prepare.h"

dz_status dz_prepare(dz_compute *c, dz_run_data *d, const char *weights, int from_checkpoint, dz_error *err) {
    const dz_train_config *t = c->cfg;
    dz_status st = dz_compute_load(c, weights, from_checkpoint, err);
    if (st == DZ_OK) st = dz_run_data_task(d, c, err);
    if (st == DZ_OK) st = dz_run_data_load(d, err);
    if (st == DZ_OK) st = dz_prepare_check_agreement(c, d, err);
    if (st != DZ_OK) return st;

    const int batch = t->optim.batch, eval_batch = t->schedule.eval_batch;
    const int K = d->train.n_examples ? d->train.n_labels : d->testset.n_labels; /* evaluation only: the test's */
    const int local = (batch + c->lay.d - 1) / c->lay.d; /* the largest share */
    int max_len = d->train.max_len;
    if (d->dev.max_len > max_len) max_len = d->dev.max_len;
    if (d->testset.max_len > max_len) max_len = d->testset.max_len;
    if (d->gen) max_len = dz_model_config(c->m)->max_seq_len; /* prompts and their greedy answers */
    const int share = !d->lm && !d->gen && t->data.share_prompts; /* candidates continue their example's prompt */
    dz_engine_spec es = {
        .max_batch = local * K > eval_batch ? local * K : eval_batch,
        .max_len = max_len,
        .streams = share ? 4 : 2,
        .zo = dz_train_zo_params(&t->optim),
        .max_resident_mb = t->store.max_resident_mb,
        .stream_globals = t->store.stream_globals,
        .signs = c->lay.signs,
        .backend = t->layout.backend,
    };
    es.zo.max_device_bytes = (size_t)t->layout.max_device_mb << 20;
    st = dz_compute_engine(c, &es, err);
    return st == DZ_OK ? dz_run_data_buffers(d, local, K, max_len, share, err) : st;
}

void dz_prepare_free(dz_compute *c, dz_run_data *d) {
    dz_run_data_free(d);
    dz_compute_free(c);
}
