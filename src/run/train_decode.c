/* --objective f1 (generation presets): a step's loss is minus the F1 of each example's
 * greedy answer under each perturbation (MeZO's --non_diff for SQuAD), decoded by the
 * engine pass after pass (dz_zo_step_decode) with the evaluation's stop rule
 * (dz_qa_decoder). Buffers are made once, at setup. */
#include <stdlib.h>
#include <string.h>

#include "run/train_data.h"

enum { ANSWER_BYTES = 1024 };

dz_status dz_train_decode_init(dz_run_data *td, int local, dz_error *err) {
    dz_train_decode *d = &td->dec;
    const int T = dz_model_config(td->comp->m)->max_seq_len, V = dz_model_config(td->comp->m)->vocab_size;
    if (local > DZ_ZO_MAX_DECODE)
        return dz_fail(err, DZ_ERR_INVALID, "--objective f1: a batch share of %d examples (at most %d)", local,
                       DZ_ZO_MAX_DECODE);
    int ok = 1;
    for (int k = 0; k < 2; k++) {
        ok &= (d->tokens[k] = malloc(sizeof(int) * (size_t)local * T)) != NULL;
        ok &= (d->lengths[k] = malloc(sizeof(int) * (size_t)local)) != NULL;
        ok &= (d->done[k] = malloc((size_t)local)) != NULL;
        ok &= (d->dec[k] = malloc(sizeof(dz_qa_decoder) * (size_t)local)) != NULL;
        ok &= (d->text[k] = malloc((size_t)ANSWER_BYTES * local)) != NULL;
    }
    ok &= (d->logits = malloc(sizeof(float) * (size_t)local * V)) != NULL;
    return ok ? DZ_OK : dz_fail(err, DZ_ERR_NOMEM, "--objective f1: out of memory");
}

void dz_train_decode_free(dz_run_data *td) {
    dz_train_decode *d = &td->dec;
    for (int k = 0; k < 2; k++) free(d->tokens[k]), free(d->lengths[k]), free(d->done[k]), free(d->dec[k]), free(d->text[k]);
    free(d->logits);
    memset(d, 0, sizeof *d);
}

static void reset(void *user, int sign) {
    dz_run_data *td = user;
    dz_train_decode *d = &td->dec;
    const int T = dz_model_config(td->comp->m)->max_seq_len;
    for (int b = 0; b < td->hi - td->lo; b++) {
        const int e = td->batch_ex[td->lo + b];
        memcpy(d->tokens[sign] + (size_t)b * T, td->train_qa.prompts[e], sizeof(int) * (size_t)td->train_qa.prompt_len[e]);
        d->lengths[sign][b] = td->train_qa.prompt_len[e];
        d->done[sign][b] = 0;
        dz_qa_decoder_start(&d->dec[sign][b], d->text[sign] + (size_t)b * ANSWER_BYTES, ANSWER_BYTES,
                            dz_run_data_gen_tokens(td));
    }
}

static void next(void *user, int sign, int b, const float *logits) {
    dz_run_data *td = user;
    dz_train_decode *d = &td->dec;
    const int T = dz_model_config(td->comp->m)->max_seq_len, V = dz_model_config(td->comp->m)->vocab_size;
    int *seq = d->tokens[sign] + (size_t)b * T, *len = &d->lengths[sign][b];
    const int id = dz_qa_decoder_step(&d->dec[sign][b], td->comp->tok, seq[*len - 1], logits, V);
    if (id >= 0) seq[(*len)++] = id;
    d->done[sign][b] = id < 0 || d->dec[sign][b].done || *len >= T;
}

static void loss(void *user, int sign, double *out) {
    dz_run_data *td = user;
    for (int b = 0; b < td->hi - td->lo; b++) {
        const dz_example *ex = &td->train_qa.data.items[td->batch_ex[td->lo + b]];
        double f1, em;
        dz_qa_best(dz_qa_decoder_answer(&td->dec.dec[sign][b]), ex->answers, ex->n_answers, &f1, &em);
        out[2 * b] = -f1, out[2 * b + 1] = 1.0;
    }
}

dz_zo_decode dz_train_decode_batch(dz_run_data *td) {
    dz_train_decode *d = &td->dec;
    return (dz_zo_decode){
        .B = td->hi - td->lo, .T = dz_model_config(td->comp->m)->max_seq_len,
        .tokens = {d->tokens[0], d->tokens[1]}, .lengths = {d->lengths[0], d->lengths[1]},
        .done = {d->done[0], d->done[1]}, .max_passes = dz_run_data_gen_tokens(td), .logits = d->logits,
        .reset = reset, .next = next, .loss = loss, .user = td,
        .n_examples = td->hi - td->lo, .example0 = td->lo, .n_global = td->cfg->optim.batch,
    };
}
