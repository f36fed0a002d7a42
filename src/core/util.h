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

/* Opens path read-only and refuses anything but a regular file (a FIFO, a device such as
 * /dev/zero, a directory): opening does not block on a FIFO (O_NONBLOCK, cleared once the
 * file is known to be regular). Returns the descriptor, or -1 with err naming the path. */
int dz_open_regular(const char *path, dz_error *err);

/* Maps the regular file path whole, read-only and private: *map (munmap it with *size);
 * the descriptor is closed, the mapping keeps the file alive. A file shorter than
 * min_size is not mapped: DZ_ERR_FORMAT with *size set and err untouched, for the
 * caller to say what the bytes were too few for. */
dz_status dz_map_file(const char *path, size_t min_size, void **map, size_t *size, dz_error *err);

/* A file named by a folder's own contents (a shard index, a tokenizer file, a run folder's
 * LATEST) must stay in that folder: name is relative without "..", and where dir/name
 * resolves, symlinks included, is inside dir. One exception, the Hugging Face hub cache:
 * for dir = .../snapshots/REV the files are symlinks into .../blobs, which is allowed.
 * A path that does not exist (yet) passes; opening it reports that. DZ_ERR_FORMAT naming
 * what (e.g. "weight_map['x']") and both paths otherwise. */
dz_status dz_path_check_inside(const char *dir, const char *name, const char *what, dz_error *err);

/* Where path resolves, symlinks included, even when its last components do not exist yet
 * (they are appended to the resolved existing part). -1 if nothing of it resolves. */
int dz_path_resolve(const char *path, char *out, size_t cap);
/* 1 when path (resolved as above) is dir or inside it. */
int dz_path_within(const char *path, const char *dir);

#endif
