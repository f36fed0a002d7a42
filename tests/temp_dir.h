/* A scratch folder per test program: made by a cmocka group setup, removed with its
 * contents by the teardown. Include after defining _GNU_SOURCE (nftw). */
#ifndef DZ_TESTS_TEMP_DIR_H
#define DZ_TESTS_TEMP_DIR_H

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>

static char g_dir[256];

static int dz_rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)flag, (void)ftw;
    return remove(p);
}

/* g_dir = /tmp/<prefix>XXXXXX, created. */
static int dz_temp_dir_make(const char *prefix) {
    snprintf(g_dir, sizeof g_dir, "/tmp/%sXXXXXX", prefix);
    return mkdtemp(g_dir) ? 0 : -1;
}

static int dz_temp_dir_remove(void) { return nftw(g_dir, dz_rm_entry, 16, FTW_DEPTH | FTW_PHYS); }

#endif
