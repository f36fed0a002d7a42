/* Errors: every fallible library call returns a dz_status and, when given one,
 * fills a dz_error with a message that names the file and the field at fault. */
#ifndef DISTZO_ERROR_H
#define DISTZO_ERROR_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum dz_status {
    DZ_OK = 0,
    DZ_ERR_IO,          /* open/read/write/mmap failed */
    DZ_ERR_FORMAT,      /* a file's content is malformed */
    DZ_ERR_INVALID,     /* a bad argument or option value */
    DZ_ERR_NOMEM,
    DZ_ERR_UNSUPPORTED, /* well-formed but not something distzo handles */
    DZ_ERR_NOT_FOUND
} dz_status;

typedef struct dz_error {
    dz_status code;
    char msg[1024];
} dz_error;

/* Sets err (if non-NULL) and returns code, so callers can `return dz_fail(...)`. */
dz_status dz_fail(dz_error *err, dz_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
const char *dz_status_name(dz_status code);

#ifdef __cplusplus
}
#endif

#endif
