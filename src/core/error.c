#include "distzo/error.h"

#include <stdarg.h>
#include <stdio.h>

dz_status dz_fail(dz_error *err, dz_status code, const char *fmt, ...) {
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
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
