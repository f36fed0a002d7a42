/* JSON files the project writes (run.json, adapter_config.json, federated settings):
 * one way to write them, atomically. */
#ifndef DZ_FORMAT_JSON_FILE_H
#define DZ_FORMAT_JSON_FILE_H

#include <cjson/cJSON.h>

#include "distzo/error.h"

/* o printed (indented) to path through a temporary file, flushed and renamed, so a crash
 * leaves the previous file. Takes o and frees it; o == NULL (its building ran out of
 * memory) is DZ_ERR_NOMEM naming path. */
dz_status dz_json_write_file(const char *path, cJSON *o, dz_error *err);

#endif
