#include "core/io.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const kind_names[DZ_IO_KINDS] = {"read", "write", "sync", "alloc"};
static const int kind_errno[DZ_IO_KINDS] = {EIO, ENOSPC, EIO, ENOMEM};

static long fail_at[DZ_IO_KINDS];      /* the call number that fails (0: none) */
static _Atomic long calls[DZ_IO_KINDS];
static atomic_int armed;              /* some fault is set */
static pthread_once_t parsed = PTHREAD_ONCE_INIT;

static void parse_faults(void) {
    const char *spec = getenv("DISTZO_TEST_FAULT");
    for (const char *p = spec; p && *p;) {
        for (int k = 0; k < DZ_IO_KINDS; k++) {
            const size_t n = strlen(kind_names[k]);
            if (!strncmp(p, kind_names[k], n) && p[n] == ':') {
                fail_at[k] = atol(p + n + 1);
                atomic_store(&armed, 1);
            }
        }
        p = strchr(p, ',');
        if (p) p++;
    }
}

int dz_io_fault(dz_io_kind k) {
    pthread_once(&parsed, parse_faults);
    if (!atomic_load_explicit(&armed, memory_order_relaxed)) return 0;
    if (atomic_fetch_add(&calls[k], 1) + 1 != fail_at[k]) return 0;
    errno = kind_errno[k];
    return 1;
}

ssize_t dz_io_read(int fd, void *buf, size_t n) {
    if (dz_io_fault(DZ_IO_READ)) return -1;
    ssize_t r;
    while ((r = read(fd, buf, n)) < 0 && errno == EINTR) {}
    return r;
}

ssize_t dz_io_write(int fd, const void *buf, size_t n) {
    if (dz_io_fault(DZ_IO_WRITE)) return -1;
    ssize_t r;
    while ((r = write(fd, buf, n)) < 0 && errno == EINTR) {}
    return r;
}

ssize_t dz_io_pread(int fd, void *buf, size_t n, off_t off) {
    if (dz_io_fault(DZ_IO_READ)) return -1;
    ssize_t r;
    while ((r = pread(fd, buf, n, off)) < 0 && errno == EINTR) {}
    return r;
}

ssize_t dz_io_pwrite(int fd, const void *buf, size_t n, off_t off) {
    if (dz_io_fault(DZ_IO_WRITE)) return -1;
    ssize_t r;
    while ((r = pwrite(fd, buf, n, off)) < 0 && errno == EINTR) {}
    return r;
}

/* Linux moves at most about 2 GiB per call; every loop below asks for at most 1 GiB. */
static size_t chunk(size_t n) { return n < ((size_t)1 << 30) ? n : (size_t)1 << 30; }

int dz_io_write_all(int fd, const void *buf, size_t n) {
    for (const char *p = buf; n > 0;) {
        const ssize_t w = dz_io_write(fd, p, chunk(n));
        if (w <= 0) {
            if (w == 0) errno = EIO;
            return -1;
        }
        p += w, n -= (size_t)w;
    }
    return 0;
}

int dz_io_fsync(int fd) { return dz_io_fault(DZ_IO_SYNC) ? -1 : fsync(fd); }

int dz_io_fdatasync(int fd) { return dz_io_fault(DZ_IO_SYNC) ? -1 : fdatasync(fd); }

dz_status dz_io_fsync_dir(const char *dir, dz_error *err) {
    const int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return dz_fail(err, DZ_ERR_IO, "%s: cannot open the folder to sync it: %s", dir, strerror(errno));
    const int rc = dz_io_fsync(fd), e = errno;
    close(fd);
    return rc == 0 ? DZ_OK : dz_fail(err, DZ_ERR_IO, "%s: fsync of the folder failed: %s", dir, strerror(e));
}

dz_status dz_io_fsync_parent(const char *path, dz_error *err) {
    char dir[4096];
    if (snprintf(dir, sizeof dir, "%s", path) >= (int)sizeof dir)
        return dz_fail(err, DZ_ERR_INVALID, "%s: path too long", path);
    return dz_io_fsync_dir(dirname(dir), err);
}
