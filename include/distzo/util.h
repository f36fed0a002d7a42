/* Small helpers a program around the library needs too: time, whole files, paths. */
#ifndef DISTZO_UTIL_H
#define DISTZO_UTIL_H

#include <stddef.h>
#include <stdio.h>

#include "distzo/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Monotonic seconds. */
double dz_now(void);

/* Reads a whole file into a NUL-terminated malloc'd buffer (len may be NULL). */
dz_status dz_read_file(const char *path, char **out, size_t *len, dz_error *err);

/* Writes data to path atomically: path.tmp, fsync, rename, fsync of the directory. */
dz_status dz_write_file_atomic(const char *path, const void *data, size_t len, dz_error *err);

/* Copies src to dst (created or truncated), fsync'd. */
dz_status dz_copy_file(const char *src, const char *dst, dz_error *err);

/* Joins a directory and a file name into out (size cap). Returns 0, or -1 if too long. */
int dz_path_join(char *out, size_t cap, const char *dir, const char *name);
/* The folder that holds path, lexically: "a/b/" -> "a", "b" -> ".", "/b" -> "/". */
void dz_path_parent(const char *path, char *out, size_t cap);
int dz_file_exists(const char *path);
/* mkdir -p: creates path and any missing parents. 0 on success (or if it exists). */
int dz_mkdirs(const char *path);
int dz_is_dir(const char *path);
/* Where a JSON parser stopped at text[offset] (cJSON's error position), in words for the
 * user: "line L, column C: not valid JSON", or at a trailing comma (cJSON stops past the
 * bracket that follows it) "...: a trailing comma". Writes into out and returns it. */
char *dz_json_error_at(const char *text, size_t offset, char *out, size_t cap);
/* s as a JSON string, quotes and escapes included. */
void dz_write_json_string(FILE *out, const char *s);

#ifdef __cplusplus
}
#endif

#endif
