/* distzo export: a run's seed log replayed onto its base model, written in HF layout. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "distzo/setup.h"
#include "distzo/train.h"
#include "run/run_files.h"
#include "run/seedlog.h"
#include "run/setup.h"
#include "store/store.h"

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

/* The tokenizer travels with the weights: the run's, else the one beside the base model
 * (none found: the weights alone). */
static dz_status save_tokenizer(const dz_train_config *c, const char *base, const char *out_dir, dz_error *err) {
    dz_tokenizer *tok = NULL;
    char base_tok[4200];
    const char *tp = c->tokenizer;
    dz_status st = DZ_OK;
    if (!tp && dz_setup_base_tokenizer(base, base_tok, sizeof base_tok, NULL) == DZ_OK) tp = base_tok;
    if (tp && dz_tokenizer_load(tp, 0, &tok, NULL) == DZ_OK) st = dz_tokenizer_save_hf(tok, out_dir, err);
    dz_tokenizer_free(tok);
    return st;
}

/* The output never lands on what export reads: the run folder (a reader leaves it as it
 * is) or the base model's folder (its files would be replaced). */
static dz_status check_out_dir(const char *run_dir, const char *base, const char *out_dir, dz_error *err) {
    char base_dir[4200];
    snprintf(base_dir, sizeof base_dir, "%s", base);
    if (!dz_is_dir(base_dir)) {
        char *slash = strrchr(base_dir, '/');
        snprintf(slash ? slash : base_dir, sizeof base_dir - (size_t)(slash ? slash - base_dir : 0), "%s",
                 slash == base_dir ? "/" : slash ? "" : ".");
    }
    if (dz_path_within(out_dir, run_dir))
        return dz_fail(err, DZ_ERR_INVALID, "-o %s is inside the run folder %s: export reads the run and never "
                       "writes into it; choose another folder", out_dir, run_dir);
    char a[4200], b[4200];
    if (dz_path_resolve(out_dir, a, sizeof a) == 0 && dz_path_resolve(base_dir, b, sizeof b) == 0 && !strcmp(a, b))
        return dz_fail(err, DZ_ERR_INVALID, "-o %s is the folder of the base model %s: its files would be replaced; "
                       "choose another folder", out_dir, base);
    return DZ_OK;
}

dz_status dz_export(const char *run_dir, const char *base, const char *out_dir, const char *store_spec,
                    dz_error *err) {
    dz_train_config c = {0};
    char *strings = NULL, path[4200];
    dz_status st = dz_run_config_read(run_dir, &c, &strings, err);
    dz_zo_setup *s = NULL;
    dz_seedlog *log = NULL;
    if (!base && st == DZ_OK) base = c.model;
    if (st == DZ_OK) st = check_out_dir(run_dir, base, out_dir, err);
    const dz_weights_spec ws = {.path = base, .master_dtype = c.store.master_dtype, .store = store_spec};
    if (st == DZ_OK) st = dz_setup_weights(&ws, &s, err);
    const dz_engine_spec es = {
        .max_batch = 1, .max_len = 2, .streams = 2,
        .zo = {.seed = c.optim.seed, .eps = c.optim.eps, .q = c.optim.q, .rademacher = c.optim.rademacher,
               .wd = c.optim.wd, .fuse = 1},
        .max_resident_mb = c.store.max_resident_mb,
        .stream_globals = c.store.stream_globals,
    };
    if (st == DZ_OK) st = dz_setup_engine(s, &es, err);
    snprintf(path, sizeof path, "%s/seeds.log", run_dir);
    if (st == DZ_OK) st = dz_seedlog_open_read(path, NULL, &log, err);
    for (size_t i = 0; st == DZ_OK && i < dz_seedlog_count(log); i++) {
        const dz_seedlog_record r = dz_seedlog_get(log, i);
        if (isfinite(r.g[0])) st = dz_zo_apply(dz_setup_zo_engine(s), r.step, r.lr, r.g, err);
    }
    dz_store *store = s ? dz_setup_store(s) : NULL;
    if (st == DZ_OK && !store) st = dz_model_save_hf(dz_setup_model(s), out_dir, err);
    if (st == DZ_OK && store) st = save_from_store(store, dz_setup_model(s), out_dir, err);
    if (st == DZ_OK) st = save_tokenizer(&c, base, out_dir, err);
    dz_seedlog_close(log, NULL);
    dz_setup_free(s);
    free(strings);
    return st;
}
