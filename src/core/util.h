/* Small shared helpers for the library's internals (the public ones: distzo/util.h). */
#ifndef DZ_CORE_UTIL_H
#define DZ_CORE_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "distzo/error.h"
#include "distzo/util.h" /* time, whole files, paths */

#define DZ_ALIGN 64

/* 64-byte aligned, zero-filled allocation; NULL on failure. Free with dz_free. */
void *dz_alloc(size_t bytes);
void dz_free(void *p);

#endif
