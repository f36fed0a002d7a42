/* Every rank of a job must train the same run: what affects the weights is fingerprinted
 * on each rank and compared (parallel/agree.h), so a rank started with another setting,
 * model or data file is refused at start instead of diverging silently. */
#include "core/hash.h"
#include "parallel/agree.h"
#include "run/prepare.h"

/* A few bytes of every tensor: a different checkpoint of the same shape shows up too. */
static uint64_t weights_sample_hash(const dz_model *m) {
    const dz_param_table *t = dz_model_params(m);
    const size_t esz = dz_dtype_size(dz_model_dtype(m));
    uint64_t h = DZ_HASH_START;
    for (int i = 0; i < t->count; i++) {
        const char *x = dz_model_tensor(m, i);
        if (!x) continue; /* in the store: its file came from the same checkpoint (the table and path agree) */
        const size_t n = (size_t)dz_param_numel(&t->params[i]) * esz;
        h = dz_hash_bytes(h, x, n < 64 ? n : 64);
        if (n > 64) h = dz_hash_bytes(h, x + n - 64, 64);
    }
    return h;
}

dz_status dz_prepare_check_agreement(const dz_compute *comp, const dz_run_data *td, dz_error *err) {
    const dz_train_config *c = comp->cfg;
    const dz_train_optim *o = &c->optim;
    const dz_train_data *d = &c->data;
    const dz_agree_item items[] = {
        {"--lr", dz_hash_f64(DZ_HASH_START, o->lr)},
        {"--eps", dz_hash_f64(DZ_HASH_START, o->eps)},
        {"--weight-decay", dz_hash_f64(DZ_HASH_START, o->wd)},
        {"--batch", dz_hash_u64(DZ_HASH_START, (uint64_t)o->batch)},
        {"--steps", dz_hash_u64(DZ_HASH_START, (uint64_t)o->steps)},
        {"--spsa-samples", dz_hash_u64(DZ_HASH_START, (uint64_t)o->q)},
        {"--warmup", dz_hash_u64(DZ_HASH_START, (uint64_t)o->warmup)},
        {"--schedule", dz_hash_u64(DZ_HASH_START, (uint64_t)o->lr_schedule)},
        {"--perturbation", dz_hash_u64(DZ_HASH_START, (uint64_t)o->rademacher)},
        {"--rng", dz_hash_u64(DZ_HASH_START, (uint64_t)o->rng_v2)},
        {"--estimator", dz_hash_u64(DZ_HASH_START, (uint64_t)o->estimator)},
        {"--sparse-density", dz_hash_f64(DZ_HASH_START, o->sparse_density)},
        {"--lozo-rank", dz_hash_u64(DZ_HASH_START, (uint64_t)o->lozo_rank)},
        {"--lozo-nu", dz_hash_u64(DZ_HASH_START, (uint64_t)o->lozo_nu)},
        {"--fzoo-directions", dz_hash_u64(DZ_HASH_START, (uint64_t)o->fzoo_directions)},
        {"--hizoo-smooth", dz_hash_f64(DZ_HASH_START, o->hizoo_smooth)},
        {"--hizoo-rank", dz_hash_u64(DZ_HASH_START, (uint64_t)o->hizoo_rank)},
        {"--seed", dz_hash_u64(DZ_HASH_START, o->seed)},
        {"--data-seed", dz_hash_u64(DZ_HASH_START, d->seed)},
        {"--train-examples", dz_hash_u64(DZ_HASH_START, (uint64_t)d->train_examples)},
        {"--dev-examples", dz_hash_u64(DZ_HASH_START, (uint64_t)d->dev_examples)},
        {"--task", dz_hash_str(DZ_HASH_START, d->task)},
        {"--template", dz_hash_str(DZ_HASH_START, d->template_)},
        {"--label-words", dz_hash_str(DZ_HASH_START, d->label_words)},
        {"--special-tokens", dz_hash_u64(DZ_HASH_START, (uint64_t)d->special_tokens)},
        {"--seq", dz_hash_u64(DZ_HASH_START, (uint64_t)d->lm_seq)},
        {"--objective", dz_hash_str(DZ_HASH_START, d->objective)},
        {"--demos", dz_hash_u64(DZ_HASH_START, (uint64_t)d->demos)},
        {"--gen-tokens", dz_hash_u64(DZ_HASH_START, (uint64_t)d->gen_tokens)},
        {"--master-dtype", dz_hash_u64(DZ_HASH_START, (uint64_t)c->store.master_dtype)},
        {"the model's tensor table", dz_compute_table_hash(dz_model_params(comp->m))},
        {"the model's weights", weights_sample_hash(comp->m)},
        {"the tokenizer's vocabulary size", dz_hash_u64(DZ_HASH_START, (uint64_t)dz_tokenizer_vocab_size(comp->tok))},
        {"the training data (--data)", dz_run_data_hash(&td->pool)},
        {"the test data (--test)", dz_run_data_hash(&td->test)},
    };
    return dz_comm_agree(comp->comm, items, (int)(sizeof items / sizeof items[0]), err);
}
