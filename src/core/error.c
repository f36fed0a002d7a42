#include "distzo/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

dz_status dz_fail(dz_error *err, dz_status code, const char *fmt, ...) {
    if (err) {
        char msg[sizeof err->msg]; /* an argument may be err->msg itself (a cause re-worded) */
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        memcpy(err->msg, msg, strlen(msg) + 1);
        err->code = code;
    }
    return code;
}

const char *dz_status_name(dz_status code) {
    switch (code) {
    case DZ_OK: return "ok";
    case DZ_ERR_IO: return "I/O error";
    case DZ_ERR_FORMAT: return "format error";
    case DZ_ERR_INVALID: return "invalid argument";
    case DZ_ERR_NOMEM: return "out of memory";
    case DZ_ERR_UNSUPPORTED: return "unsupported";
    case DZ_ERR_NOT_FOUND: return "not found";
    }
    return "unknown error";
}
