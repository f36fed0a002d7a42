/* What cJSON lets by when it reads: the one check every reader of JSON makes. */
#ifndef DZ_CORE_JSON_H
#define DZ_CORE_JSON_H

#include <cjson/cJSON.h>

/* A key the object obj gives twice, or NULL (readers differ on which one counts: Python's
 * json takes the last, cJSON the first, so such an object is refused rather than read
 * either way). Only obj's own keys, not those of objects inside it. */
const char *dz_json_repeated_key(const cJSON *obj);

#endif
