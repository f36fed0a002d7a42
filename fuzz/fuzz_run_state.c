/* libFuzzer target for the run folder's state files that resume reads beside run.json and
 * the seed log (fuzz_run_config, fuzz_seedlog): LATEST (the newest checkpoint), CHECKPOINTS
 * (what --keep-checkpoints may remove) and metrics.jsonl (the rows resume keeps). The
 * input is split in three: bytes 0-1 and 2-3 give the lengths of LATEST's and
 * CHECKPOINTS's text (modulo what is there), metrics.jsonl is the rest. Beyond "does not
 * crash": LATEST is accepted only when it names checkpoint-7/, the one checkpoint folder
 * (with its trainer_state.json) in the fuzzed run folder, and then by exactly the path
 * the writer makes; every name CHECKPOINTS accepts is one the writer writes
 * ("checkpoint-N", N as printed), so pruning can never remove a folder of another name.
 * CHECKPOINTS's reader is static in checkpoint_files.c, which is therefore included here. */
#include "fuzz_input.h"

#include "../src/run/checkpoint_files.c"
#include "run/metrics.h"

static char g_run_dir[64];

static void write_text(const char *leaf, const uint8_t *data, size_t len) {
    char path[128];
    snprintf(path, sizeof path, "%s/%s", g_run_dir, leaf);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, len, f) != len || fclose(f) != 0) abort();
}

static void remove_run_dir(void) { nftw(g_run_dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS); }

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    dz_log_set_level(DZ_LOG_ERROR); /* metrics.jsonl's torn-tail warnings */
    fuzz_temp_dir(g_run_dir, sizeof g_run_dir, "fuzz_run_state");
    char path[128];
    snprintf(path, sizeof path, "%s/checkpoint-7", g_run_dir);
    if (mkdir(path, 0755) != 0) abort();
    atexit(remove_run_dir);
    write_text("checkpoint-7/trainer_state.json", (const uint8_t *)"{}\n", 3);
    return 0;
}

static void check_latest(void) {
    char path[PATH_MAX], want[PATH_MAX];
    int steps = -1;
    dz_error err;
    if (dz_checkpoint_latest(g_run_dir, path, sizeof path, &steps, &err) != DZ_OK) return;
    snprintf(want, sizeof want, "%s/checkpoint-7", g_run_dir);
    if (steps != 7 || strcmp(path, want)) abort();
}

static void check_list(void) {
    static char names[MAX_LISTED + 1][64];
    int n = -1;
    dz_error err;
    if (read_list(g_run_dir, names, &n, &err) != DZ_OK) return;
    if (n < 0 || n > MAX_LISTED) abort();
    for (int i = 0; i < n; i++) {
        int steps = -1;
        char again[64];
        if (sscanf(names[i], "checkpoint-%d", &steps) != 1 || steps < 0) abort();
        snprintf(again, sizeof again, "checkpoint-%d", steps);
        if (strcmp(again, names[i])) abort();
    }
}

static void check_metrics(const uint8_t *data, size_t len) {
    char path[128];
    snprintf(path, sizeof path, "%s/metrics.jsonl", g_run_dir);
    dz_metrics_row *rows = NULL;
    size_t n = 0, lines = 1;
    dz_error err;
    for (size_t i = 0; i < len; i++) lines += data[i] == '\n';
    if (dz_metrics_read(path, &rows, &n, &err) == DZ_OK && n > lines) abort();
    free(rows);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 4) return 0;
    size_t rest = size - 4;
    const size_t latest = (data[0] | (size_t)data[1] << 8) % (rest + 1);
    const size_t list = (data[2] | (size_t)data[3] << 8) % (rest - latest + 1);
    const uint8_t *p = data + 4;
    write_text("LATEST", p, latest);
    write_text("CHECKPOINTS", p + latest, list);
    write_text("metrics.jsonl", p + latest + list, rest - latest - list);
    check_latest();
    check_list();
    check_metrics(p + latest + list, rest - latest - list);
    return 0;
}
