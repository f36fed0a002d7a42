/* The one setup path (distzo/setup.h): load, place the masters, forward, engine. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/util.h"
#include "format/safetensors.h"
#include "distzo/setup.h"
#include "parallel/comm.h"
#include "parallel/gpu_group.h"
#include "distzo/log.h"
#include "run/setup.h"
#include "store/store.h"
#include "backend/backend.h"

struct dz_zo_setup {
    dz_model *m;
    dz_model *base; /* under an adapter: the read-only base (m is the adapter) */
    dz_store *store;
    dz_backend *be; /* the forward's and the engine's (--backend) */
    dz_forward *f;
    dz_zo_engine *e;
    dz_comm *comm;
    int node_shared; /* the node's ranks share one copy of the masters */
    dz_gpu_group gpus; /* the node's GPUs for DistZO2's sliced upload (comm NULL: none) */
    int store_lock;    /* the store's mark, flock'd while this setup uses the store (-1: none) */
};

/* Node rank 0 copies its loaded weights into node-shared memory, the others point their
 * tensors at it. */
static dz_status share_masters(dz_zo_setup *s, dz_error *err) {
    void *arena = NULL;
    dz_status st = dz_comm_node_alloc(s->comm, dz_model_arena_bytes(s->m), &arena, err);
    const int leader = dz_comm_node_rank(s->comm) == 0;
    if (st == DZ_OK && leader) st = dz_model_move_to(s->m, arena, 1, err);
    if (st == DZ_OK) st = dz_comm_node_barrier(s->comm, err);
    if (st == DZ_OK && !leader) st = dz_model_move_to(s->m, arena, 0, err);
    return st;
}

/* The same file, whatever the names (links, "..", symlinks): device and inode. */
static int same_file(const struct stat *a, const char *path) {
    struct stat b;
    return stat(path, &b) == 0 && a->st_dev == b.st_dev && a->st_ino == b.st_ino;
}

/* A store's mark: a file beside it, PATH.distzo-store, written before the store itself. The
 * store's bytes are a plain model.safetensors (checkpoints and exports copy them as they
 * are), so nothing inside tells a store from a model's, an adapter's or an export's weights. */
static void store_mark_path(const char *store_path, char *out, size_t cap) {
    snprintf(out, cap, "%s.distzo-store", store_path);
}

/* A file already at the store path is replaced only when it is a store an earlier run
 * left (its mark beside it): never a file of another kind, nor weights of any kind. */
static dz_status existing_store_ok(const char *store_path, const struct stat *st, dz_error *err) {
    if (!S_ISREG(st->st_mode))
        return dz_fail(err, DZ_ERR_INVALID, "--store %s exists and is not a regular file: choose another path",
                       store_path);
    char mark[4200];
    store_mark_path(store_path, mark, sizeof mark);
    if (!dz_file_exists(mark))
        return dz_fail(err, DZ_ERR_INVALID, "--store %s exists and is not a store an earlier run left (no %s beside it; "
                       "stores written before distzo 0.3 have none either): distzo replaces no file it did not make; "
                       "remove it or choose another path", store_path, mark);
    return DZ_OK;
}

static const char k_store_mark_text[] = "distzo: the file beside this one is a disk store (--store), which a later "
                                        "run may replace\n";

/* The store at path, its mark first, locked (flock) while this setup uses the store: a
 * second process at the same path is refused. A crash between the two leaves a mark and no
 * store, which the next run replaces; a failed write leaves the mark only where a store (an
 * earlier one, still ours) lies at path. */
static dz_status create_store(dz_zo_setup *s, const char *path, const dz_model *m, dz_dtype dtype, unsigned flags,
                              dz_error *err) {
    char mark[4200];
    store_mark_path(path, mark, sizeof mark);
    const int fd = open(mark, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return dz_fail(err, DZ_ERR_IO, "%s: cannot create the store's mark: %s", mark, strerror(errno));
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        close(fd);
        return dz_fail(err, DZ_ERR_INVALID, "--store %s is in use by another distzo process (%s is locked): choose "
                       "another path", path, mark);
    }
    s->store_lock = fd;
    const size_t n = sizeof k_store_mark_text - 1;
    dz_status st = ftruncate(fd, 0) == 0 && pwrite(fd, k_store_mark_text, n, 0) == (ssize_t)n
                       ? DZ_OK
                       : dz_fail(err, DZ_ERR_IO, "%s: cannot write the store's mark: %s", mark, strerror(errno));
    if (st == DZ_OK) st = dz_store_create_as(path, m, dtype, flags, &s->store, err);
    if (st != DZ_OK && !dz_file_exists(path)) unlink(mark);
    return st;
}

dz_status dz_setup_adopt_store(const char *store_spec, dz_error *err) {
    const char *path;
    unsigned flags;
    dz_status st = dz_store_parse_spec(store_spec, &path, &flags, err);
    char mark[4200], folder[4200], beside[4300];
    if (st != DZ_OK || !path || !dz_file_exists(path)) return st;
    store_mark_path(path, mark, sizeof mark);
    dz_path_parent(path, folder, sizeof folder);
    snprintf(beside, sizeof beside, "%s/config.json", folder);
    dz_safetensors sf;
    if (dz_file_exists(mark) || dz_file_exists(beside) || dz_safetensors_open(path, &sf, NULL) != DZ_OK) return DZ_OK;
    dz_safetensors_close(&sf);
    st = dz_write_file_atomic(mark, k_store_mark_text, sizeof k_store_mark_text - 1, err);
    if (st == DZ_OK)
        dz_log(DZ_LOG_INFO, "--store %s: this run's own store, written before distzo 0.3 marked stores: marked (%s)",
               path, mark);
    return st;
}

/* Writing the store at store_path must not replace a file the run reads, nor one that is
 * not a store. */
static dz_status check_store_path(const char *store_path, const dz_weights_spec *spec, dz_error *err) {
    struct stat st;
    if (stat(store_path, &st) != 0) return DZ_OK; /* a new file */
    const char *hit = NULL;
    if (same_file(&st, spec->path)) hit = spec->path;
    DIR *d = dz_is_dir(spec->path) ? opendir(spec->path) : NULL;
    char entry[4200];
    for (struct dirent *de; d && !hit && (de = readdir(d));) {
        snprintf(entry, sizeof entry, "%s/%s", spec->path, de->d_name);
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..") && same_file(&st, entry)) hit = entry;
    }
    if (d) closedir(d);
    for (int i = 0; i < spec->n_inputs && !hit; i++)
        if (spec->inputs[i] && same_file(&st, spec->inputs[i])) hit = spec->inputs[i];
    if (!hit) return existing_store_ok(store_path, &st, err);
    return dz_fail(err, DZ_ERR_INVALID, "--store %s is the file %s, which this run reads: choose another path", store_path,
                   hit);
}

/* --store: its path (NULL: ram) and flags, refused under mpirun or where it would replace a
 * file the run reads. */
static dz_status store_path(const dz_zo_setup *s, const dz_weights_spec *spec, const char **path, unsigned *flags,
                            dz_error *err) {
    dz_status st = dz_store_parse_spec(spec->store, path, flags, err);
    if (st == DZ_OK && *path && s->comm && dz_comm_size(s->comm) > 1)
        st = dz_fail(err, DZ_ERR_UNSUPPORTED,
                     "--store %s: a disk store runs in one process; with mpirun use --store ram (the ranks of a node "
                     "share one copy of the weights)", spec->store);
    if (st == DZ_OK && *path) st = check_store_path(*path, spec, err);
    return st;
}

/* An adapter's setup: the base as loaded (mapped where it can be, never written), the
 * adapter from a PEFT folder (a checkpoint: its settings must be the run's) or new. With
 * a disk store the adapter's masters (f32, its own dtype) go there, as a full run's do;
 * the base stays as loaded (read-only: mapped from its file where the format allows). */
static dz_status adapter_weights(dz_zo_setup *s, const dz_weights_spec *spec, dz_error *err) {
    const char *path;
    unsigned flags;
    dz_status st = store_path(s, spec, &path, &flags, err);
    if (st != DZ_OK) return st;
    const char *base = spec->base ? spec->base : spec->path;
    st = dz_model_load_flags(base, spec->master_dtype, spec->base_flags, &s->base, err);
    if (st != DZ_OK) return st;
    if ((spec->base_flags & DZ_LOAD_KEEP_QUANTIZED) && dz_model_bytes_quantized(s->base) == 0) /* as eval says it */
        dz_log(DZ_LOG_WARN, "--keep-quantized: %s has no tensor stored quantized (or F16/BF16 in a GGUF); it is read "
               "as without the option", base);
    const dz_config *cfg = dz_model_config(s->base);
    const char *folder = dz_lora_is_folder(spec->path) ? spec->path : spec->lora_init;
    if (!folder && spec->lora->prefix_tokens > 0) /* MeZO's init: real tokens through the base */
        st = dz_prefix_create(s->base, spec->lora, spec->lora_seed, base, &s->m, err);
    else if (!folder) st = dz_lora_create(cfg, spec->lora, spec->lora_seed, base, &s->m, err);
    else st = dz_lora_load(folder, cfg, &s->m, err);
    const dz_lora_spec *got = st == DZ_OK ? dz_model_lora(s->m) : NULL;
    if (got && got->prefix_tokens != spec->lora->prefix_tokens) {
        if (!got->prefix_tokens)
            st = dz_fail(err, DZ_ERR_INVALID, "%s: a LoRA adapter, but the run trains a prefix (--peft prefix): give a "
                         "prefix adapter, or --peft lora", folder);
        else if (!spec->lora->prefix_tokens)
            st = dz_fail(err, DZ_ERR_INVALID, "%s: a prefix adapter, but the run trains LoRA (--peft lora): give a LoRA "
                         "adapter, or --peft prefix", folder);
        else
            st = dz_fail(err, DZ_ERR_INVALID, "%s: a prefix of %d virtual tokens, the run's --prefix-tokens is %d",
                         folder, got->prefix_tokens, spec->lora->prefix_tokens);
    }
    if (st == DZ_OK && got && (got->rank != spec->lora->rank || got->alpha != spec->lora->alpha || got->targets != spec->lora->targets)) {
        char theirs[96], ours[96];
        dz_lora_targets_string(got->targets, theirs, sizeof theirs);
        dz_lora_targets_string(spec->lora->targets, ours, sizeof ours);
        st = dz_fail(err, DZ_ERR_INVALID, "%s: the adapter's r %d, lora_alpha %g, target_modules %s differ from the run's "
                     "--lora-rank %d, --lora-alpha %g, --lora-targets %s", folder, got->rank, (double)got->alpha, theirs,
                     spec->lora->rank, (double)spec->lora->alpha, ours);
    }
    if (st == DZ_OK && path) return create_store(s, path, s->m, dz_model_dtype(s->m), flags, err);
    /* a node's ranks share the adapter's masters (each updates its slice); the base each maps read-only */
    return st == DZ_OK && s->node_shared ? share_masters(s, err) : st;
}

dz_status dz_setup_weights(const dz_weights_spec *spec, dz_zo_setup **out, dz_error *err) {
    *out = NULL;
    dz_zo_setup *s = calloc(1, sizeof *s);
    if (!s) return dz_fail(err, DZ_ERR_NOMEM, "setup: out of memory");
    s->store_lock = -1;
    s->comm = spec->comm;
    s->node_shared = s->comm && dz_comm_node_size(s->comm) > 1;
    if (spec->lora) {
        dz_status st = adapter_weights(s, spec, err);
        if (st != DZ_OK) dz_setup_free(s);
        else *out = s;
        return st;
    }
    const char *path;
    unsigned flags;
    dz_status st = store_path(s, spec, &path, &flags, err);
    /* a disk store is written tensor by tensor from the model as loaded (mapped where it can be) */
    if (st == DZ_OK) st = path ? dz_store_load_model(spec->path, spec->master_dtype, &s->m, err)
                               : dz_model_load(spec->path, spec->master_dtype, &s->m, err);
    if (st == DZ_OK && path) st = create_store(s, path, s->m, spec->master_dtype, flags, err);
    else if (st == DZ_OK) st = s->node_shared ? share_masters(s, err) : dz_model_make_owned(s->m, err);
    if (st != DZ_OK) {
        dz_setup_free(s);
        return st;
    }
    *out = s;
    return DZ_OK;
}

static dz_status sum_over_ranks(void *ctx, double *buf, size_t n, dz_error *err) {
    return dz_comm_sum_f64(ctx, buf, n, err);
}

static dz_status node_barrier(void *ctx, dz_error *err) { return dz_comm_node_barrier(ctx, err); }

/* This rank's share of a step: its forwards, the node's one pair of working copies when
 * the masters are shared, the sums over ranks. */
static dz_status share_work(dz_zo_setup *s, int signs, dz_error *err) {
    void *work = NULL;
    dz_status st = DZ_OK;
    /* a device backend's ranks each keep their own, on their device (src/pipeline/device_node.c) */
    if (s->node_shared && s->be->host_buffers)
        st = dz_comm_node_alloc(s->comm, 2 * dz_zo_block_floats(s->e) * sizeof(float), &work, err);
    const dz_zo_parallel par = {.signs = signs,
                                .shared_work = work,
                                .sum = dz_comm_size(s->comm) > 1 ? sum_over_ranks : NULL,
                                .slice = dz_comm_node_rank(s->comm),
                                .n_slices = s->node_shared ? dz_comm_node_size(s->comm) : 1,
                                .barrier = node_barrier,
                                .ctx = s->comm};
    return st == DZ_OK ? dz_zo_engine_set_parallel(s->e, &par, err) : st;
}

dz_status dz_setup_engine(dz_zo_setup *s, const dz_engine_spec *spec, dz_error *err) {
    dz_status st = dz_backend_create(spec->backend, &s->be, err);
    /* under a device cap a node's GPUs (the CUDA instance's) share each streamed layer's upload */
    if (st == DZ_OK && s->node_shared && spec->zo.max_device_bytes)
        st = dz_gpu_group_join_backend(s->comm, s->be, &s->gpus, err);
    if (st == DZ_OK)
        st = dz_forward_create_backend(dz_setup_base_model(s), s->be, spec->max_batch, spec->max_len, 0, spec->streams, &s->f, err);
    if (st == DZ_OK && s->store)
        st = dz_zo_store_residency(s->m, s->f, s->store, &spec->zo, spec->max_resident_mb, spec->stream_globals, err);
    if (st == DZ_OK) st = dz_zo_engine_create(s->m, s->f, &spec->zo, &s->e, err);
    if (st == DZ_OK && s->comm) st = share_work(s, spec->signs, err);
    if (st == DZ_OK && s->store) st = dz_zo_engine_use_store(s->e, s->store, err);
    /* after the store: evaluations read the adapter's masters where they live (a disk store's) */
    const dz_weight_source base = s->base ? dz_model_weights(s->base) : (dz_weight_source){0};
    if (st == DZ_OK && s->base) st = dz_zo_engine_set_adapter(s->e, &base, err);
    return st;
}

dz_model *dz_setup_model(const dz_zo_setup *s) { return s->m; }
dz_model *dz_setup_base_model(const dz_zo_setup *s) { return s->base ? s->base : s->m; }
dz_forward *dz_setup_forward(const dz_zo_setup *s) { return s->f; }
dz_zo_engine *dz_setup_zo_engine(const dz_zo_setup *s) { return s->e; }
dz_store *dz_setup_store(const dz_zo_setup *s) { return s->store; }

void dz_setup_free(dz_zo_setup *s) {
    if (!s) return;
    dz_zo_engine_free(s->e);
    dz_store_close(s->store);
    if (s->store_lock >= 0) close(s->store_lock); /* the store's mark unlocked */
    dz_forward_free(s->f);
    dz_error err;
    if (dz_gpu_group_leave_backend(s->be, &s->gpus, &err) != DZ_OK) dz_log(DZ_LOG_WARN, "%s", err.msg);
    dz_backend_free(s->be);
    dz_model_free(s->m);
    dz_model_free(s->base);
    free(s);
}

void dz_setup_discard_store(dz_zo_setup *s) {
    if (!s || !s->store) return;
    char mark[4200];
    store_mark_path(dz_store_path(s->store), mark, sizeof mark);
    if (unlink(dz_store_path(s->store)) != 0)
        dz_log(DZ_LOG_WARN, "%s: cannot remove the store of a failed start: %s", dz_store_path(s->store), strerror(errno));
    else unlink(mark);
}

dz_status dz_setup_adapter_from_store(const dz_model *adapter, dz_store *store, dz_model **out, dz_error *err) {
    dz_status st = dz_lora_alloc_like(adapter, out, err);
    const dz_param_table *t = dz_model_params(adapter);
    for (int i = 0; st == DZ_OK && i < t->count; i++)
        st = dz_store_read_rows(store, i, 0, t->params[i].rows, dz_model_tensor(*out, i), err);
    if (st != DZ_OK) {
        dz_model_free(*out);
        *out = NULL;
    }
    return st;
}

dz_status dz_setup_base_tokenizer(const char *model, char *out, size_t cap, dz_error *err) {
    dz_config cfg;
    dz_status st = dz_config_load(model, &cfg, err);
    if (st == DZ_OK && !dz_model_find_tokenizer(model, &cfg, out, cap))
        st = dz_fail(err, DZ_ERR_NOT_FOUND, "%s: no tokenizer found beside the model; pass --tokenizer", model);
    return st;
}
