/* The loaders under fuzzing read files, not buffers: the input is written to an
 * in-memory file (memfd) and the loader is given its /proc/self/fd path, so nothing
 * touches the disk and each run starts from the same state. */
#ifndef DZ_FUZZ_INPUT_H
#define DZ_FUZZ_INPUT_H

#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* Replaces the contents of the in-memory file slot (0..3) by data and returns its path. */
static inline const char *fuzz_file(int slot, const uint8_t *data, size_t size) {
    static int fds[4] = {-1, -1, -1, -1};
    static char paths[4][64];
    if (fds[slot] < 0) {
        fds[slot] = memfd_create("fuzz-input", 0);
        if (fds[slot] < 0) abort();
        snprintf(paths[slot], sizeof paths[slot], "/proc/self/fd/%d", fds[slot]);
    }
    if (ftruncate(fds[slot], 0) != 0 || pwrite(fds[slot], data, size, 0) != (ssize_t)size) abort();
    return paths[slot];
}

/* A new folder for a target's files, in memory where the system has /dev/shm (fsync is
 * then free), else under /tmp: name_XXXXXX into buf. */
static inline void fuzz_temp_dir(char *buf, size_t cap, const char *name) {
    struct stat st;
    const char *base = stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) ? "/dev/shm" : "/tmp";
    snprintf(buf, cap, "%s/%s_XXXXXX", base, name);
    if (!mkdtemp(buf)) abort();
}

#endif
