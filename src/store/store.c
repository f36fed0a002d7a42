/* The parameter store on disk: a safetensors file moved block by block (see store.h). */
#define _GNU_SOURCE
#include "store/store.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/io.h"
#include "core/util.h"
#include "format/safetensors.h"

/* Linux moves at most ~2 GiB per call; stay well under. */
#define IO_CHUNK ((size_t)1 << 30)

typedef enum { OP_READ, OP_WRITE } op_kind;

/* A queued call: fn(user, arg, buf) on the I/O thread. */
typedef struct request {
    dz_store_fn fn;
    void *user;
    int arg;
    void *buf;
} request;

struct dz_store {
    char *path;
    int fd;
    unsigned flags;
    dz_dtype dtype;
    int n_blocks, count;
    uint64_t *block_off;   /* n_blocks + 1: block b is [block_off[b], block_off[b+1]) */
    uint64_t *tensor_off;  /* file offset of each tensor */
    int *tensor_block;
    int64_t *tensor_rows;
    size_t *row_bytes;
    const char **names;    /* HF names, owned by names_buf */
    char *names_buf;

    pthread_t thread;
    int thread_started;
    pthread_mutex_t mu;
    pthread_cond_t cv_work, cv_done;
    request ring[DZ_STORE_QUEUE];
    int head, queued, busy, stop;
    int has_err;
    dz_error first_err;
    dz_store_stats stats;
};

/* ---- raw transfers ---- */

/* Names what an operation moves, for messages: a block, or rows of a tensor. */
typedef struct what {
    int block, id;
    int64_t row0, nrows;
} what;

static void describe(const dz_store *s, what w, char *out, size_t cap) {
    if (w.id < 0) snprintf(out, cap, "block %d", w.block);
    else snprintf(out, cap, "tensor '%s' rows [%" PRId64 ", %" PRId64 ")", s->names[w.id], w.row0, w.row0 + w.nrows);
}

/* Transfers made by callbacks on the I/O thread count as the thread's, so the caller's
 * figure is only what the caller itself waited for. */
static int on_io_thread(const dz_store *s) { return s->thread_started && pthread_equal(pthread_self(), s->thread); }

static void add_stats(dz_store *s, op_kind op, size_t len, double secs) {
    const int on_thread = on_io_thread(s);
    pthread_mutex_lock(&s->mu);
    if (op == OP_READ) {
        s->stats.bytes_read += len;
        s->stats.reads++;
    } else {
        s->stats.bytes_written += len;
        s->stats.writes++;
    }
    if (on_thread) s->stats.thread_io_s += secs;
    else s->stats.caller_io_s += secs;
    pthread_mutex_unlock(&s->mu);
}

/* Moves len bytes at file offset off, resuming after EINTR and short transfers; then,
 * with DZ_STORE_DROP_CACHE, takes the range out of the page cache (store.h says why). */
static dz_status transfer(dz_store *s, op_kind op, uint64_t off, void *buf, size_t len, what w, dz_error *err) {
    const double t0 = dz_now();
    char *p = buf;
    size_t done = 0;
    while (done < len) {
        const size_t n = len - done < IO_CHUNK ? len - done : IO_CHUNK;
        const off_t at = (off_t)(off + done);
        const ssize_t r = op == OP_READ ? dz_io_pread(s->fd, p + done, n, at) : dz_io_pwrite(s->fd, p + done, n, at);
        if (r > 0) {
            done += (size_t)r;
            continue;
        }
        char label[256];
        describe(s, w, label, sizeof label);
        if (r == 0 && op == OP_READ)
            return dz_fail(err, DZ_ERR_IO,
                           "%s: %s: the file ends at byte %" PRIu64 ", inside bytes [%" PRIu64 ", %" PRIu64
                           ") (truncated?)",
                           s->path, label, off + done, off, off + len);
        return dz_fail(err, DZ_ERR_IO, "%s: %s: %s of bytes [%" PRIu64 ", %" PRIu64 ") failed at byte %" PRIu64 ": %s",
                       s->path, label, op == OP_READ ? "read" : "write", off, off + len, off + done,
                       r < 0 ? strerror(errno) : "nothing written");
    }
    if ((s->flags & DZ_STORE_DROP_CACHE) && len > 0) {
        /* DONTNEED skips dirty pages, so a written range goes to disk first. */
        if (op == OP_WRITE &&
            sync_file_range(s->fd, (off_t)off, (off_t)len,
                            SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER) != 0) {
            char label[256];
            describe(s, w, label, sizeof label);
            return dz_fail(err, DZ_ERR_IO, "%s: %s: writeback failed: %s", s->path, label, strerror(errno));
        }
        (void)posix_fadvise(s->fd, (off_t)off, (off_t)len, POSIX_FADV_DONTNEED); /* advice only */
    }
    add_stats(s, op, len, dz_now() - t0);
    return DZ_OK;
}

static int bad_block(const dz_store *s, int block) { return block < 0 || block >= s->n_blocks; }

/* ---- the I/O thread ---- */

static void *io_thread(void *arg) {
    dz_store *s = arg;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (s->queued == 0 && !s->stop) pthread_cond_wait(&s->cv_work, &s->mu);
        if (s->queued == 0) break; /* stop, and nothing left */
        const request r = s->ring[s->head];
        s->head = (s->head + 1) % DZ_STORE_QUEUE;
        s->queued--;
        s->busy = 1;
        const int skip = s->has_err;
        pthread_mutex_unlock(&s->mu);
        dz_error e = {0};
        const double t0 = dz_now();
        const dz_status st = skip ? DZ_OK : r.fn(r.user, r.arg, r.buf, &e);
        const double busy = dz_now() - t0;
        pthread_mutex_lock(&s->mu);
        s->stats.thread_busy_s += busy;
        if (st != DZ_OK && !s->has_err) {
            s->first_err = e;
            s->has_err = 1;
        }
        s->busy = 0;
        pthread_cond_broadcast(&s->cv_done);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

static dz_status enqueue(dz_store *s, request r, dz_error *err) {
    if (!r.fn) return dz_fail(err, DZ_ERR_INVALID, "%s: a queued call needs a function", s->path);
    pthread_mutex_lock(&s->mu);
    if (s->queued == DZ_STORE_QUEUE) {
        const double t0 = dz_now();
        while (s->queued == DZ_STORE_QUEUE) pthread_cond_wait(&s->cv_done, &s->mu);
        s->stats.wait_s += dz_now() - t0;
    }
    s->ring[(s->head + s->queued) % DZ_STORE_QUEUE] = r;
    s->queued++;
    pthread_cond_signal(&s->cv_work);
    pthread_mutex_unlock(&s->mu);
    return DZ_OK;
}

dz_status dz_store_start_call(dz_store *s, dz_store_fn fn, void *user, int arg, void *buf, dz_error *err) {
    return enqueue(s, (request){.fn = fn, .user = user, .arg = arg, .buf = buf}, err);
}

dz_status dz_store_wait(dz_store *s, dz_error *err) {
    pthread_mutex_lock(&s->mu);
    const double t0 = dz_now();
    while (s->queued > 0 || s->busy) pthread_cond_wait(&s->cv_done, &s->mu);
    s->stats.wait_s += dz_now() - t0;
    dz_status st = DZ_OK;
    if (s->has_err) {
        st = s->first_err.code;
        if (err) *err = s->first_err;
        s->has_err = 0;
    }
    pthread_mutex_unlock(&s->mu);
    return st;
}

/* ---- opening ---- */

/* Checks tensor i of the table against the file and returns its file offset in *off. */
static dz_status check_tensor(const char *path, const dz_safetensors *st, const dz_param *p, dz_dtype dtype,
                              uint64_t *off, dz_error *err) {
    const dz_st_tensor *t = dz_safetensors_find(st, p->hf_name);
    if (!t) return dz_fail(err, DZ_ERR_FORMAT, "%s: tensor '%s' is missing", path, p->hf_name);
    if (t->dtype != dtype)
        return dz_fail(err, DZ_ERR_FORMAT, "%s: tensor '%s' is %s, the store holds %s", path, p->hf_name,
                       dz_dtype_name(t->dtype), dz_dtype_name(dtype));
    const int shape_ok = p->rows == 1 ? t->ndim == 1 && t->shape[0] == p->cols
                                      : t->ndim == 2 && t->shape[0] == p->rows && t->shape[1] == p->cols;
    if (!shape_ok)
        return dz_fail(err, DZ_ERR_FORMAT, "%s: tensor '%s' does not have shape [%" PRId64 ", %" PRId64 "]", path,
                       p->hf_name, p->rows, p->cols);
    *off = (uint64_t)((const char *)t->data - (const char *)st->map);
    return DZ_OK;
}

/* Offsets from the file's header; each tensor must start where the one before it in the
 * table ends, which makes every block one byte range. */
static dz_status read_layout(dz_store *s, const dz_param_table *t, dz_error *err) {
    dz_safetensors st;
    dz_status rc = dz_safetensors_open(s->path, &st, err);
    if (rc != DZ_OK) return rc;
    const size_t es = dz_dtype_size(s->dtype);
    uint64_t end = 0;
    for (int i = 0; i < t->count && rc == DZ_OK; i++) {
        const dz_param *p = &t->params[i];
        rc = check_tensor(s->path, &st, p, s->dtype, &s->tensor_off[i], err);
        if (rc != DZ_OK) break;
        if (p->block < 0 || p->block >= s->n_blocks || (i > 0 && p->block < t->params[i - 1].block))
            rc = dz_fail(err, DZ_ERR_INVALID, "%s: the parameter table is not ordered by block at '%s'", s->path,
                         p->hf_name);
        else if (i > 0 && s->tensor_off[i] != end)
            rc = dz_fail(err, DZ_ERR_FORMAT,
                         "%s: tensor '%s' starts at byte %" PRIu64 ", not right after '%s' (byte %" PRIu64
                         "): not a store file (tensors out of table order)",
                         s->path, p->hf_name, s->tensor_off[i], t->params[i - 1].hf_name, end);
        s->tensor_block[i] = p->block;
        s->tensor_rows[i] = p->rows;
        s->row_bytes[i] = (size_t)p->cols * es;
        end = s->tensor_off[i] + (uint64_t)dz_param_numel(p) * es;
    }
    if (rc == DZ_OK) {
        /* A block starts at its first tensor; a block without tensors is empty, where the next begins. */
        uint64_t next = end;
        for (int b = s->n_blocks; b >= 0; b--) {
            s->block_off[b] = next;
            for (int i = 0; b < s->n_blocks && i < t->count; i++)
                if (t->params[i].block == b) {
                    s->block_off[b] = s->tensor_off[i];
                    break;
                }
            next = s->block_off[b];
        }
    }
    dz_safetensors_close(&st);
    return rc;
}

static dz_status copy_names(dz_store *s, const dz_param_table *t, dz_error *err) {
    size_t total = 0;
    for (int i = 0; i < t->count; i++) total += strlen(t->params[i].hf_name) + 1;
    s->names_buf = malloc(total ? total : 1);
    s->names = malloc(sizeof *s->names * (size_t)(t->count ? t->count : 1));
    if (!s->names_buf || !s->names) return dz_fail(err, DZ_ERR_NOMEM, "%s: out of memory", s->path);
    char *q = s->names_buf;
    for (int i = 0; i < t->count; i++) {
        const size_t n = strlen(t->params[i].hf_name) + 1;
        memcpy(q, t->params[i].hf_name, n);
        s->names[i] = q;
        q += n;
    }
    return DZ_OK;
}

static dz_status open_store(dz_store *s, const dz_param_table *t, dz_error *err) {
    const int n = t->count ? t->count : 1;
    s->block_off = calloc((size_t)s->n_blocks + 1, sizeof *s->block_off);
    s->tensor_off = calloc((size_t)n, sizeof *s->tensor_off);
    s->tensor_block = calloc((size_t)n, sizeof *s->tensor_block);
    s->tensor_rows = calloc((size_t)n, sizeof *s->tensor_rows);
    s->row_bytes = calloc((size_t)n, sizeof *s->row_bytes);
    if (!s->block_off || !s->tensor_off || !s->tensor_block || !s->tensor_rows || !s->row_bytes)
        return dz_fail(err, DZ_ERR_NOMEM, "%s: out of memory", s->path);
    dz_status rc = copy_names(s, t, err);
    if (rc == DZ_OK) rc = read_layout(s, t, err);
    if (rc != DZ_OK) return rc;
    s->fd = open(s->path, O_RDWR | O_CLOEXEC);
    if (s->fd < 0)
        return dz_fail(err, DZ_ERR_IO, "%s: cannot open for reading and writing: %s", s->path, strerror(errno));
    if (pthread_mutex_init(&s->mu, NULL) != 0 || pthread_cond_init(&s->cv_work, NULL) != 0 ||
        pthread_cond_init(&s->cv_done, NULL) != 0)
        return dz_fail(err, DZ_ERR_NOMEM, "%s: cannot create the I/O thread's locks", s->path);
    const int e = pthread_create(&s->thread, NULL, io_thread, s);
    if (e != 0) return dz_fail(err, DZ_ERR_NOMEM, "%s: cannot start the I/O thread: %s", s->path, strerror(e));
    s->thread_started = 1;
    return DZ_OK;
}

/* dz_store_open with the block count given: a model's n_layers + 1, whose global block may
 * be empty (an adapter's table has layer tensors alone). */
static dz_status open_blocks(const char *path, const dz_param_table *t, int n_blocks, dz_dtype dtype, unsigned flags,
                             dz_store **out, dz_error *err) {
    *out = NULL;
    if (dtype != DZ_F32 && dtype != DZ_BF16 && dtype != DZ_F16)
        return dz_fail(err, DZ_ERR_UNSUPPORTED, "%s: a store holds f32, bf16 or f16, not %s", path,
                       dz_dtype_name(dtype));
    if (t->count < 1) return dz_fail(err, DZ_ERR_INVALID, "%s: empty parameter table", path);
    dz_store *s = calloc(1, sizeof *s);
    if (!s) return dz_fail(err, DZ_ERR_NOMEM, "%s: out of memory", path);
    s->fd = -1;
    s->flags = flags;
    s->dtype = dtype;
    s->count = t->count;
    s->n_blocks = n_blocks;
    s->path = strdup(path);
    dz_status rc = s->path ? open_store(s, t, err) : dz_fail(err, DZ_ERR_NOMEM, "%s: out of memory", path);
    if (rc != DZ_OK) {
        dz_store_close(s);
        return rc;
    }
    *out = s;
    return DZ_OK;
}

dz_status dz_store_open(const char *path, const dz_param_table *t, dz_dtype dtype, unsigned flags, dz_store **out,
                        dz_error *err) {
    const int n_blocks = t->count > 0 ? t->params[t->count - 1].block + 1 : 1; /* the global block is last */
    return open_blocks(path, t, n_blocks, dtype, flags, out, err);
}

dz_status dz_store_create_as(const char *path, const dz_model *m, dz_dtype dtype, unsigned flags, dz_store **out,
                             dz_error *err) {
    *out = NULL;
    const dz_param_table *t = dz_model_params(m);
    dz_st_write_tensor *ts = calloc((size_t)(t->count ? t->count : 1), sizeof *ts);
    unsigned char *release = calloc((size_t)(t->count ? t->count : 1), 1);
    dz_dtype *from = calloc((size_t)(t->count ? t->count : 1), sizeof *from);
    if (!ts || !release || !from) {
        free(ts);
        free(release);
        free(from);
        return dz_fail(err, DZ_ERR_NOMEM, "%s: out of memory", path);
    }
    for (int i = 0; i < t->count; i++) {
        const dz_param *p = &t->params[i];
        ts[i] = (dz_st_write_tensor){.name = p->hf_name, .dtype = dtype, .data = dz_model_tensor(m, i)};
        from[i] = dz_model_dtype(m);
        release[i] = (unsigned char)dz_model_tensor_mapped(m, i);
        ts[i].ndim = p->rows == 1 ? 1 : 2;
        ts[i].shape[0] = p->rows == 1 ? p->cols : p->rows;
        ts[i].shape[1] = p->cols;
    }
    dz_status rc = dz_safetensors_write_converted(path, ts, t->count, release, from, err);
    free(ts);
    free(release);
    free(from);
    if (rc != DZ_OK) return rc;
    return open_blocks(path, t, dz_model_config(m)->n_layers + 1, dtype, flags, out, err);
}

/* The dtype the checkpoint at path holds, if one for all its tensors (llama2.c files are
 * f32); DZ_F16 stands for "mixed or unknown": no in-place load is possible then. */
static dz_dtype checkpoint_dtype(const char *path) {
    if (!dz_is_dir(path)) return DZ_F32;
    dz_hf_checkpoint ck;
    dz_error err = {0};
    if (dz_hf_checkpoint_open(path, &ck, &err) != DZ_OK) return DZ_F16; /* the loader will say why */
    dz_dtype dt = ck.n_files > 0 && ck.files[0].count > 0 ? ck.files[0].tensors[0].dtype : DZ_F16;
    for (int f = 0; f < ck.n_files; f++)
        for (int i = 0; i < ck.files[f].count; i++)
            if (ck.files[f].tensors[i].dtype != dt) dt = DZ_F16;
    dz_hf_checkpoint_close(&ck);
    return dt;
}

dz_status dz_store_load_model(const char *path, dz_dtype dtype, dz_model **out, dz_error *err) {
    const dz_dtype file = checkpoint_dtype(path);
    return dz_model_load(path, file == DZ_F32 || file == DZ_BF16 ? file : dtype, out, err);
}

void dz_store_close(dz_store *s) {
    if (!s) return;
    if (s->thread_started) {
        pthread_mutex_lock(&s->mu);
        s->stop = 1;
        pthread_cond_signal(&s->cv_work);
        pthread_mutex_unlock(&s->mu);
        pthread_join(s->thread, NULL);
        pthread_mutex_destroy(&s->mu);
        pthread_cond_destroy(&s->cv_work);
        pthread_cond_destroy(&s->cv_done);
    }
    if (s->fd >= 0) close(s->fd);
    free(s->path);
    free(s->block_off);
    free(s->tensor_off);
    free(s->tensor_block);
    free(s->tensor_rows);
    free(s->row_bytes);
    free(s->names);
    free(s->names_buf);
    free(s);
}

dz_status dz_store_parse_spec(const char *spec, const char **path, unsigned *flags, dz_error *err) {
    *path = NULL;
    *flags = 0;
    if (!spec || !strcmp(spec, "ram")) return DZ_OK;
    static const struct { const char *prefix; unsigned flags; } kinds[] = {{"disk:", 0}, {"disk-nocache:", DZ_STORE_DROP_CACHE}};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        const size_t n = strlen(kinds[k].prefix);
        if (!strncmp(spec, kinds[k].prefix, n) && spec[n]) {
            *path = spec + n;
            *flags = kinds[k].flags;
            return DZ_OK;
        }
    }
    return dz_fail(err, DZ_ERR_INVALID, "--store '%s': expected ram, disk:PATH or disk-nocache:PATH", spec);
}

/* ---- queries and synchronous transfers ---- */

const char *dz_store_path(const dz_store *s) { return s->path; }
int dz_store_n_blocks(const dz_store *s) { return s->n_blocks; }
dz_dtype dz_store_dtype(const dz_store *s) { return s->dtype; }

size_t dz_store_block_bytes(const dz_store *s, int block) {
    return bad_block(s, block) ? 0 : (size_t)(s->block_off[block + 1] - s->block_off[block]);
}

uint64_t dz_store_block_offset(const dz_store *s, int block) { return bad_block(s, block) ? 0 : s->block_off[block]; }

size_t dz_store_tensor_offset_in_block(const dz_store *s, int id) {
    if (id < 0 || id >= s->count) return 0;
    return (size_t)(s->tensor_off[id] - s->block_off[s->tensor_block[id]]);
}

/* Rows [row0, row0+nrows) of tensor id, read into or written from buf. */
static dz_status rows_io(dz_store *s, op_kind op, int id, int64_t row0, int64_t nrows, void *buf, dz_error *err) {
    if (id < 0 || id >= s->count)
        return dz_fail(err, DZ_ERR_INVALID, "%s: tensor id %d is outside 0..%d", s->path, id, s->count - 1);
    if (row0 < 0 || nrows < 0 || row0 > s->tensor_rows[id] - nrows)
        return dz_fail(err, DZ_ERR_INVALID,
                       "%s: tensor '%s': rows [%" PRId64 ", %" PRId64 ") outside its %" PRId64 " rows", s->path,
                       s->names[id], row0, row0 + nrows, s->tensor_rows[id]);
    const what w = {s->tensor_block[id], id, row0, nrows};
    return transfer(s, op, s->tensor_off[id] + (uint64_t)row0 * s->row_bytes[id], buf,
                    (size_t)nrows * s->row_bytes[id], w, err);
}

/* Bytes [off, off+len) of a block, read into or written from buf. */
static dz_status range_io(dz_store *s, op_kind op, int block, uint64_t off, size_t len, void *buf, dz_error *err) {
    if (bad_block(s, block))
        return dz_fail(err, DZ_ERR_INVALID, "%s: block %d is outside 0..%d", s->path, block, s->n_blocks - 1);
    const uint64_t size = s->block_off[block + 1] - s->block_off[block];
    if (off > size || len > size - off)
        return dz_fail(err, DZ_ERR_INVALID, "%s: bytes [%" PRIu64 ", %" PRIu64 ") outside block %d (%" PRIu64 " bytes)",
                       s->path, off, off + len, block, size);
    const what w = {block, -1, 0, 0};
    return transfer(s, op, s->block_off[block] + off, buf, len, w, err);
}

dz_status dz_store_read_range(dz_store *s, int block, uint64_t off, size_t len, void *buf, dz_error *err) {
    return range_io(s, OP_READ, block, off, len, buf, err);
}

dz_status dz_store_write_range(dz_store *s, int block, uint64_t off, size_t len, const void *buf, dz_error *err) {
    return range_io(s, OP_WRITE, block, off, len, (void *)buf, err);
}

dz_status dz_store_read_rows(dz_store *s, int id, int64_t row0, int64_t nrows, void *buf, dz_error *err) {
    return rows_io(s, OP_READ, id, row0, nrows, buf, err);
}

dz_status dz_store_save_resident(dz_store *s, const dz_model *m, dz_error *err) {
    const dz_param_table *t = dz_model_params(m);
    dz_status st = DZ_OK;
    for (int i = 0; st == DZ_OK && i < t->count; i++)
        if (dz_model_tensor(m, i)) st = rows_io(s, OP_WRITE, i, 0, t->params[i].rows, (void *)dz_model_tensor(m, i), err);
    return st == DZ_OK ? dz_store_sync(s, err) : st;
}

dz_status dz_store_sync(dz_store *s, dz_error *err) {
    dz_status rc = dz_store_wait(s, err);
    if (rc != DZ_OK) return rc;
    if (dz_io_fdatasync(s->fd) != 0)
        return dz_fail(err, DZ_ERR_IO, "%s: fdatasync failed: %s", s->path, strerror(errno));
    return DZ_OK;
}

dz_store_stats dz_store_get_stats(dz_store *s) {
    pthread_mutex_lock(&s->mu);
    const dz_store_stats st = s->stats;
    pthread_mutex_unlock(&s->mu);
    return st;
}
