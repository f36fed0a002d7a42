/* JSON readers' checks (json.h). */
#include "core/json.h"

#include <stdlib.h>
#include <string.h>

static int cmp_key(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

/* Sorted, so a row of many keys costs n log n. */
const char *dz_json_repeated_key(const cJSON *obj) {
    size_t n = 0;
    for (const cJSON *v = obj->child; v; v = v->next) n++;
    const char **keys = n > 1 ? malloc(n * sizeof *keys) : NULL;
    if (!keys) return NULL; /* one key, or out of memory: nothing to compare */
    n = 0;
    for (const cJSON *v = obj->child; v; v = v->next) keys[n++] = v->string ? v->string : "";
    qsort(keys, n, sizeof *keys, cmp_key);
    const char *twice = NULL;
    for (size_t i = 1; i < n && !twice; i++)
        if (!strcmp(keys[i - 1], keys[i])) twice = keys[i];
    free(keys);
    return twice;
}
