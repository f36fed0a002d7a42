/* A call that must fail, and say why: its status must be code and its message must name
 * each given needle (a file, a field, a line). Header-only; include after cmocka.h. */
#ifndef DZ_TESTS_EXPECT_ERROR_H
#define DZ_TESTS_EXPECT_ERROR_H

#include <string.h>

#include "distzo/error.h"

/* what: the call, for the report; needle2: NULL for none. */
static inline void expect_error_naming(const char *what, dz_status st, const dz_error *err, dz_status code,
                                       const char *needle, const char *needle2) {
    if (st != code || !strstr(err->msg, needle) || (needle2 && !strstr(err->msg, needle2)))
        fail_msg("%s: got %s \"%s\", want %s naming \"%s\" / \"%s\"", what, dz_status_name(st), err->msg,
                 dz_status_name(code), needle, needle2 ? needle2 : "");
}

#endif
