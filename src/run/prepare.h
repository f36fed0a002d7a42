/* What a step needs, without the run folder (floor 3 of src/run; see trainer.h): the
 * compute and the data made together, since the engine is sized by the data and the data
 * tokenized by the compute. train, a federated worker's replica and a coordinator's
 * evaluator all prepare so. */
#ifndef DZ_RUN_PREPARE_H
#define DZ_RUN_PREPARE_H

#include "run/train_data.h"

/* prepare.c: after dz_compute_begin: the compute's weights (from `weights`;
 * from_checkpoint: its own tokenizer comes first), the data, the ranks' agreement, the
 * engine and the batch buffers. dz_prepare_free frees both parts. */
dz_status dz_prepare(dz_compute *c, dz_run_data *d, const char *weights, int from_checkpoint, dz_error *err);
void dz_prepare_free(dz_compute *c, dz_run_data *d);

/* agreement.c: every rank has the same settings, model and data (a no-op in one process). */
dz_status dz_prepare_check_agreement(const dz_compute *c, const dz_run_data *d, dz_error *err);

#endif
