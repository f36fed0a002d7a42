/* A scratch folder per test program: made by a cmocka group setup, removed with its
 * contents by the teardown (dz_temp_dir_setup/teardown, or by hand around a case).
 * Include after defining _GNU_SOURCE (nftw, program_invocation_short_name). */
#ifndef DZ_TESTS_TEMP_DIR_H
#define DZ_TESTS_TEMP_DIR_H

#include <errno.h>
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

/* cmocka group setup and teardown: /tmp/<test program>_XXXXXX for all the cases. */
static inline int dz_temp_dir_setup(void **state) {
    (void)state;
    char prefix[128];
    snprintf(prefix, sizeof prefix, "%s_", program_invocation_short_name);
    return dz_temp_dir_make(prefix);
}

static inline int dz_temp_dir_teardown(void **state) {
    (void)state;
    return dz_temp_dir_remove();
}

#endif
