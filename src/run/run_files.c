/* The run folder's settings and checkpoints. Every file is written to a temporary name,
 * fsync'd and renamed; a checkpoint folder becomes visible by one rename, and LATEST names
 * the newest complete one, so a crash at any moment leaves the previous state usable. */
#define _XOPEN_SOURCE 700 /* nftw */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/io.h"
#include "core/util.h"
#include "distzo/log.h"
#include "run/run_files.h"

/* ---- run.json ---------------------------------------------------------------------- */

static void put_str(cJSON *o, const char *k, const char *v) {
    if (v) cJSON_AddStringToObject(o, k, v);
}

dz_status dz_run_config_write(const char *run_dir, const dz_train_config *c, dz_error *err) {
    cJSON *o = cJSON_CreateObject();
    put_str(o, "model", c->model);
    put_str(o, "tokenizer", c->tokenizer);
    put_str(o, "task", c->data.task);
    put_str(o, "train_data", c->data.train);
    put_str(o, "test_data", c->data.test);
    put_str(o, "template", c->data.template_);
    put_str(o, "label_words", c->data.label_words);
    put_str(o, "text_key", c->data.text_key);
    put_str(o, "label_key", c->data.label_key);
    put_str(o, "store", c->store.spec);
    cJSON_AddStringToObject(o, "master_dtype", dz_dtype_name(c->store.master_dtype));
    const struct { const char *k; double v; } nums[] = {
        {"train_examples", c->data.train_examples}, {"dev_examples", c->data.dev_examples},
        {"data_seed", (double)c->data.seed}, {"lr", c->optim.lr}, {"eps", c->optim.eps}, {"weight_decay", c->optim.wd},
        {"batch", c->optim.batch}, {"steps", c->optim.steps}, {"spsa_samples", c->optim.q}, {"warmup", c->optim.warmup},
        {"rademacher", c->optim.rademacher}, {"fuse", c->optim.fuse}, {"schedule", c->optim.lr_schedule},
        {"seed", (double)c->optim.seed}, {"eval_every", c->schedule.eval_every},
        {"checkpoint_every", c->schedule.checkpoint_every}, {"log_sync_every", c->schedule.log_sync_every},
        {"max_bad_steps", c->optim.max_bad_steps}, {"eval_batch", c->schedule.eval_batch},
        {"share_prompts", c->data.share_prompts}, {"lm_seq", c->data.lm_seq},
        {"max_resident_mb", c->store.max_resident_mb},
        {"stream_globals", c->store.stream_globals}, {"keep_checkpoints", c->schedule.keep_checkpoints},
    };
    for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++) cJSON_AddNumberToObject(o, nums[i].k, nums[i].v);
    char *text = cJSON_Print(o);
    cJSON_Delete(o);
    if (!text) return dz_fail(err, DZ_ERR_NOMEM, "run.json: out of memory");
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/run.json", run_dir);
    dz_status st = dz_write_file_atomic(path, text, strlen(text), err);
    free(text);
    return st;
}

typedef struct reader {
    const cJSON *o;
    const char *path;
    char *strings;
    size_t used;
    dz_error *err;
    dz_status st;
} reader;

static const char *get_str(reader *r, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(r->o, k);
    if (!v) return NULL;
    if (!cJSON_IsString(v)) {
        r->st = dz_fail(r->err, DZ_ERR_FORMAT, "%s: field '%s' must be a string", r->path, k);
        return NULL;
    }
    char *dst = r->strings + r->used;
    r->used += strlen(v->valuestring) + 1;
    strcpy(dst, v->valuestring);
    return dst;
}

static double get_num(reader *r, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(r->o, k);
    if (!cJSON_IsNumber(v)) {
        if (r->st == DZ_OK) r->st = dz_fail(r->err, DZ_ERR_FORMAT, "%s: field '%s' is missing or not a number", r->path, k);
        return 0.0;
    }
    return v->valuedouble;
}

dz_status dz_run_config_read(const char *run_dir, dz_train_config *c, char **strings, dz_error *err) {
    char path[PATH_MAX], *text;
    snprintf(path, sizeof path, "%s/run.json", run_dir);
    size_t len;
    *strings = NULL;
    dz_status st = dz_read_file(path, &text, &len, err);
    if (st != DZ_OK) return st;
    cJSON *o = cJSON_Parse(text);
    if (!o || !cJSON_IsObject(o)) {
        cJSON_Delete(o);
        free(text);
        return dz_fail(err, DZ_ERR_FORMAT, "%s: not a JSON object", path);
    }
    reader r = {.o = o, .path = path, .strings = malloc(len + 1), .err = err, .st = DZ_OK};
    if (!r.strings) {
        cJSON_Delete(o);
        free(text);
        return dz_fail(err, DZ_ERR_NOMEM, "%s: out of memory", path);
    }
    dz_train_config_default(c);
    c->model = get_str(&r, "model");
    c->tokenizer = get_str(&r, "tokenizer");
    c->data.task = get_str(&r, "task");
    c->data.train = get_str(&r, "train_data");
    c->data.test = get_str(&r, "test_data");
    c->data.template_ = get_str(&r, "template");
    c->data.label_words = get_str(&r, "label_words");
    c->data.text_key = get_str(&r, "text_key");
    c->data.label_key = get_str(&r, "label_key");
    c->store.spec = get_str(&r, "store");
    const char *dt = get_str(&r, "master_dtype");
    if (r.st == DZ_OK && (!dt || dz_dtype_parse(dt, &c->store.master_dtype) != 0))
        r.st = dz_fail(err, DZ_ERR_FORMAT, "%s: field 'master_dtype' is missing or unknown", path);
    c->data.train_examples = (int)get_num(&r, "train_examples");
    c->data.dev_examples = (int)get_num(&r, "dev_examples");
    c->data.seed = (uint64_t)get_num(&r, "data_seed");
    c->optim.lr = (float)get_num(&r, "lr");
    c->optim.eps = (float)get_num(&r, "eps");
    c->optim.wd = (float)get_num(&r, "weight_decay");
    c->optim.batch = (int)get_num(&r, "batch");
    c->optim.steps = (int)get_num(&r, "steps");
    c->optim.q = (int)get_num(&r, "spsa_samples");
    c->optim.warmup = (int)get_num(&r, "warmup");
    c->optim.rademacher = (int)get_num(&r, "rademacher");
    c->optim.fuse = (int)get_num(&r, "fuse");
    c->optim.lr_schedule = (dz_lr_schedule)get_num(&r, "schedule");
    c->optim.seed = (uint64_t)get_num(&r, "seed");
    c->schedule.eval_every = (int)get_num(&r, "eval_every");
    c->schedule.checkpoint_every = (int)get_num(&r, "checkpoint_every");
    c->schedule.log_sync_every = (int)get_num(&r, "log_sync_every");
    c->optim.max_bad_steps = (int)get_num(&r, "max_bad_steps");
    c->schedule.eval_batch = (int)get_num(&r, "eval_batch");
    c->data.share_prompts = (int)get_num(&r, "share_prompts");
    c->data.lm_seq = (int)get_num(&r, "lm_seq");
    c->store.max_resident_mb = (int)get_num(&r, "max_resident_mb");
    const cJSON *sg = cJSON_GetObjectItemCaseSensitive(o, "stream_globals"); /* absent in older run folders */
    c->store.stream_globals = cJSON_IsNumber(sg) ? sg->valueint : 0;
    const cJSON *kc = cJSON_GetObjectItemCaseSensitive(o, "keep_checkpoints"); /* absent in older run folders */
    c->schedule.keep_checkpoints = cJSON_IsNumber(kc) ? kc->valueint : 1;
    if (r.st == DZ_OK && !c->model) r.st = dz_fail(err, DZ_ERR_FORMAT, "%s: field 'model' is missing", path);
    cJSON_Delete(o);
    free(text);
    if (r.st != DZ_OK) {
        free(r.strings);
        return r.st;
    }
    *strings = r.strings;
    return DZ_OK;
}

/* ---- the lock ---------------------------------------------------------------------- */

dz_status dz_run_lock(const char *run_dir, int *fd, dz_error *err) {
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/.lock", run_dir);
    *fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (*fd < 0) return dz_fail(err, DZ_ERR_IO, "%s: cannot create the run folder's lock: %s", path, strerror(errno));
    if (flock(*fd, LOCK_EX | LOCK_NB) == 0) return DZ_OK;
    const int e = errno;
    close(*fd);
    *fd = -1;
    return dz_fail(err, DZ_ERR_INVALID, "%s: another distzo process is using this run folder (%s)", run_dir,
                   e == EWOULDBLOCK ? "it holds .lock" : strerror(e));
}

void dz_run_unlock(const char *run_dir, int fd, int remove_folder) {
    if (fd < 0) return;
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/.lock", run_dir);
    if (remove_folder) {
        unlink(path);
        rmdir(run_dir); /* only if empty: whatever else is there stays */
    }
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
        int steps = -1, end = 0;
        if (sscanf(line, "checkpoint-%d%n", &steps, &end) != 1 || steps < 0 || line[end] != '\0')
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

dz_status dz_checkpoint_write(const char *run_dir, const char *name, int steps_done, const dz_model *m,
                              const dz_tokenizer *tok, const char *state_json, const char *weights_file, int keep,
                              dz_error *err) {
    char tmp[PATH_MAX], final[PATH_MAX], leaf[64], path[PATH_MAX + 64];
    const int numbered = strcmp(name, "checkpoint") == 0;
    if (numbered && keep < 1) return dz_fail(err, DZ_ERR_INVALID, "--keep-checkpoints %d: keep at least 1", keep);
    if (numbered) snprintf(leaf, sizeof leaf, "checkpoint-%d", steps_done);
    else snprintf(leaf, sizeof leaf, "%s", name);
    snprintf(tmp, sizeof tmp, "%s/.tmp-%s", run_dir, leaf); /* a crashed write's leftover is ours by this name */
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
    st = remove_tree(final, err); /* a checkpoint of the same step from before a crash: ours */
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
            st = dz_fail(err, DZ_ERR_FORMAT, "%s: LATEST names %s, which has no trainer_state.json", latest, path);
        *steps_done = n;
    }
    free(text);
    return st;
}
