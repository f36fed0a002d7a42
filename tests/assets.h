/* The shared real assets (stories260K, SST-2, GPT-2 BPE) as the tests find them, and what
 * a test does when one is missing: it FAILS, naming the file and DISTZO_ASSETS, so a
 * machine without the assets cannot report the claims that need them as passed. A
 * developer without them opts out explicitly (configure with -DDZ_REQUIRE_ASSETS=OFF,
 * which runs every test with DZ_REQUIRE_ASSETS=0; or set that variable by hand): the case
 * is then skipped, and the program exits 77 (CTest: "Skipped") instead of 0.
 * Header-only (static functions), one test program per file; include after cmocka.h. */
#ifndef DZ_TESTS_ASSETS_H
#define DZ_TESTS_ASSETS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* CTest's code for "skipped" (SKIP_RETURN_CODE of every test in tests/CMakeLists.txt). */
enum { DZ_TEST_SKIPPED = 77 };

static int g_assets_skipped; /* a case of this program skipped for a missing asset */

/* DISTZO_ASSETS, else the folder the build was configured with. */
static inline const char *test_assets_dir(void) {
    const char *env = getenv("DISTZO_ASSETS");
    return env && *env ? env : DZ_TEST_ASSETS;
}

static inline int test_assets_required(void) {
    const char *env = getenv("DZ_REQUIRE_ASSETS");
    return !(env && strcmp(env, "0") == 0);
}

/* ASSETS/rel into out. A missing file fails the calling test, or skips it where the
 * developer opted out (see above). */
static inline void test_asset_path(char *out, size_t cap, const char *rel) {
    snprintf(out, cap, "%s/%s", test_assets_dir(), rel);
    if (access(out, R_OK) == 0) return;
    if (test_assets_required())
        fail_msg("asset %s not found: set DISTZO_ASSETS to the shared assets folder (README.md lists its files), "
                 "or configure with -DDZ_REQUIRE_ASSETS=OFF to skip the tests that need it", out);
    print_message("SKIP: asset %s not found (DZ_REQUIRE_ASSETS=0)\n", out);
    g_assets_skipped = 1;
    skip();
}

/* main's return: cmocka's failure count, or DZ_TEST_SKIPPED when nothing failed but a
 * case was skipped for a missing asset. */
static inline int test_assets_exit(int failed) { return failed ? failed : g_assets_skipped ? DZ_TEST_SKIPPED : 0; }

#endif
