/* A JSON file a test reads (a golden file under tests/data): parsed, or the calling test
 * fails naming the file. Header-only; include after cmocka.h. */
#ifndef DZ_TESTS_JSON_FILE_H
#define DZ_TESTS_JSON_FILE_H

#include <cjson/cJSON.h>
#include <stdlib.h>

#include "core/util.h"

/* path parsed (cJSON_Delete it); rel: under tests/data. */
static inline cJSON *test_json_file(const char *rel) {
    char path[1200], *text = NULL;
    snprintf(path, sizeof path, "%s/%s", DZ_TEST_DATA, rel);
    dz_error err = {0};
    if (dz_read_file(path, &text, NULL, &err) != DZ_OK) fail_msg("%s", err.msg);
    cJSON *j = cJSON_Parse(text);
    free(text);
    if (!j) fail_msg("%s: not valid JSON", path);
    return j;
}

#endif
