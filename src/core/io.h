/* The system calls distzo makes on files, in one place, for two reasons: EINTR and short
 * transfers are handled once, and tests can make the Nth call of a kind fail to check
 * that every error reaches the command and that a failed run stays resumable.
 *
 * The test seam: DISTZO_TEST_FAULT="KIND:N[,KIND:N...]" with KIND read, write, sync or
 * alloc makes the Nth call of that kind (counted from 1 over the whole process, every
 * thread) fail: read and sync with EIO, write with ENOSPC (a full disk), alloc (dz_alloc)
 * with NULL. Unset, the seam costs one relaxed load per call. */
#ifndef DZ_CORE_IO_H
#define DZ_CORE_IO_H

#include <stddef.h>
#include <sys/types.h>

#include "distzo/error.h"

typedef enum dz_io_kind { DZ_IO_READ, DZ_IO_WRITE, DZ_IO_SYNC, DZ_IO_ALLOC, DZ_IO_KINDS } dz_io_kind;

/* 1 when this call of kind k must fail (errno is then set). */
int dz_io_fault(dz_io_kind k);

/* One read/write/pread/pwrite (EINTR retried; may transfer less than n). */
ssize_t dz_io_read(int fd, void *buf, size_t n);
ssize_t dz_io_write(int fd, const void *buf, size_t n);
ssize_t dz_io_pread(int fd, void *buf, size_t n, off_t off);
ssize_t dz_io_pwrite(int fd, const void *buf, size_t n, off_t off);
/* All n bytes (looping over short transfers): 0, or -1 with errno. */
int dz_io_write_all(int fd, const void *buf, size_t n);
int dz_io_fsync(int fd);
int dz_io_fdatasync(int fd);
/* fsync of a folder, and of the folder holding path: a rename into it is then durable. */
dz_status dz_io_fsync_dir(const char *dir, dz_error *err);
dz_status dz_io_fsync_parent(const char *path, dz_error *err);

#endif
