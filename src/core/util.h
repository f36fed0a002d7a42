/* Small shared helpers for the library's internals. */
#ifndef DZ_CORE_UTIL_H
#define DZ_CORE_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "distzo/error.h"

#define DZ_ALIGN 64

/* 64-byte aligned, zero-filled allocation; NULL on failure. Free with dz_free. */
void *dz_alloc(size_t bytes);
void dz_free(void *p);

/* Monotonic seconds. */
double dz_now(void);

/* Reads a whole file into a NUL-terminated malloc'd buffer. */
/* Opens path read-only and refuses anything but a regular file (a FIFO, a device such as
 * /dev/zero, a directory): opening does not block on a FIFO (O_NONBLOCK, cleared once the
 * file is known to be regular). Returns the descriptor, or -1 with err naming the path. */
int dz_open_regular(const char *path, dz_error *err);
dz_status dz_read_file(const char *path, char **out, size_t *len, dz_error *err);

/* Writes data to path atomically: path.tmp, fsync, rename, fsync of the directory. */
dz_status dz_write_file_atomic(const char *path, const void *data, size_t len, dz_error *err);

/* Copies src to dst (created or truncated), fsync'd. */
dz_status dz_copy_file(const char *src, const char *dst, dz_error *err);

/* Joins a directory and a file name into out (size cap). Returns 0, or -1 if too long. */
int dz_path_join(char *out, size_t cap, const char *dir, const char *name);
int dz_file_exists(const char *path);
/* A file named by a folder's own contents (a shard index, a tokenizer file, a run folder's
 * LATEST) must stay in that folder: name is relative without "..", and where dir/name
 * resolves, symlinks included, is inside dir. One exception, the Hugging Face hub cache:
 * for dir = .../snapshots/REV the files are symlinks into .../blobs, which is allowed.
 * A path that does not exist (yet) passes; opening it reports that. DZ_ERR_FORMAT naming
 * what (e.g. "weight_map['x']") and both paths otherwise. */
dz_status dz_path_check_inside(const char *dir, const char *name, const char *what, dz_error *err);
/* mkdir -p: creates path and any missing parents. 0 on success (or if it exists). */
int dz_mkdirs(const char *path);
int dz_is_dir(const char *path);

#endif
