#include "run/faults.h"

#include <stdio.h>
#include <stdlib.h>

dz_faults dz_faults_get(void) {
    dz_faults f = {0};
    const char *corrupt = getenv("DISTZO_TEST_CORRUPT");
    if (corrupt && sscanf(corrupt, "%d:%d:%95s", &f.corrupt_node, &f.corrupt_step, f.corrupt_tensor) < 2)
        f.corrupt_step = 0;
    return f;
}
