/* Tests that compute load OpenBLAS (with distzo's core choice) before any test runs. */
#ifndef DZ_TESTS_BLAS_READY_H
#define DZ_TESTS_BLAS_READY_H

#include <stdio.h>

#include "kernels/blas.h"

/* 0 when OpenBLAS is ready; otherwise says why on stderr. */
static inline int dz_test_blas_ready(void) {
    dz_error err = {0};
    if (dz_blas_init(&err) == DZ_OK) return 0;
    fprintf(stderr, "OpenBLAS: %s\n", err.msg);
    return 1;
}

#endif
