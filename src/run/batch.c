#include "distzo/train.h"

dz_zo_batch dz_class_batch_zo(const dz_class_batch *bb, dz_zo_loss_fn loss, void *user) {
    return (dz_zo_batch){
        .tokens = bb->tokens, .lengths = bb->lengths, .B = bb->n_seqs, .T = bb->T,
        .rows = bb->rows, .targets = bb->targets, .n_rows = bb->n_rows,
        .loss = loss, .user = user,
        .p_tokens = bb->p_tokens, .p_lengths = bb->p_lengths, .n_prompts = bb->tree ? bb->n_prompts : 0, .PT = bb->PT,
        .p_rows = bb->p_rows, .p_targets = bb->p_targets, .n_p_rows = bb->n_p_rows,
        .start = bb->start, .parent = bb->parent,
    };
}
