/* run.json, the run folder's settings: one table of fields (FIELDS) is what is written,
 * read back, applied from a train --config file and compared on a resume or a branch.
 * Written to a temporary name, fsync'd and renamed, so a crash leaves the previous one. */
#define _GNU_SOURCE /* memmem */
#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "core/util.h"
#include "distzo/log.h"
#include "format/json_file.h"
#include "run/metrics.h" /* dz_float_shortest */
#include "run/run_files.h"

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
    FIELD("model_table", "model_table", F_STR, model_table, RESUME_SAME, 1),
    FIELD("task", "--task", F_STR, data.task, RESUME_SAME, 1),
    FIELD("train_data", "--data", F_STR, data.train, RESUME_SAME, 1),
    FIELD("test_data", "--test", F_STR, data.test, RESUME_SAME, 1),
    /* data held by the caller (Python) instead of files: its rows' hash, checked on resume */
    FIELD("train_data_fingerprint", "train_data_fingerprint", F_STR, data.train_fingerprint, RESUME_SAME, 1),
    FIELD("test_data_fingerprint", "test_data_fingerprint", F_STR, data.test_fingerprint, RESUME_SAME, 1),
    FIELD("template", "--template", F_STR, data.template_, RESUME_SAME, 1),
    FIELD("label_words", "--label-words", F_STR, data.label_words, RESUME_SAME, 1),
    FIELD("special_tokens", "--special-tokens", F_INT, data.special_tokens, RESUME_SAME, 1),
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
    {"rng", "--rng", F_INT, offsetof(dz_train_config, optim.rng_v2), RESUME_SAME, 1, "v1|v2"},
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
    {"estimator", "--estimator", F_INT, offsetof(dz_train_config, optim.estimator), RESUME_SAME, 1, "mezo|sparse|lozo|fzoo|hizoo"},
    FIELD("sparse_density", "--sparse-density", F_FLOAT, optim.sparse_density, RESUME_SAME, 1),
    FIELD("lozo_rank", "--lozo-rank", F_INT, optim.lozo_rank, RESUME_SAME, 1),
    FIELD("lozo_nu", "--lozo-nu", F_INT, optim.lozo_nu, RESUME_SAME, 1),
    FIELD("fzoo_directions", "--fzoo-directions", F_INT, optim.fzoo_directions, RESUME_SAME, 1),
    FIELD("hizoo_smooth", "--hizoo-smooth", F_FLOAT, optim.hizoo_smooth, RESUME_SAME, 1),
    FIELD("hizoo_rank", "--hizoo-rank", F_INT, optim.hizoo_rank, RESUME_SAME, 1),
    FIELD("objective", "--objective", F_STR, data.objective, RESUME_SAME, 1),
    FIELD("demos", "--demos", F_INT, data.demos, RESUME_SAME, 1),
    FIELD("gen_tokens", "--gen-tokens", F_INT, data.gen_tokens, RESUME_SAME, 1),
    FIELD("peft", "--peft", F_STR, peft.method, RESUME_SAME, 1),
    FIELD("lora_rank", "--lora-rank", F_INT, peft.lora_rank, RESUME_SAME, 1),
    FIELD("lora_alpha", "--lora-alpha", F_FLOAT, peft.lora_alpha, RESUME_SAME, 1),
    FIELD("lora_targets", "--lora-targets", F_STR, peft.lora_targets, RESUME_SAME, 1),
    FIELD("lora_init", "--adapter", F_STR, peft.lora_init, RESUME_SAME, 1),
    FIELD("lora_init_fingerprint", "lora_init_fingerprint", F_STR, peft.lora_init_fingerprint, RESUME_SAME, 1),
    FIELD("prefix_tokens", "--prefix-tokens", F_INT, peft.prefix_tokens, RESUME_SAME, 1),
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

/* A string setting as it acts: unset (absent from run.json) is its default, so a value
 * given equal to the default is the run's ("--peft none", "--template '{text} It was'"). */
static const char *str_value(const run_field *f, const char *s) {
    if (s) return s;
    if (!strcmp(f->key, "peft")) return "none";
    if (!strcmp(f->key, "template")) return DZ_DEFAULT_TEMPLATE;
    if (!strcmp(f->key, "text_key")) return "text";
    if (!strcmp(f->key, "label_key")) return "label";
    if (!strcmp(f->key, "objective")) return "ce";
    return NULL;
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
    case F_STR: {
        const char *v = str_value(f, *(const char *const *)p);
        snprintf(buf, cap, "%s", v ? v : "(none)");
        break;
    }
    case F_DTYPE: /* as --master-dtype takes it */
        snprintf(buf, cap, "%s", dz_dtype_name(*(const dz_dtype *)p));
        for (char *q = buf; *q; q++) *q = (char)tolower((unsigned char)*q);
        break;
    case F_FLOAT: snprintf(buf, cap, "%g", (double)*(const float *)p); break;
    case F_U64: snprintf(buf, cap, "%llu", (unsigned long long)*(const uint64_t *)p); break;
    default: snprintf(buf, cap, "%d", (int)field_num(f, c)); break;
    }
}

/* A field the library computes from the run's files (model_table, the data's and the starting
 * adapter's fingerprints) that the caller left NULL: the run's stands. */
static int identity_not_given(const run_field *f, const dz_train_config *given) {
    return f->kind == F_STR && f->option[0] != '-' && !*(const char *const *)field_ptr(f, given);
}

static int field_equal(const run_field *f, const dz_train_config *a, const dz_train_config *b) {
    const void *pa = field_ptr(f, a), *pb = field_ptr(f, b);
    switch (f->kind) {
    case F_STR: {
        const char *sa = str_value(f, *(const char *const *)pa), *sb = str_value(f, *(const char *const *)pb);
        unsigned ta, tb; /* the same modules however spelled: "q,v", "v_proj,q_proj" */
        if (sa && sb && !strcmp(f->key, "lora_targets") && dz_lora_parse_targets(sa, &ta, NULL) == DZ_OK &&
            dz_lora_parse_targets(sb, &tb, NULL) == DZ_OK)
            return ta == tb;
        if (sa == sb || (sa && sb && !strcmp(sa, sb))) return 1;
        char ra[PATH_MAX], rb[PATH_MAX]; /* --adapter: one folder, however the path is written */
        return sa && sb && !strcmp(f->key, "lora_init") && realpath(sa, ra) && realpath(sb, rb) && !strcmp(ra, rb);
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

/* How many names a choice's "a|b|c" holds. */
static int choice_count(const char *names) {
    int k = 1;
    for (const char *n = names; (n = strchr(n, '|')); n++) k++;
    return k;
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

/* Settings written only where they apply, so an older kind of run's run.json is as before:
 * the LoRA settings for a LoRA run, the prefix's for a prefix run, "rng" for a v2 run (absent reads as v1),
 * "fzoo_directions" for an FZOO run, "hizoo_rank" for a HiZOO-L run (absent reads as 0). */
static int field_applies(const run_field *f, const dz_train_config *c) {
    const int lora = c->peft.method && !strcmp(c->peft.method, "lora");
    const int prefix = c->peft.method && !strcmp(c->peft.method, "prefix");
    if (!strncmp(f->key, "lora_init", 9)) return lora || prefix; /* either adapter may start from a folder */
    if (!strncmp(f->key, "lora_", 5)) return lora;
    if (!strncmp(f->key, "prefix_", 7)) return prefix;
    if (!strcmp(f->key, "rng")) return c->optim.rng_v2;
    if (!strcmp(f->key, "fzoo_directions")) return c->optim.estimator == DZ_ZO_FZOO;
    if (!strcmp(f->key, "hizoo_rank")) return c->optim.hizoo_rank != 0;
    return 1;
}

dz_status dz_run_config_write(const char *run_dir, const dz_train_config *c, dz_error *err) {
    cJSON *o = cJSON_CreateObject();
    for (size_t i = 0; o && i < N_FIELDS; i++)
        if (field_applies(&FIELDS[i], c)) add_field(o, &FIELDS[i], c);
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/run.json", run_dir);
    return dz_json_write_file(path, o, err);
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

/* Whether f is a yes/no setting, which a config may give as true or false (a count such
 * as batch or steps may not: true would be read as 1). */
static int yes_no(const run_field *f) {
    static const char *const keys[] = {"special_tokens", "stream_globals", "rademacher", "fuse", "share_prompts"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        if (!strcmp(f->key, keys[i])) return 1;
    return 0;
}

/* One value v (named key in messages) into field f of c. inverted: the key is a --no-X
 * option, whose true is the setting's 0. A choice takes its value's name or index, a
 * yes/no setting true or false too. */
static dz_status read_value(const run_field *f, const cJSON *v, const char *key, int inverted, json_src *src,
                            dz_train_config *c, dz_error *err) {
    const char *path = src->path;
    void *p = field_ptr(f, c);
    if (cJSON_IsBool(v) && !inverted && !yes_no(f))
        return dz_fail(err, DZ_ERR_FORMAT, "%s: field '%s' must be %s, not %s", path, key,
                       f->names ? "one of its names" : f->kind == F_FLOAT ? "a number" : f->kind == F_INT || f->kind == F_U64
                       ? "an integer" : "a string", cJSON_IsTrue(v) ? "true" : "false");
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
            if (dz_dtype_parse(v->valuestring, (dz_dtype *)p) != 0 ||
                (*(dz_dtype *)p != DZ_F32 && *(dz_dtype *)p != DZ_BF16)) /* the masters' dtypes */
                return dz_fail(err, DZ_ERR_FORMAT, "%s: field '%s': '%s' is not f32 or bf16", path, key, v->valuestring);
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
    /* a choice given by its index: one of its names' places, so it is written back by name */
    const double lo = f->kind == F_U64 || f->names ? 0.0 : INT_MIN;
    const double hi = f->kind == F_U64 ? 18446744073709551615.0 : f->names ? choice_count(f->names) - 1 : INT_MAX;
    if (f->names && (!isfinite(x) || x != floor(x) || x < lo || x > hi))
        return dz_fail(err, DZ_ERR_FORMAT, "%s: field '%s': %g is not one of %s (or their places 0..%g)", path, key, x,
                       f->names, hi);
    if (!isfinite(x) || (integral && (x != floor(x) || x < lo || x > hi)))
        return dz_fail(err, DZ_ERR_FORMAT, "%s: field '%s': %g is not a valid value", path, key, x);
    switch (f->kind) {
    case F_INT: *(int *)p = (int)x; break;
    case F_FLOAT: /* as the command line's floats: a value a float holds, not 0 or inf by rounding */
        if (x != 0 && !(fabs(x) >= FLT_MIN && fabs(x) <= FLT_MAX))
            return dz_fail(err, DZ_ERR_FORMAT, "%s: field '%s': %g is outside a float's normal range", path, key, x);
        *(float *)p = (float)x;
        break;
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

/* Whether key spells option's name (without its dashes), '_' standing for '-' (Python's
 * keywords: no_fuse for --no-fuse). */
static int spells_option(const char *key, const char *name) {
    for (; *key && *name; key++, name++)
        if (*key != *name && !(*key == '_' && *name == '-')) return 0;
    return !*key && !*name;
}

/* The field a config file's key names: run.json's key, or its train option without the
 * dashes, '_' for '-' or not (*inverted: a --no-X option). NULL: none. */
static const run_field *field_by_key(const char *key, int *inverted) {
    *inverted = 0;
    for (size_t i = 0; i < N_FIELDS; i++)
        if (!strcmp(key, FIELDS[i].key)) return &FIELDS[i];
    for (size_t i = 0; i < N_FIELDS; i++) {
        const char *opt = FIELDS[i].option;
        if (!strncmp(opt, "--", 2) && spells_option(key, opt + 2)) {
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
    char where[96];
    *o = cJSON_ParseWithLengthOpts(text, len, &stop, 0);
    if (cJSON_IsObject(*o)) {
        size_t at = stop && stop >= text && stop <= text + len ? (size_t)(stop - text) : len;
        while (at < len && isspace((unsigned char)text[at])) at++;
        const char *twice = dz_json_repeated_key(*o); /* which one counts would be a guess */
        if (at == len && !twice) return DZ_OK;
        dz_status st = twice ? dz_fail(err, DZ_ERR_FORMAT, "%s: key '%s' is given twice", path, twice)
                             : dz_fail(err, DZ_ERR_FORMAT, "%s: text after the JSON object (%s)", path,
                                       dz_json_error_at(text, at, where, sizeof where));
        cJSON_Delete(*o);
        *o = NULL;
        return st;
    }
    const int valid = *o != NULL; /* JSON, but an array or a value */
    cJSON_Delete(*o);
    *o = NULL;
    if (valid || !stop || stop < text || stop > text + len)
        return dz_fail(err, DZ_ERR_FORMAT, "%s: not a JSON object", path);
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
        for (const cJSON *w = o->child; f && w != v && st == DZ_OK; w = w->next) { /* two spellings of one */
            int w_inverted;
            if (field_by_key(w->string, &w_inverted) == f)
                st = dz_fail(err, DZ_ERR_FORMAT, "%s: keys '%s' and '%s' both set %s: give one", path, w->string,
                             v->string, f->option[0] == '-' ? f->option : f->key);
        }
        if (st != DZ_OK) break;
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
    for (const cJSON *v = o ? o->child : NULL; st == DZ_OK && v; v = v->next) { /* a key this build would drop */
        size_t i = 0;
        while (i < N_FIELDS && strcmp(FIELDS[i].key, v->string)) i++;
        if (i == N_FIELDS)
            st = dz_fail(err, DZ_ERR_FORMAT, "%s: unknown key '%s' (run.json holds train's settings by their run.json "
                         "names: written by another build of distzo, or edited?)", path, v->string);
    }
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
        if (field_equal(f, run, given) || identity_not_given(f, given)) continue;
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

static int option_given(const char *option, char *const *args, int n) {
    const size_t len = strlen(option);
    for (int i = 0; i < n; i++)
        if (!strncmp(args[i], option, len) && (args[i][len] == 0 || args[i][len] == '=')) return 1;
    return 0;
}

dz_status dz_run_config_check_given(const char *run_dir, const dz_train_config *run, const dz_train_config *given,
                                    char *const *args, int n, dz_error *err) {
    char a[512], b[512];
    for (size_t i = 0; i < N_FIELDS; i++) {
        const run_field *f = &FIELDS[i];
        if (f->option[0] != '-' || !option_given(f->option, args, n) || field_equal(f, run, given)) continue;
        if (f->resume == RESUME_RAISE && field_num(f, given) < field_num(f, run)) { /* as train --resume says */
            field_text(f, given, a, sizeof a);
            field_text(f, run, b, sizeof b);
            return dz_fail(err, DZ_ERR_INVALID, "%s/run.json: %s %s is below this run's %s: a resumed run can only be "
                           "extended", run_dir, f->option, a, b);
        }
        if (f->resume != RESUME_SAME) continue;
        field_text(f, given, a, sizeof a);
        field_text(f, run, b, sizeof b);
        return dz_fail(err, DZ_ERR_INVALID, "%s/run.json: %s %s differs from this run's %s: a resumed run keeps its "
                       "settings (only --steps may raise its length; start another --out for new settings)", run_dir,
                       f->option, a, b);
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
        if (field_equal(f, old, given) || branch_may_change(f) || identity_not_given(f, given)) continue;
        field_text(f, given, a, sizeof a);
        field_text(f, old, b, sizeof b);
        return dz_fail(err, DZ_ERR_INVALID, "--resume-from: %s %s differs from %s/run.json's %s: the steps taken from "
                       "its seed log are replayed with its settings, so only --lr, --schedule, --warmup, --steps, "
                       "--max-bad-steps, --eval-every and housekeeping may change", f->option, a, old_dir, b);
    }
    return DZ_OK;
}
