/* The parameter store (src/store/store.c) on the tiny HF models, f32 and bf16: the file is a
 * safetensors file holding the model's bytes (checked through the independent parser),
 * block layout against offsets summed here from the parameter table, sync and queued
 * block transfers (ranges, and queued calls moving them as the engine does), row reads,
 * queued updates (against transformations computed here), byte ranges, and errors
 * (missing folder, truncated file, out-of-range requests). */
#define _GNU_SOURCE
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "expect_error.h"
#include "temp_dir.h"

#include "format/safetensors.h"
#include "store/store.h"

static dz_model *load(const char *name, dz_dtype dt) {
    char path[1024];
    snprintf(path, sizeof path, "%s/hf/%s", DZ_TEST_DATA, name);
    dz_model *m = NULL;
    dz_error err = {0};
    if (dz_model_load(path, dt, &m, &err) != DZ_OK) fail_msg("%s", err.msg);
    return m;
}

static size_t tensor_bytes(const dz_model *m, int id) {
    return (size_t)dz_param_numel(&dz_model_params(m)->params[id]) * dz_dtype_size(dz_model_dtype(m));
}

/* Block b as the model holds it: its tensors in table order, back to back. The offsets
 * are summed here from the table, not taken from the store. */
static size_t model_block(const dz_model *m, int b, unsigned char *out) {
    const dz_param_table *t = dz_model_params(m);
    size_t off = 0;
    for (int i = 0; i < t->count; i++) {
        if (t->params[i].block != b) continue;
        if (out) memcpy(out + off, dz_model_tensor(m, i), tensor_bytes(m, i));
        off += tensor_bytes(m, i);
    }
    return off;
}

static dz_store *create(const dz_model *m, const char *file, unsigned flags) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", g_dir, file);
    dz_store *s = NULL;
    dz_error err = {0};
    if (dz_store_create_as(path, m, dz_model_dtype(m), flags, &s, &err) != DZ_OK) fail_msg("%s", err.msg);
    return s;
}

static void ok(dz_status st, const dz_error *err) {
    if (st != DZ_OK) fail_msg("%s", err->msg);
}

/* Whole blocks: one byte range each. */
static dz_status read_block(dz_store *s, int b, void *buf, dz_error *err) {
    return dz_store_read_range(s, b, 0, dz_store_block_bytes(s, b), buf, err);
}

static dz_status write_block(dz_store *s, int b, const void *buf, dz_error *err) {
    return dz_store_write_range(s, b, 0, dz_store_block_bytes(s, b), buf, err);
}

/* Queued block transfers: calls on the I/O thread moving one block, as the engine queues
 * its reads and write-backs. */
static dz_status read_call(void *user, int b, void *buf, dz_error *err) { return read_block(user, b, buf, err); }
static dz_status write_call(void *user, int b, void *buf, dz_error *err) { return write_block(user, b, buf, err); }

static dz_status start_read(dz_store *s, int b, void *buf, dz_error *err) {
    return dz_store_start_call(s, read_call, s, b, buf, err);
}

static dz_status start_write(dz_store *s, int b, const void *buf, dz_error *err) {
    return dz_store_start_call(s, write_call, s, b, (void *)buf, err);
}

/* Every tensor read back through the safetensors parser equals the model's bytes. */
static void check_file_equals_model(const char *path, const dz_model *m) {
    dz_safetensors st;
    dz_error err = {0};
    ok(dz_safetensors_open(path, &st, &err), &err);
    const dz_param_table *t = dz_model_params(m);
    assert_int_equal(st.count, t->count);
    for (int i = 0; i < t->count; i++) {
        const dz_st_tensor *x = dz_safetensors_find(&st, t->params[i].hf_name);
        assert_non_null(x);
        assert_int_equal(x->dtype, dz_model_dtype(m));
        assert_int_equal(x->nbytes, tensor_bytes(m, i));
        assert_memory_equal(x->data, dz_model_tensor(m, i), tensor_bytes(m, i));
    }
    dz_safetensors_close(&st);
}

static void check_layout(const dz_store *s, const dz_model *m) {
    const dz_param_table *t = dz_model_params(m);
    const int nb = dz_model_config(m)->n_layers + 1;
    assert_int_equal(dz_store_n_blocks(s), nb);
    uint64_t expect_off = dz_store_block_offset(s, 0);
    for (int b = 0; b < nb; b++) {
        assert_int_equal(dz_store_block_offset(s, b), expect_off);
        assert_int_equal(dz_store_block_bytes(s, b), model_block(m, b, NULL));
        expect_off += model_block(m, b, NULL);
        size_t in_block = 0;
        for (int i = 0; i < t->count; i++) {
            if (t->params[i].block != b) continue;
            assert_int_equal(dz_store_tensor_offset_in_block(s, i), in_block);
            in_block += tensor_bytes(m, i);
        }
    }
}

/* Fills buf with a pattern that differs from any model's bytes. */
static void scramble(unsigned char *buf, size_t n, unsigned salt) {
    for (size_t i = 0; i < n; i++) buf[i] = (unsigned char)(buf[i] ^ (0x5a + salt + i * 7));
}

static void roundtrip(const char *name, dz_dtype dt, unsigned flags) {
    dz_model *m = load(name, dt);
    char file[128];
    snprintf(file, sizeof file, "%s_%s_%u.safetensors", name, dz_dtype_name(dt), flags);
    dz_store *s = create(m, file, flags);
    check_file_equals_model(dz_store_path(s), m);
    check_layout(s, m);

    const int nb = dz_store_n_blocks(s);
    size_t total = 0;
    for (int b = 0; b < nb; b++) total += dz_store_block_bytes(s, b);
    unsigned char *want = malloc(total), *got = malloc(total), *async = malloc(total);
    size_t at[DZ_MAX_LAYERS + 1], off = 0; /* where block b sits in the buffers */
    for (int b = 0; b < nb; off += dz_store_block_bytes(s, b), b++) {
        at[b] = off;
        model_block(m, b, want + at[b]);
    }
    dz_error err = {0};

    /* Sync reads give the model's blocks. */
    for (int b = 0; b < nb; b++) ok(read_block(s, b, got + at[b], &err), &err);
    assert_memory_equal(got, want, total);

    /* Write block 0 changed: it reads back changed, the others unchanged. */
    memcpy(got, want, total);
    scramble(got + at[0], dz_store_block_bytes(s, 0), 1);
    ok(write_block(s, 0, got + at[0], &err), &err);
    memset(async, 0, total);
    for (int b = 0; b < nb; b++) ok(read_block(s, b, async + at[b], &err), &err);
    assert_memory_equal(async, got, total);
    assert_memory_not_equal(async, want, dz_store_block_bytes(s, 0));
    ok(write_block(s, 0, want + at[0], &err), &err);

    /* Row reads equal slices of the tensor (the first tensor with more than 3 rows, and a vector). */
    const dz_param_table *t = dz_model_params(m);
    for (int i = 0; i < t->count; i++) {
        const dz_param *p = &t->params[i];
        const size_t rb = (size_t)p->cols * dz_dtype_size(dt);
        const size_t r0 = p->rows > 3 ? 1 : 0, nr = p->rows > 3 ? 2 : 1;
        unsigned char *rows = malloc(rb * nr);
        ok(dz_store_read_rows(s, i, (int64_t)r0, (int64_t)nr, rows, &err), &err);
        assert_memory_equal(rows, (const unsigned char *)dz_model_tensor(m, i) + r0 * rb, rb * nr);
        free(rows);
    }
    assert_int_equal(dz_store_read_rows(s, 0, t->params[0].rows, 1, got, &err), DZ_ERR_INVALID);
    assert_int_equal(dz_store_read_rows(s, 0, -1, 1, got, &err), DZ_ERR_INVALID);

    /* Queued writes of every block (changed), then queued reads: the same bytes as sync reads.
     * More requests than the queue holds, so dz_store_start_call must wait for room. */
    memcpy(got, want, total);
    for (int b = 0; b < nb; b++) scramble(got + at[b], dz_store_block_bytes(s, b), (unsigned)b + 2);
    const dz_store_stats before = dz_store_get_stats(s);
    const int rounds = DZ_STORE_QUEUE / nb + 2;
    for (int r = 0; r < rounds; r++)
        for (int b = 0; b < nb; b++) ok(start_write(s, b, got + at[b], &err), &err);
    ok(dz_store_wait(s, &err), &err);
    memset(async, 0, total);
    for (int r = 0; r < rounds; r++)
        for (int b = 0; b < nb; b++) ok(start_read(s, b, async + at[b], &err), &err);
    ok(dz_store_wait(s, &err), &err);
    assert_memory_equal(async, got, total);
    unsigned char *sync = malloc(total);
    for (int b = 0; b < nb; b++) ok(read_block(s, b, sync + at[b], &err), &err);
    assert_memory_equal(sync, async, total);
    const dz_store_stats after = dz_store_get_stats(s);
    assert_int_equal(after.bytes_written - before.bytes_written, (uint64_t)rounds * total);
    assert_int_equal(after.bytes_read - before.bytes_read, (uint64_t)(rounds + 1) * total);
    assert_int_equal(after.writes - before.writes, (uint64_t)rounds * nb);
    assert_true(after.thread_io_s > 0.0 && after.wait_s >= 0.0);
    ok(dz_store_sync(s, &err), &err);

    /* Persisted: the file, parsed independently, holds the changed blocks. */
    dz_safetensors st;
    ok(dz_safetensors_open(dz_store_path(s), &st, &err), &err);
    for (int i = 0; i < t->count; i++) {
        const dz_st_tensor *x = dz_safetensors_find(&st, t->params[i].hf_name);
        assert_memory_equal(x->data, got + at[t->params[i].block] + dz_store_tensor_offset_in_block(s, i),
                            tensor_bytes(m, i));
    }
    dz_safetensors_close(&st);

    /* Re-opens as a store. */
    dz_store *again = NULL;
    ok(dz_store_open(dz_store_path(s), t, dt, 0, &again, &err), &err);
    ok(read_block(again, nb - 1, sync, &err), &err);
    assert_memory_equal(sync, got + at[nb - 1], dz_store_block_bytes(s, nb - 1));
    dz_store_close(again);

    free(sync);
    free(want);
    free(got);
    free(async);
    dz_store_close(s);
    dz_model_free(m);
}

static void test_opt_f32(void **state) { (void)state, roundtrip("opt_preln", DZ_F32, 0); }
static void test_opt_bf16(void **state) { (void)state, roundtrip("opt_preln", DZ_BF16, 0); }
static void test_llama_f32(void **state) { (void)state, roundtrip("llama_gqa_untied", DZ_F32, 0); }
static void test_llama_bf16_drop_cache(void **state) {
    (void)state, roundtrip("llama_gqa_untied", DZ_BF16, DZ_STORE_DROP_CACHE);
}

static void test_missing_folder(void **state) {
    (void)state;
    dz_model *m = load("opt_preln", DZ_F32);
    char path[512];
    snprintf(path, sizeof path, "%s/no/such/folder/store.safetensors", g_dir);
    dz_store *s = (dz_store *)1;
    dz_error err = {0};
    expect_error_naming("create_as", dz_store_create_as(path, m, DZ_F32, 0, &s, &err), &err, DZ_ERR_IO, path, NULL);
    assert_null(s);
    dz_model_free(m);
}

/* A file cut short: blocks before the cut still read; the last block fails, sync and
 * queued, with the file and block named; the error is reported once. */
static void test_truncated(void **state) {
    (void)state;
    dz_model *m = load("llama_gqa_untied", DZ_F32);
    dz_store *s = create(m, "truncated.safetensors", 0);
    const int last = dz_store_n_blocks(s) - 1;
    const uint64_t cut = dz_store_block_offset(s, last) + dz_store_block_bytes(s, last) / 2;
    assert_int_equal(truncate(dz_store_path(s), (off_t)cut), 0);
    unsigned char *buf = malloc(dz_store_block_bytes(s, last));
    dz_error err = {0};
    ok(read_block(s, 0, buf, &err), &err);
    assert_int_equal(read_block(s, last, buf, &err), DZ_ERR_IO);
    char want[64];
    snprintf(want, sizeof want, "block %d", last);
    assert_non_null(strstr(err.msg, dz_store_path(s)));
    assert_non_null(strstr(err.msg, want));
    assert_non_null(strstr(err.msg, "truncated"));

    memset(&err, 0, sizeof err);
    ok(start_read(s, last, buf, &err), &err);
    ok(start_read(s, 0, buf, &err), &err); /* skipped after the failure */
    assert_int_equal(dz_store_wait(s, &err), DZ_ERR_IO);
    assert_non_null(strstr(err.msg, want));
    ok(dz_store_wait(s, &err), &err); /* cleared */
    assert_int_equal(dz_store_read_range(s, last + 1, 0, 1, buf, &err), DZ_ERR_INVALID);

    /* The truncated file no longer opens as a store. */
    dz_store *again = (dz_store *)1;
    assert_int_equal(dz_store_open(dz_store_path(s), dz_model_params(m), DZ_F32, 0, &again, &err), DZ_ERR_FORMAT);
    assert_null(again);
    free(buf);
    dz_store_close(s);
    dz_model_free(m);
}

/* A safetensors file in another order (a HF checkpoint) is refused, naming the tensor. */
static void test_wrong_order(void **state) {
    (void)state;
    dz_model *m = load("opt_preln", DZ_F32);
    char path[512];
    snprintf(path, sizeof path, "%s/hf/opt_preln/model.safetensors", DZ_TEST_DATA);
    dz_store *s = (dz_store *)1;
    dz_error err = {0};
    expect_error_naming(path, dz_store_open(path, dz_model_params(m), DZ_F32, 0, &s, &err), &err, DZ_ERR_FORMAT,
                        "order", NULL);
    assert_null(s);
    dz_model_free(m);
}

/* ---- queued updates and calls, ranges ---- */

/* What the test callbacks saw: the argument, the buffer, the thread, and the order. */
typedef struct seen {
    int calls, arg[4], order[4];
    const void *buf[4];
    pthread_t thread[4];
    int next;                 /* a shared counter over every callback */
    unsigned char *copy[4];   /* the block read by a call (order test) */
    dz_store *s;
    dz_status fail;           /* returned by xor_fn (DZ_OK: succeed) */
} seen;

static void record(seen *w, int arg, const void *buf) {
    const int k = w->calls++;
    w->arg[k] = arg, w->buf[k] = buf, w->thread[k] = pthread_self(), w->order[k] = w->next++;
}

/* A transformation independent of the engine: byte i ^= (i * 13 + 7). */
static void xor_bytes(unsigned char *p, size_t n) {
    for (size_t i = 0; i < n; i++) p[i] = (unsigned char)(p[i] ^ (i * 13 + 7));
}

static dz_status xor_fn(void *user, int block, void *buf, dz_error *err) {
    seen *w = user;
    record(w, block, buf);
    if (w->fail != DZ_OK) return dz_fail(err, w->fail, "xor_fn: told to fail on block %d", block);
    xor_bytes(buf, dz_store_block_bytes(w->s, block));
    return DZ_OK;
}

/* A deferred update as the engine queues it: one call that reads the block into buf,
 * transforms it (xor_fn) and writes it back, so the block reaches the caller (after
 * dz_store_wait) already modified and on its way to disk. */
static dz_status update_fn(void *user, int block, void *buf, dz_error *err) {
    seen *w = user;
    dz_status st = read_block(w->s, block, buf, err);
    if (st == DZ_OK) st = xor_fn(user, block, buf, err);
    return st == DZ_OK ? write_block(w->s, block, buf, err) : st;
}

static dz_status start_update(dz_store *s, int block, void *buf, seen *w, dz_error *err) {
    return dz_store_start_call(s, update_fn, w, block, buf, err);
}

/* A call that reads block 0 synchronously on the I/O thread into its own copy. */
static dz_status read0_fn(void *user, int arg, void *buf, dz_error *err) {
    seen *w = user;
    record(w, arg, buf);
    return read_block(w->s, 0, w->copy[w->calls - 1], err);
}

/* A queued update: the block is read, transformed by the callback on the I/O thread, written
 * back; the buffer and the store both hold the transformed bytes, other blocks are
 * untouched; a failing callback writes nothing back, and its error comes from wait. */
static void test_start_update(void **state) {
    (void)state;
    dz_model *m = load("opt_preln", DZ_F32);
    dz_store *s = create(m, "update.safetensors", 0);
    const int b = 1;
    const size_t n = dz_store_block_bytes(s, b);
    unsigned char *want = malloc(n), *buf = malloc(n), *got = malloc(n), *other = malloc(dz_store_block_bytes(s, 0));
    model_block(m, b, want);
    xor_bytes(want, n); /* expected: the model's block, transformed here */
    memset(buf, 0, n);
    seen w = {.s = s};
    dz_error err = {0};
    ok(start_update(s, b, buf, &w, &err), &err);
    ok(dz_store_wait(s, &err), &err);
    assert_int_equal(w.calls, 1);
    assert_int_equal(w.arg[0], b);
    assert_ptr_equal(w.buf[0], buf);
    assert_false(pthread_equal(w.thread[0], pthread_self())); /* ran on the I/O thread */
    assert_memory_equal(buf, want, n);
    ok(read_block(s, b, got, &err), &err);
    assert_memory_equal(got, want, n);
    model_block(m, 0, other);
    ok(read_block(s, 0, got, &err), &err);
    assert_memory_equal(got, other, dz_store_block_bytes(s, 0));
    const dz_store_stats st = dz_store_get_stats(s);
    assert_true(st.thread_busy_s >= st.thread_io_s && st.thread_io_s > 0.0);

    /* A failing callback: nothing written back, the error once, later requests skipped. */
    w.fail = DZ_ERR_INVALID;
    ok(start_update(s, b, buf, &w, &err), &err);
    ok(start_update(s, 0, other, &w, &err), &err); /* skipped */
    assert_int_equal(dz_store_wait(s, &err), DZ_ERR_INVALID);
    assert_non_null(strstr(err.msg, "told to fail on block 1"));
    assert_int_equal(w.calls, 2);
    ok(read_block(s, b, got, &err), &err);
    assert_memory_equal(got, want, n); /* still the first update's bytes */
    ok(dz_store_wait(s, &err), &err);

    /* Invalid requests are refused at once. */
    assert_int_equal(dz_store_start_call(s, NULL, &w, 0, NULL, &err), DZ_ERR_INVALID);
    free(want), free(buf), free(got), free(other);
    dz_store_close(s);
    dz_model_free(m);
}

/* Queued calls run in queue order, transfers included: write X, call, write Y, call, then
 * an update: the first call sees X, the second Y, and the callbacks run in that order. */
static void test_start_call_order(void **state) {
    (void)state;
    dz_model *m = load("llama_gqa_untied", DZ_BF16);
    dz_store *s = create(m, "calls.safetensors", 0);
    const size_t n = dz_store_block_bytes(s, 0);
    unsigned char *x = malloc(n), *y = malloc(n), *upd = malloc(n), *want = malloc(n);
    seen w = {.s = s};
    for (int k = 0; k < 2; k++) w.copy[k] = calloc(n, 1);
    model_block(m, 0, x);
    scramble(x, n, 3);
    memcpy(y, x, n);
    scramble(y, n, 4);
    dz_error err = {0};
    ok(start_write(s, 0, x, &err), &err);
    ok(dz_store_start_call(s, read0_fn, &w, 10, x, &err), &err);
    ok(start_write(s, 0, y, &err), &err);
    ok(dz_store_start_call(s, read0_fn, &w, 11, NULL, &err), &err);
    ok(start_update(s, 0, upd, &w, &err), &err);
    ok(dz_store_wait(s, &err), &err);
    assert_int_equal(w.calls, 3);
    assert_int_equal(w.arg[0], 10);
    assert_int_equal(w.arg[1], 11);
    assert_int_equal(w.arg[2], 0);
    assert_ptr_equal(w.buf[0], x);
    assert_null(w.buf[1]);
    for (int k = 0; k < 3; k++) assert_int_equal(w.order[k], k);
    assert_memory_equal(w.copy[0], x, n);
    assert_memory_equal(w.copy[1], y, n);
    memcpy(want, y, n);
    xor_bytes(want, n);
    assert_memory_equal(upd, want, n); /* the update read Y */
    free(x), free(y), free(upd), free(want), free(w.copy[0]), free(w.copy[1]);
    dz_store_close(s);
    dz_model_free(m);
}

/* Ranges: a write inside a block changes exactly those bytes; reads and writes outside
 * the block, or of a block that does not exist, fail naming the file. */
static void test_ranges(void **state) {
    (void)state;
    dz_model *m = load("opt_preln", DZ_F32);
    dz_store *s = create(m, "ranges.safetensors", DZ_STORE_DROP_CACHE);
    const int nb = dz_store_n_blocks(s), b = nb - 1; /* the global block */
    const size_t n = dz_store_block_bytes(s, b), off = n / 3, len = n / 4;
    unsigned char *want = malloc(n), *got = malloc(n), *part = malloc(len);
    model_block(m, b, want);
    dz_error err = {0};
    ok(dz_store_read_range(s, b, off, len, part, &err), &err);
    assert_memory_equal(part, want + off, len);
    scramble(want + off, len, 9);
    ok(dz_store_write_range(s, b, off, len, want + off, &err), &err);
    ok(read_block(s, b, got, &err), &err);
    assert_memory_equal(got, want, n);
    ok(dz_store_read_range(s, b, n, 0, part, &err), &err); /* empty, at the end: fine */
    const struct { int block; uint64_t off; size_t len; } bad[] = {
        {b, n + 1, 0}, {b, n - 1, 2}, {b, 0, n + 1}, {b, UINT64_MAX, 2}, {nb, 0, 1}, {-1, 0, 1}};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        memset(&err, 0, sizeof err);
        assert_int_equal(dz_store_read_range(s, bad[k].block, bad[k].off, bad[k].len, part, &err), DZ_ERR_INVALID);
        assert_non_null(strstr(err.msg, dz_store_path(s)));
        memset(&err, 0, sizeof err);
        assert_int_equal(dz_store_write_range(s, bad[k].block, bad[k].off, bad[k].len, part, &err), DZ_ERR_INVALID);
        assert_non_null(strstr(err.msg, dz_store_path(s)));
    }
    ok(read_block(s, b, got, &err), &err);
    assert_memory_equal(got, want, n); /* the refused writes changed nothing */
    free(want), free(got), free(part);
    dz_store_close(s);
    dz_model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_opt_f32),          cmocka_unit_test(test_opt_bf16),
        cmocka_unit_test(test_llama_f32),        cmocka_unit_test(test_llama_bf16_drop_cache),
        cmocka_unit_test(test_missing_folder),   cmocka_unit_test(test_truncated),
        cmocka_unit_test(test_wrong_order),      cmocka_unit_test(test_start_update),
        cmocka_unit_test(test_start_call_order), cmocka_unit_test(test_ranges),
    };
    return cmocka_run_group_tests(tests, dz_temp_dir_setup, dz_temp_dir_teardown);
}
