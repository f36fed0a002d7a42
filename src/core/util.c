#include "core/util.h"

#include "core/io.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

void *dz_alloc(size_t bytes) {
    void *p = NULL;
    if (dz_io_fault(DZ_IO_ALLOC)) return NULL;
    if (bytes == 0) bytes = DZ_ALIGN;
    size_t rounded = (bytes + DZ_ALIGN - 1) / DZ_ALIGN * DZ_ALIGN;
    if (posix_memalign(&p, DZ_ALIGN, rounded) != 0) return NULL;
    memset(p, 0, rounded);
    return p;
}

void dz_free(void *p) { free(p); }

double dz_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int dz_open_regular(const char *path, dz_error *err) {
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        dz_fail(err, DZ_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        dz_fail(err, DZ_ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
    } else if (!S_ISREG(st.st_mode)) {
        dz_fail(err, DZ_ERR_IO, "%s: not a regular file (%s)", path,
                S_ISDIR(st.st_mode) ? "a directory" : S_ISFIFO(st.st_mode) ? "a FIFO" :
                S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "a device" : "a socket or other special file");
    } else if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) == 0) {
        return fd;
    } else {
        dz_fail(err, DZ_ERR_IO, "%s: fcntl failed: %s", path, strerror(errno));
    }
    close(fd);
    return -1;
}

dz_status dz_map_file(const char *path, size_t min_size, void **map, size_t *size, dz_error *err) {
    *map = NULL;
    *size = 0;
    const int fd = dz_open_regular(path, err);
    if (fd < 0) return err ? err->code : DZ_ERR_IO;
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        const int e = errno;
        close(fd);
        return dz_fail(err, DZ_ERR_IO, "%s: cannot stat: %s", path, strerror(e));
    }
    *size = (size_t)sb.st_size;
    if (*size < min_size) {
        close(fd);
        return DZ_ERR_FORMAT;
    }
    void *p = mmap(NULL, *size, PROT_READ, MAP_PRIVATE, fd, 0);
    const int e = errno;
    close(fd);
    if (p == MAP_FAILED) return dz_fail(err, DZ_ERR_IO, "%s: mmap failed: %s", path, strerror(e));
    *map = p;
    return DZ_OK;
}

dz_status dz_read_file(const char *path, char **out, size_t *len, dz_error *err) {
    int fd = dz_open_regular(path, err);
    if (fd < 0) return err ? err->code : DZ_ERR_IO;
    char *buf = NULL;
    size_t cap = 0, n = 0;
    for (;;) {
        if (n + 65536 + 1 > cap) {
            cap = cap ? cap * 2 : 65536 * 2;
            char *nb = realloc(buf, cap);
            if (!nb) {
                free(buf);
                close(fd);
                return dz_fail(err, DZ_ERR_NOMEM, "%s: out of memory reading file", path);
            }
            buf = nb;
        }
        ssize_t got = dz_io_read(fd, buf + n, cap - n - 1);
        if (got < 0) {
            const int e = errno;
            free(buf);
            close(fd);
            return dz_fail(err, DZ_ERR_IO, "%s: read error: %s", path, strerror(e));
        }
        if (got == 0) break;
        n += (size_t)got;
    }
    close(fd);
    buf[n] = '\0';
    *out = buf;
    if (len) *len = n;
    return DZ_OK;
}

dz_status dz_write_file_atomic(const char *path, const void *data, size_t len, dz_error *err) {
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid()) >= (int)sizeof tmp)
        return dz_fail(err, DZ_ERR_INVALID, "%s: path too long", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return dz_fail(err, DZ_ERR_IO, "%s: cannot create: %s", tmp, strerror(errno));
    if (dz_io_write_all(fd, data, len) != 0) {
        const int e = errno;
        close(fd);
        unlink(tmp);
        return dz_fail(err, DZ_ERR_IO, "%s: write failed: %s", tmp, strerror(e));
    }
    if (dz_io_fsync(fd) != 0 || close(fd) != 0) {
        const int e = errno;
        unlink(tmp);
        return dz_fail(err, DZ_ERR_IO, "%s: fsync/close failed: %s", tmp, strerror(e));
    }
    if (rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        return dz_fail(err, DZ_ERR_IO, "%s: rename failed: %s", path, strerror(e));
    }
    return dz_io_fsync_parent(path, err); /* the rename itself is durable */
}

int dz_path_join(char *out, size_t cap, const char *dir, const char *name) {
    int n = snprintf(out, cap, "%s/%s", dir, name);
    return (n < 0 || (size_t)n >= cap) ? -1 : 0;
}

void dz_path_parent(const char *path, char *out, size_t cap) {
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/') n--;
    while (n > 0 && path[n - 1] != '/') n--;
    while (n > 1 && path[n - 1] == '/') n--;
    if (n == 0) snprintf(out, cap, ".");
    else snprintf(out, cap, "%.*s", (int)n, path);
}

int dz_file_exists(const char *path) { return access(path, F_OK) == 0; }

/* real is inside root (both resolved): equal, or root followed by '/'. */
static int under(const char *root, const char *real) {
    const size_t n = strlen(root);
    return !strncmp(root, real, n) && (real[n] == '\0' || real[n] == '/' || (n == 1 && root[0] == '/'));
}

dz_status dz_path_check_inside(const char *dir, const char *name, const char *what, dz_error *err) {
    int lexical_ok = name[0] && name[0] != '/';
    for (const char *p = name; lexical_ok && p && *p;) { /* no ".." component */
        const char *slash = strchr(p, '/');
        const size_t len = slash ? (size_t)(slash - p) : strlen(p);
        if (len == 2 && p[0] == '.' && p[1] == '.') lexical_ok = 0;
        p = slash ? slash + 1 : NULL;
    }
    if (!lexical_ok) return dz_fail(err, DZ_ERR_FORMAT, "%s: %s '%s' names a file outside the folder", dir, what, name);
    char path[PATH_MAX];
    if (dz_path_join(path, sizeof path, dir, name) != 0) return dz_fail(err, DZ_ERR_INVALID, "%s: path too long", dir);
    char root[PATH_MAX], real[PATH_MAX];
    if (!realpath(path, real)) return DZ_OK; /* missing: the open that follows says so */
    if (!realpath(dir, root)) return dz_fail(err, DZ_ERR_IO, "%s: cannot resolve: %s", dir, strerror(errno));
    if (under(root, real)) return DZ_OK;
    char *slash = strrchr(root, '/'); /* the hub cache: ROOT/snapshots/REV -> ROOT/blobs */
    if (slash && slash > root) {
        *slash = '\0';
        char *parent = strrchr(root, '/');
        if (parent && !strcmp(parent + 1, "snapshots")) {
            snprintf(parent + 1, sizeof root - (size_t)(parent + 1 - root), "blobs");
            if (under(root, real)) return DZ_OK;
        }
    }
    return dz_fail(err, DZ_ERR_FORMAT, "%s: %s '%s' resolves to %s, outside the folder", dir, what, name, real);
}

int dz_path_resolve(const char *path, char *out, size_t cap) {
    char head[PATH_MAX], real[PATH_MAX];
    if (snprintf(head, sizeof head, "%s", path) >= (int)sizeof head) return -1;
    size_t n = strlen(head);
    while (n > 1 && head[n - 1] == '/') head[--n] = '\0';
    if (realpath(head, real)) return snprintf(out, cap, "%s", real) < (int)cap ? 0 : -1;
    char *slash = strrchr(head, '/');
    const char *tail = slash ? slash + 1 : head;
    char parent[PATH_MAX];
    if (!slash) snprintf(parent, sizeof parent, ".");
    else if (slash == head) snprintf(parent, sizeof parent, "/");
    else snprintf(parent, sizeof parent, "%.*s", (int)(slash - head), head);
    if (!strcmp(tail, ".") || !strcmp(tail, "..") || dz_path_resolve(parent, real, sizeof real) != 0) return -1;
    return snprintf(out, cap, "%s%s%s", real, strcmp(real, "/") ? "/" : "", tail) < (int)cap ? 0 : -1;
}

int dz_path_within(const char *path, const char *dir) {
    char p[PATH_MAX], d[PATH_MAX];
    if (dz_path_resolve(path, p, sizeof p) != 0 || dz_path_resolve(dir, d, sizeof d) != 0) return 0;
    return under(d, p);
}

int dz_mkdirs(const char *path) {
    char buf[4096];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf) return -1;
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (mkdir(buf, 0755) != 0 && errno != EEXIST) return -1;
        *p = '/';
    }
    return mkdir(buf, 0755) != 0 && errno != EEXIST ? -1 : 0;
}

int dz_is_dir(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Copies src to dst (new file), fsync'd. */
dz_status dz_copy_file(const char *src, const char *dst, dz_error *err) {
    int in = dz_open_regular(src, err);
    if (in < 0) return err ? err->code : DZ_ERR_IO;
    int out = open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    dz_status st = DZ_OK;
    if (out < 0) st = dz_fail(err, DZ_ERR_IO, "%s: cannot copy to %s: %s", src, dst, strerror(errno));
    static char buf[1 << 20];
    for (ssize_t n; st == DZ_OK && (n = dz_io_read(in, buf, sizeof buf)) != 0;) {
        if (n < 0) st = dz_fail(err, DZ_ERR_IO, "%s: read failed: %s", src, strerror(errno));
        else if (dz_io_write_all(out, buf, (size_t)n) != 0)
            st = dz_fail(err, DZ_ERR_IO, "%s: write failed: %s", dst, strerror(errno));
    }
    if (st == DZ_OK && dz_io_fsync(out) != 0)
        st = dz_fail(err, DZ_ERR_IO, "%s: fsync failed: %s", dst, strerror(errno));
    if (in >= 0) close(in);
    if (out >= 0) close(out);
    return st;
}


char *dz_json_error_at(const char *text, size_t offset, char *out, size_t cap) {
    const char *what = "not valid JSON";
    const size_t at = offset > 0 && (text[offset - 1] == '}' || text[offset - 1] == ']') ? offset - 1 : offset;
    if (text[at] == '}' || text[at] == ']') {
        size_t k = at; /* the bracket; a comma before it, past blanks, is the fault */
        while (k > 0 && (text[k - 1] == ' ' || text[k - 1] == '\t' || text[k - 1] == '\n' || text[k - 1] == '\r')) k--;
        if (k > 0 && text[k - 1] == ',') offset = k - 1, what = "a trailing comma (JSON allows none)";
    }
    int line = 1, column = 1;
    for (size_t i = 0; i < offset && text[i]; i++) {
        if (text[i] == '\n') line++, column = 1;
        else column++;
    }
    snprintf(out, cap, "line %d, column %d: %s", line, column, what);
    return out;
}

void dz_write_json_string(FILE *out, const char *s) {
    fputc('"', out);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') fprintf(out, "\\%c", *p);
        else if (*p == '\n') fputs("\\n", out);
        else if (*p == '\t') fputs("\\t", out);
        else if (*p == '\r') fputs("\\r", out);
        else if (*p < 0x20) fprintf(out, "\\u%04x", *p);
        else fputc(*p, out);
    }
    fputc('"', out);
}
