/* --objective f1 (generation presets): a step's loss is minus the F1 of each example's
 * greedy answer under each perturbation (MeZO's --non_diff for SQuAD), decoded by the
 * engine pass after pass (dz_zo_step_decode) with the evaluation's stop rule
 * (dz_qa_decoder). Buffers are made once, at setup. */
#include <stdlib.h>
#include <string.h>

#include "run/trainer.h"

enum { ANSWER_BYTES = 1024 };

dz_status dz_trainer_decode_init(dz_trainer *tr, int local, dz_error *err) {
    dz_trainer_decode *d = &tr->dec;
    const int T = dz_model_config(tr->m)->max_seq_len, V = dz_model_config(tr->m)->vocab_size;
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

void dz_trainer_decode_free(dz_trainer *tr) {
    dz_trainer_decode *d = &tr->dec;
    for (int k = 0; k < 2; k++) free(d->tokens[k]), free(d->lengths[k]), free(d->done[k]), free(d->dec[k]), free(d->text[k]);
    free(d->logits);
    memset(d, 0, sizeof *d);
}

static void reset(void *user, int sign) {
    dz_trainer *tr = user;
    dz_trainer_decode *d = &tr->dec;
    const int T = dz_model_config(tr->m)->max_seq_len;
    for (int b = 0; b < tr->hi - tr->lo; b++) {
        const int e = tr->batch_ex[tr->lo + b];
        memcpy(d->tokens[sign] + (size_t)b * T, tr->train_qa.prompts[e], sizeof(int) * (size_t)tr->train_qa.prompt_len[e]);
        d->lengths[sign][b] = tr->train_qa.prompt_len[e];
        d->done[sign][b] = 0;
        dz_qa_decoder_start(&d->dec[sign][b], d->text[sign] + (size_t)b * ANSWER_BYTES, ANSWER_BYTES,
                            dz_trainer_gen_tokens(tr));
    }
}

static void next(void *user, int sign, int b, const float *logits) {
    dz_trainer *tr = user;
    dz_trainer_decode *d = &tr->dec;
    const int T = dz_model_config(tr->m)->max_seq_len, V = dz_model_config(tr->m)->vocab_size;
    int *seq = d->tokens[sign] + (size_t)b * T, *len = &d->lengths[sign][b];
    const int id = dz_qa_decoder_step(&d->dec[sign][b], tr->tok, seq[*len - 1], logits, V);
    if (id >= 0) seq[(*len)++] = id;
    d->done[sign][b] = id < 0 || d->dec[sign][b].done || *len >= T;
}

static void loss(void *user, int sign, double *out) {
    dz_trainer *tr = user;
    for (int b = 0; b < tr->hi - tr->lo; b++) {
        const dz_example *ex = &tr->train_qa.data.items[tr->batch_ex[tr->lo + b]];
        double f1, em;
        dz_qa_best(dz_qa_decoder_answer(&tr->dec.dec[sign][b]), ex->answers, ex->n_answers, &f1, &em);
        out[2 * b] = -f1, out[2 * b + 1] = 1.0;
    }
}

dz_zo_decode dz_trainer_decode_batch(dz_trainer *tr) {
    dz_trainer_decode *d = &tr->dec;
    return (dz_zo_decode){
        .B = tr->hi - tr->lo, .T = dz_model_config(tr->m)->max_seq_len,
        .tokens = {d->tokens[0], d->tokens[1]}, .lengths = {d->lengths[0], d->lengths[1]},
        .done = {d->done[0], d->done[1]}, .max_passes = dz_trainer_gen_tokens(tr), .logits = d->logits,
        .reset = reset, .next = next, .loss = loss, .user = tr,
        .n_examples = tr->hi - tr->lo, .example0 = tr->lo, .n_global = tr->cfg.optim.batch,
    };
}
