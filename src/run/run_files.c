/* Over 500 lines: run.json (field table, read, resume) and the checkpoint folders, one format. */
/* The run folder's settings and checkpoints. Every file is written to a temporary name,
 * fsync'd and renamed; a checkpoint folder becomes visible by one rename, and LATEST names
 * the newest complete one, so a crash at any moment leaves the previous state usable. */
#define _GNU_SOURCE /* nftw, memmem */
#include <cjson/cJSON.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
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

/* ---- run.json ---------------------------------------------------------------------- */

/* Every setting run.json keeps, in one table: written, read back and compared on resume
 * from here, so the three never disagree. */
typedef enum field_kind { F_STR, F_INT, F_FLOAT, F_U64, F_DTYPE, F_SCHEDULE } field_kind;

/* What a resume may do with a setting: it defines the run (weights, data, evaluation), so
 * it must stay; it may only grow (steps); or it is housekeeping that leaves the weights
 * bitwise as they are (where the masters live, how many checkpoints are kept). */
typedef enum on_resume { RESUME_SAME, RESUME_RAISE, RESUME_FREE } on_resume;

typedef struct run_field {
    const char *key;    /* in run.json */
    const char *option; /* the train option that sets it */
    field_kind kind;
    size_t offset;      /* into dz_train_config */
    on_resume resume;
    int optional;       /* absent in older run folders: the default stays */
    const char *names;  /* an int that is a choice: its values' names for messages, "0|1|2" */
} run_field;

#define FIELD(key, option, kind, member, resume, optional) \
    {key, option, kind, offsetof(dz_train_config, member), resume, optional, NULL}
#define CHOICE(key, option, kind, member, names) \
    {key, option, kind, offsetof(dz_train_config, member), RESUME_SAME, 0, names}
static const run_field FIELDS[] = {
    FIELD("model", "--model", F_STR, model, RESUME_SAME, 0),
    FIELD("tokenizer", "--tokenizer", F_STR, tokenizer, RESUME_SAME, 1),
    FIELD("task", "--task", F_STR, data.task, RESUME_SAME, 1),
    FIELD("train_data", "--data", F_STR, data.train, RESUME_SAME, 1),
    FIELD("test_data", "--test", F_STR, data.test, RESUME_SAME, 1),
    /* data held by the caller (Python) instead of files: its rows' hash, checked on resume */
    FIELD("train_data_fingerprint", "train_data_fingerprint", F_STR, data.train_fingerprint, RESUME_SAME, 1),
    FIELD("test_data_fingerprint", "test_data_fingerprint", F_STR, data.test_fingerprint, RESUME_SAME, 1),
    FIELD("template", "--template", F_STR, data.template_, RESUME_SAME, 1),
    FIELD("label_words", "--label-words", F_STR, data.label_words, RESUME_SAME, 1),
    FIELD("text_key", "--text-key", F_STR, data.text_key, RESUME_SAME, 1),
    FIELD("label_key", "--label-key", F_STR, data.label_key, RESUME_SAME, 1),
    FIELD("store", "--store", F_STR, store.spec, RESUME_FREE, 1),
    FIELD("master_dtype", "--master-dtype", F_DTYPE, store.master_dtype, RESUME_SAME, 0),
    FIELD("train_examples", "--train-examples", F_INT, data.train_examples, RESUME_SAME, 0),
    FIELD("dev_examples", "--dev-examples", F_INT, data.dev_examples, RESUME_SAME, 0),
    FIELD("data_seed", "--data-seed", F_U64, data.seed, RESUME_SAME, 0),
    FIELD("lr", "--lr", F_FLOAT, optim.lr, RESUME_SAME, 0),
    FIELD("eps", "--eps", F_FLOAT, optim.eps, RESUME_SAME, 0),
    FIELD("weight_decay", "--weight-decay", F_FLOAT, optim.wd, RESUME_SAME, 0),
    FIELD("batch", "--batch", F_INT, optim.batch, RESUME_SAME, 0),
    FIELD("steps", "--steps", F_INT, optim.steps, RESUME_RAISE, 0),
    FIELD("spsa_samples", "--spsa-samples", F_INT, optim.q, RESUME_SAME, 0),
    FIELD("warmup", "--warmup", F_INT, optim.warmup, RESUME_SAME, 0),
    CHOICE("rademacher", "--perturbation", F_INT, optim.rademacher, "gaussian|rademacher"),
    CHOICE("fuse", "--no-fuse", F_INT, optim.fuse, "unfused|fused"),
    CHOICE("schedule", "--schedule", F_SCHEDULE, optim.lr_schedule, "constant|linear|cosine"),
    FIELD("seed", "--seed", F_U64, optim.seed, RESUME_SAME, 0),
    FIELD("eval_every", "--eval-every", F_INT, schedule.eval_every, RESUME_SAME, 0),
    FIELD("checkpoint_every", "--checkpoint-every", F_INT, schedule.checkpoint_every, RESUME_FREE, 0),
    FIELD("log_sync_every", "--log-sync-every", F_INT, schedule.log_sync_every, RESUME_FREE, 0),
    FIELD("max_bad_steps", "--max-bad-steps", F_INT, optim.max_bad_steps, RESUME_SAME, 0),
    FIELD("eval_batch", "eval_batch", F_INT, schedule.eval_batch, RESUME_SAME, 0),
    CHOICE("share_prompts", "--no-share-prompt", F_INT, data.share_prompts, "full sequences|shared prompts"),
    FIELD("lm_seq", "--seq", F_INT, data.lm_seq, RESUME_SAME, 0),
    FIELD("max_resident_mb", "--max-resident", F_INT, store.max_resident_mb, RESUME_FREE, 0),
    FIELD("stream_globals", "--stream-globals", F_INT, store.stream_globals, RESUME_FREE, 1),
    FIELD("keep_checkpoints", "--keep-checkpoints", F_INT, schedule.keep_checkpoints, RESUME_FREE, 1),
    {"estimator", "--estimator", F_INT, offsetof(dz_train_config, optim.estimator), RESUME_SAME, 1, "mezo|sparse|lozo"},
    FIELD("sparse_density", "--sparse-density", F_FLOAT, optim.sparse_density, RESUME_SAME, 1),
    FIELD("lozo_rank", "--lozo-rank", F_INT, optim.lozo_rank, RESUME_SAME, 1),
    FIELD("lozo_nu", "--lozo-nu", F_INT, optim.lozo_nu, RESUME_SAME, 1),
    FIELD("objective", "--objective", F_STR, data.objective, RESUME_SAME, 1),
    FIELD("demos", "--demos", F_INT, data.demos, RESUME_SAME, 1),
    FIELD("gen_tokens", "--gen-tokens", F_INT, data.gen_tokens, RESUME_SAME, 1),
};
#undef FIELD
#undef CHOICE
#define N_FIELDS (sizeof FIELDS / sizeof FIELDS[0])

static void *field_ptr(const run_field *f, const dz_train_config *c) { return (char *)c + f->offset; }

/* The value as a number (F_STR: unused). */
static double field_num(const run_field *f, const dz_train_config *c) {
    const void *p = field_ptr(f, c);
    switch (f->kind) {
    case F_INT: return *(const int *)p;
    case F_FLOAT: return *(const float *)p;
    case F_U64: return (double)*(const uint64_t *)p;
    case F_SCHEDULE: return *(const dz_lr_schedule *)p;
    default: return 0.0;
    }
}

/* The value as the user would write it, for messages. */
static void field_text(const run_field *f, const dz_train_config *c, char *buf, size_t cap) {
    const void *p = field_ptr(f, c);
    if (f->names) { /* the value-th name of "a|b|c" */
        const char *name = f->names;
        for (int k = (int)field_num(f, c); k > 0 && name; k--) name = strchr(name, '|') ? strchr(name, '|') + 1 : NULL;
        if (name) {
            snprintf(buf, cap, "%.*s", (int)strcspn(name, "|"), name);
            return;
        }
    }
    switch (f->kind) {
    case F_STR: snprintf(buf, cap, "%s", *(const char *const *)p ? *(const char *const *)p : "(none)"); break;
    case F_DTYPE: /* as --master-dtype takes it */
        snprintf(buf, cap, "%s", dz_dtype_name(*(const dz_dtype *)p));
        for (char *q = buf; *q; q++) *q = (char)tolower((unsigned char)*q);
        break;
    case F_FLOAT: snprintf(buf, cap, "%g", (double)*(const float *)p); break;
    case F_U64: snprintf(buf, cap, "%llu", (unsigned long long)*(const uint64_t *)p); break;
    default: snprintf(buf, cap, "%d", (int)field_num(f, c)); break;
    }
}

static int field_equal(const run_field *f, const dz_train_config *a, const dz_train_config *b) {
    const void *pa = field_ptr(f, a), *pb = field_ptr(f, b);
    switch (f->kind) {
    case F_STR: {
        const char *sa = *(const char *const *)pa, *sb = *(const char *const *)pb;
        return sa == sb || (sa && sb && !strcmp(sa, sb));
    }
    case F_DTYPE: return *(const dz_dtype *)pa == *(const dz_dtype *)pb;
    case F_FLOAT: return *(const float *)pa == *(const float *)pb;
    case F_U64: return *(const uint64_t *)pa == *(const uint64_t *)pb;
    default: return field_num(f, a) == field_num(f, b);
    }
}

static void field_copy(const run_field *f, dz_train_config *dst, const dz_train_config *src) {
    const size_t size = f->kind == F_STR ? sizeof(const char *)
                        : f->kind == F_U64 ? sizeof(uint64_t)
                        : f->kind == F_FLOAT ? sizeof(float)
                        : f->kind == F_DTYPE ? sizeof(dz_dtype)
                        : f->kind == F_SCHEDULE ? sizeof(dz_lr_schedule) : sizeof(int);
    memcpy(field_ptr(f, dst), field_ptr(f, src), size);
}

/* The index of name in a choice's "a|b|c", or -1. */
static int choice_index(const char *names, const char *name) {
    int k = 0;
    for (const char *n = names; n; n = strchr(n, '|') ? strchr(n, '|') + 1 : NULL, k++)
        if (strlen(name) == strcspn(n, "|") && !strncmp(n, name, strlen(name))) return k;
    return -1;
}

/* A u64 as its exact integer text (a double would round seeds from 2^53 on). */
static void add_u64(cJSON *o, const char *key, uint64_t v) {
    char buf[24];
    snprintf(buf, sizeof buf, "%llu", (unsigned long long)v);
    cJSON_AddRawToObject(o, key, buf);
}

/* A float as the shortest decimal that reads back as the same float (4e-05, not
 * 3.9999998989515e-05). */
static void add_float(cJSON *o, const char *key, float v) {
    char buf[32];
    dz_float_shortest(buf, sizeof buf, v);
    cJSON_AddRawToObject(o, key, buf);
}

/* One setting into o: strings, dtypes and choices by name, numbers exactly. */
static void add_field(cJSON *o, const run_field *f, const dz_train_config *c) {
    const void *p = field_ptr(f, c);
    char name[64];
    if (f->kind == F_STR) {
        if (*(const char *const *)p) cJSON_AddStringToObject(o, f->key, *(const char *const *)p);
    } else if (f->kind == F_DTYPE) {
        cJSON_AddStringToObject(o, f->key, dz_dtype_name(*(const dz_dtype *)p));
    } else if (f->names && (field_text(f, c, name, sizeof name), choice_index(f->names, name) >= 0)) {
        cJSON_AddStringToObject(o, f->key, name);
    } else if (f->kind == F_U64) {
        add_u64(o, f->key, *(const uint64_t *)p);
    } else if (f->kind == F_FLOAT) {
        add_float(o, f->key, *(const float *)p);
    } else {
        cJSON_AddNumberToObject(o, f->key, field_num(f, c));
    }
}

dz_status dz_run_config_write(const char *run_dir, const dz_train_config *c, dz_error *err) {
    cJSON *o = cJSON_CreateObject();
    for (size_t i = 0; o && i < N_FIELDS; i++) add_field(o, &FIELDS[i], c);
    char *text = o ? cJSON_Print(o) : NULL;
    cJSON_Delete(o);
    if (!text) return dz_fail(err, DZ_ERR_NOMEM, "run.json: out of memory");
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/run.json", run_dir);
    dz_status st = dz_write_file_atomic(path, text, strlen(text), err);
    free(text);
    return st;
}

/* The JSON text being read: its name in messages, the text itself (u64 values are read
 * from it exactly) and where copied strings go (room was made for the whole file). */
typedef struct json_src {
    const char *path, *text;
    size_t len;
    char *strings_end;
} json_src;

/* The exact integer written after top-level key in src's text, if it is the value v holds
 * (cJSON keeps only a double): 0, or -1 when it cannot be found. */
static int exact_u64(const json_src *src, const char *key, double v, uint64_t *out) {
    char quoted[80];
    snprintf(quoted, sizeof quoted, "\"%s\"", key);
    const size_t qn = strlen(quoted);
    for (const char *at = src->text; (at = memmem(at, (size_t)(src->text + src->len - at), quoted, qn)); at += qn) {
        const char *q = at + qn;
        while (q < src->text + src->len && isspace((unsigned char)*q)) q++;
        if (q >= src->text + src->len || *q != ':') continue;
        for (q++; q < src->text + src->len && isspace((unsigned char)*q);) q++;
        if (q >= src->text + src->len || !isdigit((unsigned char)*q)) continue;
        char digits[24], *end;
        size_t n = 0;
        while (n + 1 < sizeof digits && q + n < src->text + src->len && isdigit((unsigned char)q[n])) digits[n] = q[n], n++;
        digits[n] = '\0';
        errno = 0;
        const unsigned long long x = strtoull(digits, &end, 10);
        if (errno == 0 && *end == '\0' && (double)x == v) return *out = x, 0;
    }
    return -1;
}

/* One value v (named key in messages) into field f of c. inverted: the key is a --no-X
 * option, whose true is the setting's 0. A choice takes its value's name or index, an
 * integer setting true or false too. */
static dz_status read_value(const run_field *f, const cJSON *v, const char *key, int inverted, json_src *src,
                            dz_train_config *c, dz_error *err) {
    const char *path = src->path;
    void *p = field_ptr(f, c);
    if (inverted || (cJSON_IsBool(v) && f->kind == F_INT)) {
        if (!cJSON_IsBool(v) && !(cJSON_IsNumber(v) && (v->valuedouble == 0 || v->valuedouble == 1)))
            return dz_fail(err, DZ_ERR_FORMAT, "%s: field '%s' must be true or false", path, key);
        *(int *)p = (cJSON_IsBool(v) ? cJSON_IsTrue(v) : v->valuedouble == 1) != inverted;
        return DZ_OK;
    }
    if (f->names && cJSON_IsString(v)) {
        const int k = choice_index(f->names, v->valuestring);
        if (k < 0) return dz_fail(err, DZ_ERR_FORMAT, "%s: field '%s': '%s' is not one of %s", path, key, v->valuestring, f->names);
        if (f->kind == F_SCHEDULE) *(dz_lr_schedule *)p = (dz_lr_schedule)k;
        else *(int *)p = k;
        return DZ_OK;
    }
    if (f->kind == F_STR || f->kind == F_DTYPE) {
        if (!cJSON_IsString(v)) return dz_fail(err, DZ_ERR_FORMAT, "%s: field '%s' must be a string", path, key);
        if (f->kind == F_DTYPE) {
            if (dz_dtype_parse(v->valuestring, (dz_dtype *)p) != 0)
                return dz_fail(err, DZ_ERR_FORMAT, "%s: field '%s': unknown dtype '%s'", path, key, v->valuestring);
            return DZ_OK;
        }
        const size_t n = strlen(v->valuestring) + 1;
        memcpy(src->strings_end, v->valuestring, n);
        *(const char **)p = src->strings_end;
        src->strings_end += n;
        return DZ_OK;
    }
    if (!cJSON_IsNumber(v)) return dz_fail(err, DZ_ERR_FORMAT, "%s: field '%s' must be a number", path, key);
    const double x = v->valuedouble;
    const int integral = f->kind != F_FLOAT;
    const double lo = f->kind == F_U64 ? 0.0 : f->kind == F_SCHEDULE ? DZ_LR_CONSTANT : INT_MIN;
    const double hi = f->kind == F_U64 ? 18446744073709551615.0 : f->kind == F_SCHEDULE ? DZ_LR_COSINE : INT_MAX;
    if (!isfinite(x) || (integral && (x != floor(x) || x < lo || x > hi)))
        return dz_fail(err, DZ_ERR_FORMAT, "%s: field '%s': %g is not a valid value", path, key, x);
    switch (f->kind) {
    case F_INT: *(int *)p = (int)x; break;
    case F_FLOAT: *(float *)p = (float)x; break;
    case F_U64: /* exactly as written (a double stops at 2^53); 2^64 itself rounds down to it */
        if (exact_u64(src, key, x, (uint64_t *)p) != 0) {
            if (x >= 18446744073709551615.0)
                return dz_fail(err, DZ_ERR_FORMAT, "%s: field '%s': %.17g is outside 0..2^64-1", path, key, x);
            *(uint64_t *)p = (uint64_t)x;
        }
        break;
    case F_SCHEDULE: *(dz_lr_schedule *)p = (dz_lr_schedule)(int)x; break;
    default: break;
    }
    return DZ_OK;
}

/* One field of run.json (by its key) into c. */
static dz_status read_field(const run_field *f, const cJSON *o, json_src *src, dz_train_config *c, dz_error *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, f->key);
    if (v) return read_value(f, v, f->key, 0, src, c, err);
    if (f->optional) return DZ_OK;
    return dz_fail(err, DZ_ERR_FORMAT, "%s: field '%s' is missing", src->path, f->key);
}

/* The field a config file's key names: run.json's key, or its train option without the
 * dashes (*inverted: a --no-X option). NULL: none. */
static const run_field *field_by_key(const char *key, int *inverted) {
    *inverted = 0;
    for (size_t i = 0; i < N_FIELDS; i++)
        if (!strcmp(key, FIELDS[i].key)) return &FIELDS[i];
    for (size_t i = 0; i < N_FIELDS; i++) {
        const char *opt = FIELDS[i].option;
        if (!strncmp(opt, "--", 2) && !strcmp(key, opt + 2)) {
            *inverted = !strncmp(opt, "--no-", 5);
            return &FIELDS[i];
        }
    }
    return NULL;
}

int dz_run_config_has_key(const char *key) {
    int inverted;
    return field_by_key(key, &inverted) != NULL;
}

/* text as a JSON object in *o; an error naming the line and column where it stops being
 * JSON (a trailing comma, a missing quote), or saying that it is JSON but no object. */
static dz_status parse_object(const char *text, size_t len, const char *path, cJSON **o, dz_error *err) {
    const char *stop = NULL;
    *o = cJSON_ParseWithLengthOpts(text, len, &stop, 0);
    if (cJSON_IsObject(*o)) return DZ_OK;
    const int valid = *o != NULL; /* JSON, but an array or a value */
    cJSON_Delete(*o);
    *o = NULL;
    if (valid || !stop || stop < text || stop > text + len)
        return dz_fail(err, DZ_ERR_FORMAT, "%s: not a JSON object", path);
    char where[96];
    return dz_fail(err, DZ_ERR_FORMAT, "%s: %s", path, dz_json_error_at(text, (size_t)(stop - text), where, sizeof where));
}

dz_status dz_run_config_apply(const char *path, dz_train_config *c, const char *const *caller_keys, char **strings,
                              dz_error *err) {
    char *text;
    size_t len;
    *strings = NULL;
    dz_status st = dz_read_file(path, &text, &len, err);
    if (st != DZ_OK) return st;
    cJSON *o;
    st = parse_object(text, len, path, &o, err);
    char *buf = malloc(len + 1);
    json_src src = {.path = path, .text = text, .len = len, .strings_end = buf};
    if (st == DZ_OK && !buf) st = dz_fail(err, DZ_ERR_NOMEM, "%s: out of memory", path);
    for (const cJSON *v = o ? o->child : NULL; st == DZ_OK && v; v = v->next) {
        int inverted;
        const run_field *f = field_by_key(v->string, &inverted);
        if (f) {
            st = read_value(f, v, v->string, inverted, &src, c, err);
            continue;
        }
        int theirs = 0;
        for (const char *const *k = caller_keys; k && *k && !theirs; k++) theirs = !strcmp(*k, v->string);
        if (!theirs)
            st = dz_fail(err, DZ_ERR_FORMAT, "%s: unknown key '%s' (keys are train's option names, e.g. \"lr\", "
                         "\"steps\", or run.json's)", path, v->string);
    }
    free(text);
    cJSON_Delete(o);
    if (st != DZ_OK) {
        free(buf);
        return st;
    }
    *strings = buf;
    return DZ_OK;
}

dz_status dz_run_config_read(const char *run_dir, dz_train_config *c, char **strings, dz_error *err) {
    char path[PATH_MAX], *text;
    snprintf(path, sizeof path, "%s/run.json", run_dir);
    size_t len;
    *strings = NULL;
    dz_status st = dz_read_file(path, &text, &len, err);
    if (st != DZ_OK) return st;
    st = dz_run_config_parse(text, len, path, c, strings, err);
    free(text);
    return st;
}

dz_status dz_run_config_parse(const char *text, size_t len, const char *path, dz_train_config *c, char **strings,
                              dz_error *err) {
    dz_status st = DZ_OK;
    *strings = NULL;
    cJSON *o;
    st = parse_object(text, len, path, &o, err);
    char *buf = malloc(len + 1);
    json_src src = {.path = path, .text = text, .len = len, .strings_end = buf};
    if (st == DZ_OK && !buf) st = dz_fail(err, DZ_ERR_NOMEM, "%s: out of memory", path);
    dz_train_config_default(c);
    for (size_t i = 0; st == DZ_OK && i < N_FIELDS; i++) st = read_field(&FIELDS[i], o, &src, c, err);
    cJSON_Delete(o);
    if (st != DZ_OK) {
        free(buf);
        return st;
    }
    *strings = buf;
    return DZ_OK;
}

dz_status dz_run_config_resume(const char *run_dir, dz_train_config *run, const dz_train_config *given,
                               int *changed, dz_error *err) {
    *changed = 0;
    char a[512], b[512];
    for (size_t i = 0; i < N_FIELDS; i++) {
        const run_field *f = &FIELDS[i];
        if (field_equal(f, run, given)) continue;
        field_text(f, given, a, sizeof a);
        field_text(f, run, b, sizeof b);
        if (f->resume == RESUME_SAME)
            return dz_fail(err, DZ_ERR_INVALID,
                           "%s/run.json: %s %s differs from this run's %s: a resumed run keeps its settings (only "
                           "--steps may raise its length; start another --out for new settings)",
                           run_dir, f->option, a, b);
        if (f->resume == RESUME_RAISE && field_num(f, given) < field_num(f, run))
            return dz_fail(err, DZ_ERR_INVALID, "%s/run.json: %s %s is below this run's %s: a resumed run can only "
                           "be extended", run_dir, f->option, a, b);
        dz_log(DZ_LOG_INFO, "%s: %s %s (was %s)", run_dir, f->option, a, b);
        field_copy(f, run, given);
        *changed = 1;
    }
    return DZ_OK;
}

/* What a run continued from another's step (train --resume-from) may set anew: how the
 * steps from there on are taken. The replayed steps' updates depend on nothing else
 * (each record holds its own lr). */
static int branch_may_change(const run_field *f) {
    static const char *const keys[] = {"lr", "schedule", "warmup", "steps", "max_bad_steps", "eval_every"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        if (!strcmp(f->key, keys[i])) return 1;
    return f->resume == RESUME_FREE;
}

dz_status dz_run_config_branch(const char *old_dir, const dz_train_config *old, const dz_train_config *given,
                               dz_error *err) {
    char a[512], b[512];
    for (size_t i = 0; i < N_FIELDS; i++) {
        const run_field *f = &FIELDS[i];
        if (field_equal(f, old, given) || branch_may_change(f)) continue;
        field_text(f, given, a, sizeof a);
        field_text(f, old, b, sizeof b);
        return dz_fail(err, DZ_ERR_INVALID, "--resume-from: %s %s differs from %s/run.json's %s: the steps taken from "
                       "its seed log are replayed with its settings, so only --lr, --schedule, --warmup, --steps, "
                       "--max-bad-steps, --eval-every and housekeeping may change", f->option, a, old_dir, b);
    }
    return DZ_OK;
}

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

/* What a checkpoint's write leaves when it stops midway (a crash, a full disk): ours by
 * these names. .old-best is the previous best/ when the swap did not finish. */
static int is_temporary(const char *name) {
    int steps = -1, end = 0;
    return !strcmp(name, ".tmp-best") ||
           (sscanf(name, ".tmp-checkpoint-%d%n", &steps, &end) == 1 && steps >= 0 && name[end] == '\0');
}

dz_status dz_run_clean_temporaries(const char *run_dir, dz_error *err) {
    DIR *d = opendir(run_dir);
    if (!d) return DZ_OK; /* no folder yet: nothing left over */
    char path[PATH_MAX + 300], best[PATH_MAX + 16];
    dz_status st = DZ_OK;
    for (struct dirent *e; st == DZ_OK && (e = readdir(d));) {
        if (!is_temporary(e->d_name)) continue;
        snprintf(path, sizeof path, "%s/%s", run_dir, e->d_name);
        if ((st = remove_tree(path, err)) == DZ_OK) dz_log(DZ_LOG_INFO, "removed %s (an unfinished checkpoint)", path);
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
                                  const char *weights_file, int keep, dz_error *err);

dz_status dz_checkpoint_write(const char *run_dir, const char *name, int steps_done, const dz_model *m,
                              const dz_tokenizer *tok, const char *state_json, const char *weights_file, int keep,
                              dz_error *err) {
    char tmp[PATH_MAX], leaf[64];
    const int numbered = strcmp(name, "checkpoint") == 0;
    if (numbered && keep < 1) return dz_fail(err, DZ_ERR_INVALID, "--keep-checkpoints %d: keep at least 1", keep);
    if (numbered) snprintf(leaf, sizeof leaf, "checkpoint-%d", steps_done);
    else snprintf(leaf, sizeof leaf, "%s", name);
    snprintf(tmp, sizeof tmp, "%s/.tmp-%s", run_dir, leaf); /* a crashed write's leftover is ours by this name */
    const dz_status st = checkpoint_write(run_dir, leaf, numbered, tmp, m, tok, state_json, weights_file, keep, err);
    if (st != DZ_OK) remove_tree(tmp, NULL); /* a full disk must not keep what it could not finish */
    return st;
}

/* dz_checkpoint_write's steps, through tmp. */
static dz_status checkpoint_write(const char *run_dir, const char *leaf, int numbered, const char *tmp,
                                  const dz_model *m, const dz_tokenizer *tok, const char *state_json,
                                  const char *weights_file, int keep, dz_error *err) {
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

dz_status dz_run_reached_read(const char *run_dir, dz_run_reached *r, dz_error *err) {
    *r = (dz_run_reached){0};
    char path[PATH_MAX];
    int steps = 0;
    dz_status st = dz_checkpoint_latest(run_dir, path, sizeof path, &steps, err);
    if (st == DZ_ERR_NOT_FOUND) st = DZ_OK;
    else if (st == DZ_OK) r->checkpoint = steps;
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
