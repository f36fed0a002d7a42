/* The run folder's lock and its checkpoint folders: checkpoint-N/ and best/ (each made
 * in a temporary folder and shown by one rename), CHECKPOINTS (the numbered ones this run
 * wrote, for pruning), LATEST (the newest complete one), so a crash at any moment leaves
 * the previous state usable; and how far a run's files say it got. */
#define _GNU_SOURCE /* nftw */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/io.h"
#include "core/util.h"
#include "distzo/log.h"
#include "run/metrics.h"
#include "run/run_files.h"

/* ---- the lock ---------------------------------------------------------------------- */

dz_status dz_run_lock(const char *run_dir, int *fd, dz_error *err) {
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/.lock", run_dir);
    *fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (*fd < 0) return dz_fail(err, DZ_ERR_IO, "%s: cannot create the run folder's lock: %s", path, strerror(errno));
    if (flock(*fd, LOCK_EX | LOCK_NB) == 0) return dz_run_clean_temporaries(run_dir, err); /* ours now */
    const int e = errno;
    close(*fd);
    *fd = -1;
    return dz_fail(err, DZ_ERR_INVALID, "%s: another distzo process is using this run folder (%s)", run_dir,
                   e == EWOULDBLOCK ? "it holds .lock" : strerror(e));
}

void dz_run_unlock(const char *run_dir, int fd, int remove_lock, int remove_folder) {
    if (fd < 0) return;
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/.lock", run_dir);
    if (remove_lock || remove_folder) unlink(path);
    if (remove_folder) rmdir(run_dir); /* only if empty: whatever else is there stays */
    close(fd);
}

/* ---- checkpoints ------------------------------------------------------------------- */

static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)flag, (void)ftw;
    return remove(p);
}

/* Removes a folder this run made, with its contents (no-op when it does not exist). */
static dz_status remove_tree(const char *path, dz_error *err) {
    struct stat st;
    if (lstat(path, &st) != 0 && errno == ENOENT) return DZ_OK;
    if (nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS) != 0)
        return dz_fail(err, DZ_ERR_IO, "%s: cannot remove: %s", path, strerror(errno));
    return DZ_OK;
}

/* run_dir/CHECKPOINTS lists, oldest first, the numbered checkpoints this run wrote and
 * still keeps: pruning removes only those, never a folder the user (or another tool, or
 * an older distzo) put there, whatever its name. */
enum { MAX_LISTED = 4096 };

static dz_status read_list(const char *run_dir, char names[][64], int *n, dz_error *err) {
    char path[PATH_MAX], *text = NULL;
    *n = 0;
    snprintf(path, sizeof path, "%s/CHECKPOINTS", run_dir);
    if (!dz_file_exists(path)) return DZ_OK;
    dz_status st = dz_read_file(path, &text, NULL, err);
    for (char *line = text, *next; st == DZ_OK && line && *line; line = next) {
        next = strchr(line, '\n');
        if (next) *next++ = '\0';
        int steps = -1;
        char written[64] = ""; /* the name as the writer makes it: no sign, space or leading zero */
        if (sscanf(line, "checkpoint-%d", &steps) == 1) snprintf(written, sizeof written, "checkpoint-%d", steps);
        if (steps < 0 || strcmp(written, line))
            st = dz_fail(err, DZ_ERR_FORMAT, "%s: line %d is '%.64s', expected 'checkpoint-N'", path, *n + 1, line);
        else if (*n == MAX_LISTED)
            st = dz_fail(err, DZ_ERR_FORMAT, "%s: more than %d checkpoints listed", path, MAX_LISTED);
        else
            snprintf(names[(*n)++], 64, "%s", line);
    }
    free(text);
    return st;
}

static dz_status write_list(const char *run_dir, char names[][64], int n, dz_error *err) {
    char path[PATH_MAX], *text = malloc((size_t)n * 64 + 1);
    if (!text) return dz_fail(err, DZ_ERR_NOMEM, "%s: out of memory", run_dir);
    size_t len = 0;
    for (int i = 0; i < n; i++) len += (size_t)sprintf(text + len, "%s\n", names[i]);
    snprintf(path, sizeof path, "%s/CHECKPOINTS", run_dir);
    const dz_status st = dz_write_file_atomic(path, text, len, err);
    free(text);
    return st;
}

/* Lists leaf before its folder appears (a crash between the rename and the list would leave
 * a checkpoint no pruning ever removes); a listed one that never appeared is skipped. */
static dz_status list_add(const char *run_dir, const char *leaf, dz_error *err) {
    static char names[MAX_LISTED + 1][64];
    int n = 0;
    dz_status st = read_list(run_dir, names, &n, err);
    for (int i = 0; st == DZ_OK && i < n; i++)
        if (!strcmp(names[i], leaf)) return DZ_OK;
    if (st == DZ_OK) snprintf(names[n++], 64, "%s", leaf);
    return st == DZ_OK ? write_list(run_dir, names, n, err) : st;
}

/* Adds leaf to the list and removes the oldest listed checkpoints beyond keep (saying so). */
static dz_status prune(const char *run_dir, const char *leaf, int keep, dz_error *err) {
    static char names[MAX_LISTED + 1][64];
    int n = 0;
    dz_status st = read_list(run_dir, names, &n, err);
    if (st != DZ_OK) return st;
    int at = 0;
    while (at < n && strcmp(names[at], leaf)) at++;
    if (at == n) snprintf(names[n++], 64, "%s", leaf);
    char path[PATH_MAX + 64];
    int drop = n - keep > 0 ? n - keep : 0;
    for (int i = 0; i < drop && st == DZ_OK; i++) {
        if (!strcmp(names[i], leaf)) continue; /* never the one just written */
        snprintf(path, sizeof path, "%s/%.63s", run_dir, names[i]);
        st = remove_tree(path, err);
        if (st == DZ_OK) dz_log(DZ_LOG_INFO, "removed %s (--keep-checkpoints %d)", path, keep);
    }
    if (st != DZ_OK) return st;
    int kept = 0;
    for (int i = 0; i < n; i++)
        if (i >= drop || !strcmp(names[i], leaf)) memmove(names[kept++], names[i], 64);
    return write_list(run_dir, names, kept, err);
}

/* What a write leaves when it stops midway (a crash, a full disk): ours by these names (the
 * run folder is locked, so no other process is writing them). .old-best is the previous best/
 * when the swap did not finish; FILE.tmp.PID a file written atomically (dz_write_file_atomic). */
static int is_temporary(const char *name) {
    int steps = -1, end = 0, pid = -1;
    if (!strcmp(name, ".tmp-best") ||
        (sscanf(name, ".tmp-checkpoint-%d%n", &steps, &end) == 1 && steps >= 0 && name[end] == '\0'))
        return 1;
    static const char *const files[] = {"CHECKPOINTS", "LATEST", "run.json", "metrics.jsonl", "metrics.csv",
                                        "federated.json", "seeds.log", "coordinator.url"};
    const char *tmp = strstr(name, ".tmp."); /* TensorBoard's events.out.tfevents.*: any name of that prefix */
    const size_t n = tmp ? (size_t)(tmp - name) : 0;
    int ours = tmp && !strncmp(name, "events.out.tfevents.", 20);
    for (size_t i = 0; tmp && i < sizeof files / sizeof files[0]; i++)
        ours |= strlen(files[i]) == n && !strncmp(name, files[i], n);
    return ours && sscanf(tmp, ".tmp.%d%n", &pid, &end) == 1 && pid > 0 && tmp[end] == '\0';
}

dz_status dz_run_clean_temporaries(const char *run_dir, dz_error *err) {
    DIR *d = opendir(run_dir);
    if (!d) return DZ_OK; /* no folder yet: nothing left over */
    char path[PATH_MAX + 300], best[PATH_MAX + 16];
    dz_status st = DZ_OK;
    for (struct dirent *e; st == DZ_OK && (e = readdir(d));) {
        if (!is_temporary(e->d_name)) continue;
        snprintf(path, sizeof path, "%s/%s", run_dir, e->d_name);
        if ((st = remove_tree(path, err)) == DZ_OK) dz_log(DZ_LOG_INFO, "removed %s (an unfinished write)", path);
    }
    closedir(d);
    snprintf(path, sizeof path, "%s/.old-best", run_dir);
    snprintf(best, sizeof best, "%s/best", run_dir);
    if (st == DZ_OK && dz_is_dir(path) && !dz_is_dir(best) && rename(path, best) != 0)
        st = dz_fail(err, DZ_ERR_IO, "%s: rename to %s failed: %s", path, best, strerror(errno));
    else if (st == DZ_OK && dz_is_dir(path))
        st = remove_tree(path, err);
    return st;
}

static dz_status checkpoint_write(const char *run_dir, const char *leaf, int numbered, const char *tmp,
                                  const dz_model *m, const dz_tokenizer *tok, const char *state_json,
                                  const char *weights_file, int keep, const dz_checkpoint_extra *extra,
                                  dz_error *err);

dz_status dz_checkpoint_write(const char *run_dir, const char *name, int steps_done, const dz_model *m,
                              const dz_tokenizer *tok, const char *state_json, const char *weights_file, int keep,
                              dz_error *err) {
    return dz_checkpoint_write_extra(run_dir, name, steps_done, m, tok, state_json, weights_file, keep, NULL, err);
}

dz_status dz_checkpoint_write_extra(const char *run_dir, const char *name, int steps_done, const dz_model *m,
                                    const dz_tokenizer *tok, const char *state_json, const char *weights_file,
                                    int keep, const dz_checkpoint_extra *extra, dz_error *err) {
    char tmp[PATH_MAX], leaf[64];
    const int numbered = strcmp(name, "checkpoint") == 0;
    if (numbered && keep < 1) return dz_fail(err, DZ_ERR_INVALID, "--keep-checkpoints %d: keep at least 1", keep);
    if (numbered) snprintf(leaf, sizeof leaf, "checkpoint-%d", steps_done);
    else snprintf(leaf, sizeof leaf, "%s", name);
    snprintf(tmp, sizeof tmp, "%s/.tmp-%s", run_dir, leaf); /* a crashed write's leftover is ours by this name */
    const dz_status st =
        checkpoint_write(run_dir, leaf, numbered, tmp, m, tok, state_json, weights_file, keep, extra, err);
    if (st != DZ_OK) remove_tree(tmp, NULL); /* a full disk must not keep what it could not finish */
    return st;
}

/* dz_checkpoint_write's steps, through tmp. */
static dz_status checkpoint_write(const char *run_dir, const char *leaf, int numbered, const char *tmp,
                                  const dz_model *m, const dz_tokenizer *tok, const char *state_json,
                                  const char *weights_file, int keep, const dz_checkpoint_extra *extra,
                                  dz_error *err) {
    char final[PATH_MAX], path[PATH_MAX + 64];
    snprintf(final, sizeof final, "%s/%s", run_dir, leaf);
    dz_status st = remove_tree(tmp, err);
    if (st != DZ_OK) {
    } else if (!weights_file) {
        st = dz_model_save_hf(m, tmp, err);
    } else { /* the weights are already a safetensors file (a parameter store): copy it */
        st = mkdir(tmp, 0755) == 0 ? DZ_OK : dz_fail(err, DZ_ERR_IO, "%s: cannot create: %s", tmp, strerror(errno));
        snprintf(path, sizeof path, "%s/config.json", tmp);
        if (st == DZ_OK) st = dz_config_write_hf_json(dz_model_config(m), path, dz_model_dtype(m), err);
        snprintf(path, sizeof path, "%s/model.safetensors", tmp);
        if (st == DZ_OK) st = dz_copy_file(weights_file, path, err);
    }
    if (st == DZ_OK && tok) st = dz_tokenizer_save_hf(tok, tmp, err);
    if (st == DZ_OK) {
        snprintf(path, sizeof path, "%s/trainer_state.json", tmp);
        st = dz_write_file_atomic(path, state_json, strlen(state_json), err);
    }
    if (st == DZ_OK && extra) st = extra->write(extra->ctx, tmp, err);
    if (st == DZ_OK) st = dz_io_fsync_dir(tmp, err);
    if (st != DZ_OK) return st;
    if (!numbered) { /* best/: swap the old one out; a crash in between leaves .old-best */
        char old[PATH_MAX + 64];
        snprintf(old, sizeof old, "%s/.old-%s", run_dir, leaf);
        st = remove_tree(old, err);
        if (st == DZ_OK && rename(final, old) != 0 && errno != ENOENT)
            st = dz_fail(err, DZ_ERR_IO, "%s: rename to %s failed: %s", final, old, strerror(errno));
        if (st == DZ_OK && rename(tmp, final) != 0)
            st = dz_fail(err, DZ_ERR_IO, "%s: rename failed: %s", final, strerror(errno));
        if (st == DZ_OK) st = dz_io_fsync_dir(run_dir, err);
        return st == DZ_OK ? remove_tree(old, err) : st;
    }
    st = list_add(run_dir, leaf, err);
    if (st == DZ_OK) st = remove_tree(final, err); /* a checkpoint of the same step from before a crash: ours */
    if (st == DZ_OK && rename(tmp, final) != 0)
        st = dz_fail(err, DZ_ERR_IO, "%s: rename failed: %s", final, strerror(errno));
    if (st == DZ_OK) st = dz_io_fsync_dir(run_dir, err);
    snprintf(path, sizeof path, "%s/LATEST", run_dir);
    char line[80];
    snprintf(line, sizeof line, "%s\n", leaf);
    if (st == DZ_OK) st = dz_write_file_atomic(path, line, strlen(line), err);
    return st == DZ_OK ? prune(run_dir, leaf, keep, err) : st;
}

dz_status dz_checkpoint_latest(const char *run_dir, char *path, size_t cap, int *steps_done, dz_error *err) {
    char latest[PATH_MAX], *text;
    snprintf(latest, sizeof latest, "%s/LATEST", run_dir);
    if (!dz_file_exists(latest)) return dz_fail(err, DZ_ERR_NOT_FOUND, "%s: no checkpoint yet", run_dir);
    dz_status st = dz_read_file(latest, &text, NULL, err);
    if (st != DZ_OK) return st;
    text[strcspn(text, "\r\n")] = '\0';
    int n = -1, end = 0;
    if (sscanf(text, "checkpoint-%d%n", &n, &end) != 1 || n < 0 || text[end] != '\0') { /* nothing after N */
        st = dz_fail(err, DZ_ERR_FORMAT, "%s: expected 'checkpoint-N', found '%.200s'", latest, text);
    } else if ((st = dz_path_check_inside(run_dir, text, "LATEST", err)) != DZ_OK) {
    } else if ((size_t)snprintf(path, cap, "%s/%s", run_dir, text) >= cap) {
        st = dz_fail(err, DZ_ERR_INVALID, "%s: path too long", run_dir);
    } else {
        char state[PATH_MAX + 64];
        snprintf(state, sizeof state, "%s/trainer_state.json", path);
        if (!dz_file_exists(state))
            st = dz_fail(err, DZ_ERR_NOT_FOUND, "%s: LATEST names %s, which is gone or has no trainer_state.json",
                         latest, path);
        *steps_done = n;
    }
    free(text);
    return st;
}

dz_status dz_run_reached_read(const char *run_dir, dz_run_reached *r, dz_error *err) {
    *r = (dz_run_reached){0};
    char path[PATH_MAX];
    int steps = 0;
    dz_status st = dz_checkpoint_latest(run_dir, path, sizeof path, &steps, err);
    if (st == DZ_ERR_NOT_FOUND) st = DZ_OK; /* none yet (steps 0), or gone: LATEST still says how far it got */
    if (st == DZ_OK) r->checkpoint = steps;
    snprintf(path, sizeof path, "%s/metrics.jsonl", run_dir);
    dz_metrics_row *rows = NULL;
    size_t n = 0;
    dz_metrics_torn torn; /* only the steps matter here: the writer (resume) says a torn tail */
    if (st == DZ_OK && dz_file_exists(path)) st = dz_metrics_read_quiet(path, &rows, &n, &torn, err);
    for (size_t i = 0; st == DZ_OK && i < n; i++)
        if (rows[i].step > r->metrics) r->metrics = rows[i].step;
    free(rows);
    return st;
}
