/* distzo export: a run's seed log replayed onto its base model (or a model as it is),
 * written in HF layout or as a GGUF file for llama.cpp. */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/util.h"
#include "distzo/log.h"
#include "distzo/progress.h"
#include "distzo/setup.h"
#include "distzo/train.h"
#include "format/gguf_write.h"
#include "model/save_gguf.h"
#include "run/peft.h"
#include "run/run_files.h"
#include "run/seed_pool.h"
#include "run/seedlog.h"
#include "run/setup.h"
#include "store/store.h"
#include "tokenizer/save_gguf.h"

/* The store holds the layers; the global block joins it, then the file is copied. */
static dz_status save_from_store(dz_store *store, const dz_model *m, const char *out_dir, dz_error *err) {
    char path[4200];
    dz_status st = dz_store_save_resident(store, m, err);
    if (st == DZ_OK && dz_mkdirs(out_dir) != 0)
        st = dz_fail(err, DZ_ERR_IO, "%s: cannot create folder: %s", out_dir, strerror(errno));
    snprintf(path, sizeof path, "%s/config.json", out_dir);
    if (st == DZ_OK) st = dz_config_write_hf_json(dz_model_config(m), path, dz_model_dtype(m), err);
    snprintf(path, sizeof path, "%s/model.safetensors", out_dir);
    if (st == DZ_OK) st = dz_copy_file(dz_store_path(store), path, err);
    return st;
}

/* The tokenizer that travels with the weights: the run's, else the one beside the model
 * (none found: NULL, the weights alone). */
static dz_tokenizer *find_tokenizer(const char *run_tokenizer, const char *model) {
    dz_tokenizer *tok = NULL;
    char base_tok[4200];
    const char *tp = run_tokenizer;
    if (!tp && dz_setup_base_tokenizer(model, base_tok, sizeof base_tok, NULL) == DZ_OK) tp = base_tok;
    if (tp && dz_tokenizer_load(tp, 0, &tok, NULL) != DZ_OK) tok = NULL;
    return tok;
}

/* The file's general.name: the model's file or folder name. */
static const char *model_name(const char *path, char *buf, size_t cap) {
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/') n--;
    size_t b = n;
    while (b > 0 && path[b - 1] != '/') b--;
    snprintf(buf, cap, "%.*s", (int)(n - b), path + b);
    char *dot = strrchr(buf, '.');
    if (dot && dot != buf && (!strcmp(dot, ".gguf") || !strcmp(dot, ".bin"))) *dot = '\0';
    return buf;
}

static dz_status write_gguf(const dz_model *m, const dz_weight_source *src, const dz_tokenizer *tok, const char *model,
                            const char *out, const char *type_name, dz_error *err) {
    const int type = dz_gguf_file_type_parse(type_name ? type_name : "f16");
    if (type < 0)
        return dz_fail(err, DZ_ERR_INVALID, "export: --type %s: expected f32, f16, bf16 or q8_0", type_name);
    const dz_config *cfg = dz_model_config(m);
    char name[256];
    dz_gguf_writer *w = NULL;
    dz_status st = dz_gguf_writer_create(out, 0, &w, err);
    if (st == DZ_OK)
        st = dz_model_gguf_declare(cfg, dz_model_params(m), (uint32_t)type, model_name(model, name, sizeof name), w, err);
    if (st == DZ_OK && tok) st = dz_tokenizer_gguf_declare(tok, cfg->vocab_size, w, err);
    if (st == DZ_OK && !tok) dz_log(DZ_LOG_WARN, "export: %s has no tokenizer: %s holds the weights alone", model, out);
    if (st == DZ_OK) st = dz_gguf_writer_begin(w, err);
    if (st == DZ_OK) st = dz_model_gguf_write(cfg, dz_model_params(m), src, w, err);
    if (st == DZ_OK) st = dz_gguf_writer_finish(w, err);
    dz_gguf_writer_free(w);
    return st;
}

dz_status dz_run_weights_alone(const dz_train_config *c, const char *weights, const char *store, dz_zo_setup **out,
                               dz_error *err) {
    dz_weights_spec ws = {.path = weights, .master_dtype = c->store.master_dtype, .store = store};
    dz_lora_spec lora;
    dz_train_peft_weights(c, &ws, &lora);
    char init_fingerprint[17];
    dz_status st = dz_train_peft_init_fingerprint(c, weights, init_fingerprint, err);
    if (st == DZ_OK) st = dz_setup_weights(&ws, out, err);
    const dz_engine_spec es = {
        .max_batch = 1, .max_len = 2, .streams = 2,
        .zo = dz_train_zo_params(&c->optim), /* replay applies each update at once: fused or not, the same bits */
        .max_resident_mb = c->store.max_resident_mb,
        .stream_globals = c->store.stream_globals,
    };
    if (st == DZ_OK) st = dz_setup_engine(*out, &es, err);
    return st;
}

/* The output never lands on what export reads: the run folder (a reader leaves it as it
 * is), the model's file, or the model's folder (its files would be replaced). */
static dz_status check_out(const char *run_dir, const char *model, const char *out, dz_error *err) {
    char model_dir[4200];
    if (dz_is_dir(model)) snprintf(model_dir, sizeof model_dir, "%s", model);
    else dz_path_parent(model, model_dir, sizeof model_dir);
    if (run_dir && dz_path_within(out, run_dir))
        return dz_fail(err, DZ_ERR_INVALID, "-o %s is inside the run folder %s: export reads the run and never "
                       "writes into it; choose another folder", out, run_dir);
    char a[4200], b[4200], c[4200];
    if (dz_path_resolve(out, a, sizeof a) == 0 && dz_path_resolve(model_dir, b, sizeof b) == 0 && !strcmp(a, b))
        return dz_fail(err, DZ_ERR_INVALID, "-o %s is the folder of the %s model %s: its files would be replaced; "
                       "choose another folder", out, run_dir ? "base" : "exported", model);
    if (dz_path_resolve(out, a, sizeof a) == 0 && dz_path_resolve(model, c, sizeof c) == 0 && !strcmp(a, c))
        return dz_fail(err, DZ_ERR_INVALID, "-o %s is the model being exported: choose another file", out);
    return DZ_OK;
}

/* A model converted as it is (no run): loaded in fp32, so any file dtype is written exactly
 * (bf16 and f16 widen losslessly; a quantized GGUF is dequantized). */
static dz_status convert_model(const dz_export_spec *spec, dz_error *err) {
    dz_model *m = NULL;
    dz_status st = dz_model_load(spec->model, DZ_F32, &m, err);
    dz_tokenizer *tok = st == DZ_OK ? find_tokenizer(NULL, spec->model) : NULL;
    if (st == DZ_OK && spec->format == DZ_EXPORT_GGUF) {
        const dz_weight_source src = dz_model_weights(m);
        st = write_gguf(m, &src, tok, spec->model, spec->out, spec->gguf_type, err);
    } else if (st == DZ_OK) {
        st = dz_model_save_hf(m, spec->out, err);
        if (st == DZ_OK && tok) st = dz_tokenizer_save_hf(tok, spec->out, err);
    }
    dz_tokenizer_free(tok);
    dz_model_free(m);
    return st;
}

/* A federated K-seed pool run (run/seed_pool.h): its records accumulated into the K
 * scalars, whose weights are then written onto the base, as every replica of the run holds them. */
static dz_status replay_pool(const dz_seedlog *log, uint32_t k, const dz_train_config *c, dz_model *m, dz_error *err) {
    const uint32_t q = (uint32_t)c->optim.q;
    if (dz_seedlog_get_header(log)->q != 2 * q)
        return dz_fail(err, DZ_ERR_FORMAT, "seed log: a seed-pool run of %u slots needs %u values a record, not %u", q,
                       2 * q, dz_seedlog_get_header(log)->q);
    dz_seed_pool pool;
    dz_status st = dz_seed_pool_init(&pool, k, q, err);
    for (size_t i = 0; st == DZ_OK && i < dz_seedlog_count(log); i++) {
        const dz_seedlog_record r = dz_seedlog_get(log, i);
        st = dz_seed_pool_add(&pool, r.lr, r.g, err);
    }
    dz_seed_pool_weights w = {0};
    if (st == DZ_OK) st = dz_seed_pool_weights_init(&w, m, c->optim.seed, c->optim.rademacher, c->optim.rng_v2, &pool,
                                                        err);
    if (st == DZ_OK) dz_seed_pool_weights_sync(&w, &pool);
    dz_seed_pool_weights_free(&w);
    dz_seed_pool_free(&pool);
    return st;
}

/* The log against run.json and the run's other files: the seed that drew its
 * perturbations (resume checks it too), and that it reaches the step LATEST and
 * metrics.jsonl say the run reached (a cut log would export an earlier model). */
static dz_status check_log(const char *run_dir, const dz_train_config *c, const dz_seedlog *log, int allow_short,
                           dz_error *err) {
    const dz_seedlog_header *h = dz_seedlog_get_header(log);
    const dz_zo_params zp = dz_train_zo_params(&c->optim);
    if (c->optim.estimator == DZ_ZO_HIZOO && h->q != (uint32_t)dz_zo_log_values(&zp))
        return dz_fail(err, DZ_ERR_FORMAT, "%s/seeds.log: field q is %u values a record, --estimator hizoo logs %d (g "
                       "and the curvature step)", run_dir, h->q, dz_zo_log_values(&zp));
    dz_seedlog_header want; /* seed, distribution, ZO_RNG version, eps: the replay takes run.json's */
    dz_train_log_header(c, NULL, &want);
    if (dz_seed_pool_log_k(h->fingerprint)) want.q *= 2; /* a seed pool's record: each draw's g and its seed */
    char log_path[4200];
    snprintf(log_path, sizeof log_path, "%s/seeds.log", run_dir);
    dz_status st = dz_seedlog_check_settings(log_path, h, &want, err);
    if (st != DZ_OK) return st;
    dz_run_reached r;
    st = dz_run_reached_read(run_dir, &r, err);
    const int64_t logged = dz_seedlog_next_step(log);
    const int64_t reached = r.checkpoint > r.metrics ? r.checkpoint : r.metrics;
    if (st != DZ_OK || logged >= reached) return st;
    char why[128];
    snprintf(why, sizeof why, "%s%" PRId64, r.checkpoint >= r.metrics ? "LATEST names checkpoint-" :
             "metrics.jsonl has a row for step ", reached);
    /* resume cannot start from a checkpoint the log does not reach; a new run from the log's end can */
    char redo[4300];
    if (r.checkpoint > logged)
        snprintf(redo, sizeof redo, "train --resume-from %s:%" PRId64 " --out NEW recomputes the lost steps", run_dir,
                 logged);
    else snprintf(redo, sizeof redo, "train --resume recomputes the lost steps");
    if (!allow_short)
        return dz_fail(err, DZ_ERR_FORMAT, "%s/seeds.log ends after step %" PRId64 " but %s: the log was cut, and "
                       "exporting it would give an earlier model (%s; --allow-short-log exports what the log holds)",
                       run_dir, logged, why, redo);
    dz_log(DZ_LOG_WARN, "%s/seeds.log ends after step %" PRId64 " but %s: exporting the model after step %" PRId64
           " (--allow-short-log)", run_dir, logged, why, logged);
    return DZ_OK;
}

/* A LoRA run's trained adapter: the PEFT folder, or (--merge) the base with it merged in,
 * as an HF folder or a GGUF file. */
static dz_status write_adapter_run(const dz_export_spec *spec, const dz_model *adapter, const char *base,
                                   const dz_tokenizer *tok, dz_error *err) {
    if (!spec->merge && spec->format == DZ_EXPORT_GGUF)
        return dz_fail(err, DZ_ERR_INVALID, "export: %s trained a LoRA adapter: it is written as a PEFT folder, or with "
                       "--merge as a whole model (HF or GGUF)", spec->run_dir);
    if (!spec->merge) return dz_model_save_hf(adapter, spec->out, err);
    dz_model *m = NULL;
    dz_status st = dz_model_load(base, DZ_F32, &m, err);
    if (st == DZ_OK) st = dz_model_make_owned(m, err);
    if (st == DZ_OK) st = dz_lora_merge(m, adapter, err);
    const dz_weight_source src = st == DZ_OK ? dz_model_weights(m) : (dz_weight_source){0};
    if (st == DZ_OK && spec->format == DZ_EXPORT_GGUF) st = write_gguf(m, &src, tok, base, spec->out, spec->gguf_type, err);
    else if (st == DZ_OK) st = dz_model_save_hf(m, spec->out, err);
    if (st == DZ_OK && tok && spec->format != DZ_EXPORT_GGUF) st = dz_tokenizer_save_hf(tok, spec->out, err);
    dz_model_free(m);
    return st;
}

/* What an export into a folder that held another model must not leave beside its own: a
 * tokenizer of another kind (a stale vocab.json + merges.txt beside a new tokenizer.bin is
 * read instead of it), and beside new full weights, an adapter's files (the folder would
 * read as a PEFT adapter) or other weight files (shards, pytorch_model.bin). Each name's
 * group: tokenizers 0..3 by kind, ADAPTER, OTHER_WEIGHTS, or -1 (never removed). */
enum { ADAPTER = 4, OTHER_WEIGHTS = 5 };
static int stale_group(const char *name) {
    static const struct { const char *name; int group; } known[] = {
        {"tokenizer.json", 0}, {"vocab.json", 1}, {"merges.txt", 1}, {"tokenizer.bin", 2}, {"tokenizer.model", 3},
        {"adapter_config.json", ADAPTER}, {"adapter_model.safetensors", ADAPTER}, {"adapter_model.bin", ADAPTER},
        {"model.safetensors.index.json", OTHER_WEIGHTS}, {"pytorch_model.bin", OTHER_WEIGHTS},
        {"pytorch_model.bin.index.json", OTHER_WEIGHTS}};
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (!strcmp(name, known[i].name)) return known[i].group;
    if (!strncmp(name, "model-", 6) && strstr(name, "-of-") && strstr(name, ".safetensors")) return OTHER_WEIGHTS;
    return -1;
}

typedef struct prior_file {
    char name[256];
    struct stat st;
} prior_file;

/* The regular files of dir whose names are a group's or model.safetensors, before the
 * export (*n of them; NULL and 0: none, or no folder). */
static prior_file *prior_files(const char *dir, size_t *n) {
    *n = 0;
    DIR *d = opendir(dir);
    prior_file *list = NULL;
    size_t cap = 0;
    char path[4400];
    for (struct dirent *e; d && (e = readdir(d));) {
        const int watched = stale_group(e->d_name) >= 0 || !strcmp(e->d_name, "model.safetensors");
        if (!watched || strlen(e->d_name) >= sizeof list->name) continue;
        if (*n == cap) {
            prior_file *grown = realloc(list, (cap = cap ? 2 * cap : 16) * sizeof *list);
            if (!grown) break; /* then fewer files are checked: none is removed that should stay */
            list = grown;
        }
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        snprintf(list[*n].name, sizeof list->name, "%s", e->d_name);
        if (lstat(path, &list[*n].st) == 0 && S_ISREG(list[*n].st.st_mode)) (*n)++;
    }
    if (d) closedir(d);
    return list;
}

/* Whether the export wrote name (now there, and new or replaced or rewritten since). */
static int written(const char *dir, const char *name, const prior_file *before, size_t n) {
    char path[4400];
    struct stat now;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (lstat(path, &now) != 0) return 0;
    for (size_t i = 0; i < n; i++)
        if (!strcmp(before[i].name, name))
            return now.st_ino != before[i].st.st_ino || now.st_mtim.tv_sec != before[i].st.st_mtim.tv_sec ||
                   now.st_mtim.tv_nsec != before[i].st.st_mtim.tv_nsec || now.st_size != before[i].st.st_size;
    return 1;
}

/* After the export: the files of another model that conflict with what it wrote (above),
 * removed and said; never one of the run's inputs (keep[]). */
static dz_status remove_stale(const char *dir, const prior_file *before, size_t n, const char *const *keep,
                              int n_keep, dz_error *err) {
    static const char *const tokenizers[] = {"tokenizer.json", "vocab.json", "tokenizer.bin", "tokenizer.model"};
    int tokenizer = -1; /* the kind the export wrote, by its group */
    for (int g = 0; g < 4; g++)
        if (written(dir, tokenizers[g], before, n)) tokenizer = g;
    const int full = written(dir, "model.safetensors", before, n);
    char path[4400], a[PATH_MAX], b[PATH_MAX];
    for (size_t i = 0; i < n; i++) {
        const int g = stale_group(before[i].name);
        const int stale = (g >= 0 && g < 4 && tokenizer >= 0 && g != tokenizer) || (full && (g == ADAPTER || g == OTHER_WEIGHTS));
        if (!stale || written(dir, before[i].name, before, n)) continue;
        snprintf(path, sizeof path, "%s/%s", dir, before[i].name);
        int input = 0;
        for (int k = 0; k < n_keep && !input; k++)
            input = keep[k] && realpath(path, a) && realpath(keep[k], b) && !strcmp(a, b);
        if (input) continue;
        if (unlink(path) != 0)
            return dz_fail(err, DZ_ERR_IO, "%s: another model's file, which a loader would read with the export: cannot "
                           "remove it (%s); remove it by hand", path, strerror(errno));
        dz_log(DZ_LOG_INFO, "%s: removed, another model's (the export wrote %s)", path,
               g == ADAPTER || g == OTHER_WEIGHTS ? "model.safetensors" : tokenizers[tokenizer]);
    }
    return DZ_OK;
}

static dz_status export_into(const dz_export_spec *spec, dz_error *err);

dz_status dz_export_model(const dz_export_spec *spec, dz_error *err) {
    if (!spec->out || !spec->out[0]) return dz_fail(err, DZ_ERR_INVALID, "export: no output path (-o)");
    /* what the writing needs, checked before a run's log is replayed (minutes on a long run) */
    if (spec->format == DZ_EXPORT_GGUF && spec->gguf_type && dz_gguf_file_type_parse(spec->gguf_type) < 0)
        return dz_fail(err, DZ_ERR_INVALID, "export: --type %s: expected f32, f16, bf16 or q8_0", spec->gguf_type);
    if (!spec->run_dir && spec->allow_short_log)
        return dz_fail(err, DZ_ERR_INVALID, "export: --allow-short-log is for replaying a run's seed log (--run)");
    size_t n = 0;
    prior_file *before = dz_is_dir(spec->out) ? prior_files(spec->out, &n) : NULL;
    dz_status st = export_into(spec, err);
    if (st == DZ_OK && n > 0) {
        dz_train_config c = {0};
        char *strings = NULL; /* the run's own files are never removed, whatever their names */
        if (!spec->run_dir || dz_run_config_read(spec->run_dir, &c, &strings, NULL) != DZ_OK) memset(&c, 0, sizeof c);
        const char *const keep[] = {spec->model, c.model, c.tokenizer, c.peft.lora_init, c.data.train, c.data.test};
        st = remove_stale(spec->out, before, n, keep, 6, err);
        free(strings);
    }
    free(before);
    return st;
}

static dz_status export_into(const dz_export_spec *spec, dz_error *err) {
    if (!spec->run_dir) {
        if (!spec->model) return dz_fail(err, DZ_ERR_INVALID, "export: needs a run folder or a model");
        if (spec->store) return dz_fail(err, DZ_ERR_INVALID, "export: a store is for replaying a run (--run)");
        dz_status st = check_out(NULL, spec->model, spec->out, err);
        return st == DZ_OK ? convert_model(spec, err) : st;
    }
    const char *run_dir = spec->run_dir, *base = spec->model;
    dz_train_config c = {0};
    char *strings = NULL, path[4200];
    dz_status st = dz_run_config_read(run_dir, &c, &strings, err);
    dz_zo_setup *s = NULL;
    dz_seedlog *log = NULL;
    if (!base && st == DZ_OK) base = c.model;
    if (st == DZ_OK) st = check_out(run_dir, base, spec->out, err);
    char out_abs[4200], init_abs[4200]; /* the adapter the run started from: a replay reads it */
    if (st == DZ_OK && c.peft.lora_init && dz_path_resolve(spec->out, out_abs, sizeof out_abs) == 0 &&
        dz_path_resolve(c.peft.lora_init, init_abs, sizeof init_abs) == 0 && !strcmp(out_abs, init_abs))
        st = dz_fail(err, DZ_ERR_INVALID, "-o %s is the adapter the run started from (run.json's lora_init): its files "
                     "would be replaced, and the run could no longer be replayed; choose another folder", spec->out);
    snprintf(path, sizeof path, "%s/seeds.log", run_dir);
    if (st == DZ_OK) st = dz_seedlog_open_read(path, NULL, &log, err);
    if (st == DZ_OK) st = check_log(run_dir, &c, log, spec->allow_short_log, err); /* before the weights load */
    if (st == DZ_OK) st = dz_run_weights_alone(&c, base, spec->store, &s, err);
    char table[17];
    if (st == DZ_OK) st = dz_train_base_check(&c, dz_setup_base_model(s), base, table, err);
    if (st == DZ_OK) st = dz_train_log_matches(&c, dz_model_config(dz_setup_base_model(s)),
                                               dz_seedlog_get_header(log)->fingerprint, path, err);
    if (st == DZ_OK && spec->merge && !dz_model_lora(dz_setup_model(s)))
        st = dz_fail(err, DZ_ERR_INVALID, "export --merge: %s trained every parameter (no adapter to merge)", run_dir);
    const uint32_t pool_k = st == DZ_OK ? dz_seed_pool_log_k(dz_seedlog_get_header(log)->fingerprint) : 0;
    if (pool_k) {
        st = replay_pool(log, pool_k, &c, dz_setup_model(s), err);
    } else {
        dz_progress prog;
        dz_progress_begin(&prog, "replaying the seed log", "steps", st == DZ_OK ? (int64_t)dz_seedlog_count(log) : 0);
        for (size_t i = 0; st == DZ_OK && i < dz_seedlog_count(log); i++) {
            const dz_seedlog_record r = dz_seedlog_get(log, i);
            if (isfinite(r.g[0])) st = dz_zo_apply(dz_setup_zo_engine(s), r.step, r.lr, r.g, err);
            dz_progress_add(1);
        }
        dz_progress_end(&prog);
    }
    /* which step the weights are: a run still training (or stopped early) has fewer than planned */
    const size_t n = st == DZ_OK ? dz_seedlog_count(log) : 0;
    const uint32_t reached = n ? dz_seedlog_get(log, n - 1).step + 1 : 0;
    if (st == DZ_OK && reached < (uint32_t)c.optim.steps)
        dz_log(DZ_LOG_WARN, "%s: the seed log reaches step %u of the run's %d: these are step %u's weights (a run still "
               "training, or stopped)", run_dir, reached, c.optim.steps, reached);
    else if (st == DZ_OK)
        dz_log(DZ_LOG_INFO, "%s: replayed %zu steps (the whole run)", run_dir, n);
    dz_store *store = s ? dz_setup_store(s) : NULL;
    dz_tokenizer *tok = st == DZ_OK ? find_tokenizer(c.tokenizer, base) : NULL;
    if (st == DZ_OK && dz_model_lora(dz_setup_model(s))) {
        dz_model *copy = NULL; /* an adapter in a disk store: written from a copy in memory */
        st = dz_zo_flush(dz_setup_zo_engine(s), err);
        if (st == DZ_OK && store) st = dz_setup_adapter_from_store(dz_setup_model(s), store, &copy, err);
        if (st == DZ_OK) st = write_adapter_run(spec, copy ? copy : dz_setup_model(s), base, tok, err);
        dz_model_free(copy);
    } else if (st == DZ_OK && spec->format == DZ_EXPORT_GGUF) {
        dz_zo_engine *e = dz_setup_zo_engine(s);
        st = dz_zo_flush(e, err);
        const dz_weight_source src = dz_zo_master_source(e);
        if (st == DZ_OK) st = write_gguf(dz_setup_model(s), &src, tok, base, spec->out, spec->gguf_type, err);
        /* a store read that failed handed the writer zeros: the file just written is wrong */
        if (st == DZ_OK && (st = dz_zo_source_status(e, err)) != DZ_OK) unlink(spec->out);
    } else {
        if (st == DZ_OK && !store) st = dz_model_save_hf(dz_setup_model(s), spec->out, err);
        if (st == DZ_OK && store) st = save_from_store(store, dz_setup_model(s), spec->out, err);
        if (st == DZ_OK && tok) st = dz_tokenizer_save_hf(tok, spec->out, err);
    }
    dz_tokenizer_free(tok);
    dz_seedlog_close(log, NULL);
    dz_setup_free(s);
    free(strings);
    return st;
}

dz_status dz_export(const char *run_dir, const char *base, const char *out_dir, const char *store_spec,
                    dz_error *err) {
    const dz_export_spec spec = {.run_dir = run_dir, .model = base, .out = out_dir, .store = store_spec};
    return dz_export_model(&spec, err);
}
