#include "run/faults.h"

#include <stdio.h>
#include <stdlib.h>

static dz_faults g_set;
static int g_have_set;

void dz_faults_set(const dz_faults *f) {
    g_have_set = f != NULL;
    if (f) g_set = *f;
}

dz_faults dz_faults_get(void) {
    if (g_have_set) return g_set;
    dz_faults f = {0};
    const char *corrupt = getenv("DISTZO_TEST_CORRUPT");
    if (corrupt && sscanf(corrupt, "%d:%d", &f.corrupt_node, &f.corrupt_step) != 2) f.corrupt_step = 0;
    return f;
}
