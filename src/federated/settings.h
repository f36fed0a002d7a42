/* RUN/federated.json: a federated run's own settings beside run.json (the training ones),
 * written once by the coordinator, read back on --resume. */
#ifndef DZ_FEDERATED_SETTINGS_H
#define DZ_FEDERATED_SETTINGS_H

#include <stdint.h>

#include "distzo/federated.h"

/* Each setting within its bounds: DZ_ERR_INVALID naming the option. q: slots per round. */
dz_status dz_fed_settings_check(const dz_fed_settings *s, int q, dz_error *err);
dz_status dz_fed_settings_write(const char *run_dir, const dz_fed_settings *s, uint64_t fingerprint, dz_error *err);
dz_status dz_fed_settings_read(const char *run_dir, dz_fed_settings *s, uint64_t *fingerprint, dz_error *err);

#endif
