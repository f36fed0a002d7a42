/* libFuzzer target for run.json and train --config (src/run/run_files.h): resume and
 * export take a run's settings from run.json, and a worker gets them from the
 * coordinator's GET /v1/run. Beyond "does not crash": a run.json that parses and passes
 * the trainer's check is written back (dz_run_config_write) and read again to equal
 * settings, field by field (resume's own comparison finds nothing changed), and that
 * written run.json applied as a --config file over the defaults gives them too (a run's
 * run.json restarts it). The input is also applied as a --config file itself. */
#define _GNU_SOURCE
#include "fuzz_input.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "distzo/log.h"
#include "distzo/train.h"
#include "run/run_files.h"

static char g_run_dir[64];

static void remove_run_dir(void) {
    char path[96];
    snprintf(path, sizeof path, "%s/run.json", g_run_dir);
    unlink(path);
    rmdir(g_run_dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    dz_log_set_level(DZ_LOG_ERROR); /* resume's notes on changed settings, the check's warnings */
    fuzz_temp_dir(g_run_dir, sizeof g_run_dir, "fuzz_run_config");
    atexit(remove_run_dir);
    return 0;
}

/* a and b hold the same settings: resume's comparison changes nothing. */
static void same_settings(dz_train_config *a, const dz_train_config *b) {
    int changed = 1;
    dz_error err;
    if (dz_run_config_resume(g_run_dir, a, b, &changed, &err) != DZ_OK || changed) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    dz_train_config parsed, again, applied;
    char *s1 = NULL, *s2 = NULL, *s3 = NULL, written[96];
    dz_error err;
    const char *const caller_keys[] = {"threads", NULL};
    dz_train_config_default(&applied);
    if (dz_train_config_load_file(fuzz_file(0, data, size), &applied, caller_keys, &s3, &err) == DZ_OK) free(s3);
    s3 = NULL;
    if (dz_run_config_parse((const char *)data, size, "run.json", &parsed, &s1, &err) == DZ_OK &&
        dz_train_config_check(&parsed, &err) == DZ_OK) {
        if (dz_run_config_write(g_run_dir, &parsed, &err) != DZ_OK) abort();
        if (dz_train_config_load(g_run_dir, &again, &s2, &err) != DZ_OK) abort();
        same_settings(&again, &parsed);
        snprintf(written, sizeof written, "%s/run.json", g_run_dir);
        dz_train_config_default(&applied);
        if (dz_train_config_load_file(written, &applied, caller_keys, &s3, &err) != DZ_OK) abort();
        same_settings(&applied, &parsed);
    }
    free(s1);
    free(s2);
    free(s3);
    return 0;
}
