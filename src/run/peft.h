/* A run's parameter-efficient settings (floor 0 of src/run; docs/ADAPTERS.md): the check
 * of --peft and its options, the adapter's spec, the seed log's fingerprint of the
 * trained layout, and the weights spec of an adapter run. */
#ifndef DZ_RUN_PEFT_H
#define DZ_RUN_PEFT_H

#include <stdint.h>

#include "distzo/setup.h"
#include "distzo/train.h"
#include "run/seedlog.h"

/* --peft and the --lora-* options on their own (the targets parsed, dropout 0, ...). */
dz_status dz_train_peft_check(const dz_train_config *c, dz_error *err);
/* 1 and *spec filled when the run trains a LoRA adapter; 0 otherwise. */
int dz_train_peft_lora(const dz_train_config *c, dz_lora_spec *spec);
/* The seed log header's fingerprint: the base model's path for a full run; for a LoRA run
 * its layout ("lora r=8 alpha=16 HASH q,v": a hash of the adapter table of base config cfg),
 * so a log is never replayed onto another layout. */
void dz_train_log_fingerprint(const dz_train_config *c, const dz_config *cfg, uint8_t out[64]);
/* The seed log header this run writes and expects: run seed, q, distribution, ZO_RNG
 * version, eps, start step 0, and the fingerprint (left zero when cfg is NULL: the settings
 * alone, checked before the base model loads). */
void dz_train_log_header(const dz_train_config *c, const dz_config *cfg, dz_seedlog_header *h);
/* The log's fingerprint is the one this run and base config would write: DZ_ERR_INVALID
 * naming both otherwise (a LoRA log onto a full model, or onto another adapter layout). */
dz_status dz_train_log_matches(const dz_train_config *c, const dz_config *cfg, const uint8_t got[64], const char *path,
                               dz_error *err);
/* The fingerprint (16 hex digits) of the adapter file a replay from the run's start loads:
 * --adapter DIR's adapter_model.safetensors, when weights (what the run loads) is not itself
 * a PEFT folder (a checkpoint); hex "" otherwise. With run.json's lora_init_fingerprint
 * set, a file that differs is refused (DZ_ERR_INVALID naming both): replaying the log onto
 * another start would give other weights without a word. */
dz_status dz_train_peft_init_fingerprint(const dz_train_config *c, const char *weights, char hex[17], dz_error *err);
/* The base model's table fingerprint (16 hex digits of its tensor names and shapes) into hex;
 * with run.json's model_table set, a base of another table is refused (DZ_ERR_INVALID naming
 * path and both): a seed log replays only onto the architecture it was trained on. */
dz_status dz_train_base_check(const dz_train_config *c, const dz_model *base, const char *path, char hex[17],
                              dz_error *err);
/* ws for an adapter run (spec: storage for the adapter's spec): the base is run.json's
 * model, the adapter new from the run seed unless ws->path is a PEFT folder. */
void dz_train_peft_weights(const dz_train_config *c, dz_weights_spec *ws, dz_lora_spec *spec);

#endif
