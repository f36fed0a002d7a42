/* JSON files written atomically (json_file.h). */
#include "format/json_file.h"

#include <stdlib.h>
#include <string.h>

#include "distzo/util.h"

dz_status dz_json_write_file(const char *path, cJSON *o, dz_error *err) {
    char *text = o ? cJSON_Print(o) : NULL;
    cJSON_Delete(o);
    if (!text) return dz_fail(err, DZ_ERR_NOMEM, "%s: out of memory", path);
    dz_status st = dz_write_file_atomic(path, text, strlen(text), err);
    free(text);
    return st;
}
