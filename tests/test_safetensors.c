/* safetensors: a file from the reference Python writer (tools/make_safetensors_golden.py),
 * write -> open round trips, sharded HF folders, and malformed files crafted byte by byte,
 * each checked for the status and for a message naming the file and the culprit. */
#define _GNU_SOURCE
#include <fcntl.h>
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

#include "temp_dir.h"

#include "format/safetensors.h"

static void path_in(char *out, size_t cap, const char *name) { snprintf(out, cap, "%s/%s", g_dir, name); }

static void write_bytes(const char *path, const void *data, size_t len) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, len, f), len);
    fclose(f);
}

/* A file with an explicit header length field, the header text and data_len zero bytes. */
static void craft(const char *path, uint64_t hlen_field, const char *header, size_t data_len) {
    size_t hl = strlen(header), total = 8 + hl + data_len;
    unsigned char *buf = calloc(1, total);
    for (int i = 0; i < 8; i++) buf[i] = (unsigned char)(hlen_field >> (8 * i));
    memcpy(buf + 8, header, hl);
    write_bytes(path, buf, total);
    free(buf);
}

static void craft_header(const char *path, const char *header, size_t data_len) {
    craft(path, strlen(header), header, data_len);
}

/* Opens path expecting status want, with a message naming the file and each of the
 * NULL-terminated culprit strings. */
static void expect_open(const char *path, dz_status want, ...) {
    dz_safetensors st;
    dz_error err = {0};
    dz_status s = dz_safetensors_open(path, &st, &err);
    if (s != want) fail_msg("%s: got %s (%s), want %s", path, dz_status_name(s), err.msg, dz_status_name(want));
    assert_int_equal(st.count, 0);
    assert_null(st.tensors);
    if (!strstr(err.msg, path)) fail_msg("message does not name the file: %s", err.msg);
    va_list ap;
    va_start(ap, want);
    for (const char *c; (c = va_arg(ap, const char *));)
        if (!strstr(err.msg, c)) fail_msg("message lacks \"%s\": %s", c, err.msg);
    va_end(ap);
}

/* ---- the reference writer's file ---- */

static void check_f32(const dz_st_tensor *t, const float *want, size_t n) {
    assert_int_equal(t->nbytes, n * dz_dtype_size(t->dtype));
    float *got = malloc((n ? n : 1) * sizeof *got);
    dz_to_f32(got, t->data, t->dtype, n);
    for (size_t i = 0; i < n; i++)
        if (got[i] != want[i]) fail_msg("%s[%zu] = %g, want %g", t->name, i, got[i], want[i]);
    free(got);
}

static void reads_reference_file(void **state) {
    (void)state;
    const char *path = DZ_TEST_DATA "/safetensors/mixed.safetensors";
    dz_safetensors st;
    dz_error err = {0};
    if (dz_safetensors_open(path, &st, &err) != DZ_OK) fail_msg("%s", err.msg);
    assert_int_equal(st.count, 6);
    const dz_st_tensor *t = dz_safetensors_find(&st, "f32_mat");
    assert_non_null(t);
    assert_int_equal(t->dtype, DZ_F32);
    assert_int_equal(t->ndim, 2);
    assert_int_equal(t->shape[0], 2);
    assert_int_equal(t->shape[1], 3);
    check_f32(t, (const float[]){-1, -0.5f, 0, 0.5f, 1, 1.5f}, 6);
    t = dz_safetensors_find(&st, "f32_cube");
    assert_non_null(t);
    assert_int_equal(t->ndim, 3);
    check_f32(t, (const float[]){100, 100.25f, 100.5f, 100.75f, 101, 101.25f, 101.5f, 101.75f}, 8);
    t = dz_safetensors_find(&st, "f16_vec");
    assert_non_null(t);
    assert_int_equal(t->dtype, DZ_F16);
    check_f32(t, (const float[]){1, -2, 0.5f, 65504}, 4);
    t = dz_safetensors_find(&st, "bf16_mat");
    assert_non_null(t);
    assert_int_equal(t->dtype, DZ_BF16);
    check_f32(t, (const float[]){1, -2, 3.5f, 0.15625f}, 4);
    t = dz_safetensors_find(&st, "bf16_zero");
    assert_non_null(t);
    assert_int_equal(t->ndim, 2);
    assert_int_equal(t->shape[0], 0);
    assert_int_equal(t->shape[1], 3);
    assert_int_equal(t->nbytes, 0);
    t = dz_safetensors_find(&st, "f32_scalar");
    assert_non_null(t);
    assert_int_equal(t->ndim, 0);
    check_f32(t, (const float[]){-7.25f}, 1);
    assert_null(dz_safetensors_find(&st, "missing"));
    dz_safetensors_close(&st);
}

/* ---- write -> open ---- */

typedef struct sample {
    float f32[6];
    uint16_t f16[5], bf16_cube[24];
} sample;

static void fill_sample(sample *s) {
    for (int i = 0; i < 6; i++) s->f32[i] = 0.1f * (float)i - 3.0f;
    for (int i = 0; i < 5; i++) s->f16[i] = dz_f32_to_f16((float)i * 1.5f);
    for (int i = 0; i < 24; i++) s->bf16_cube[i] = dz_f32_to_bf16((float)(i - 12) * 0.25f);
}

static int sample_tensors(const sample *s, dz_st_write_tensor *w) {
    /* 2-byte dtypes first in the list, so the writer must reorder to align the F32 ones. */
    w[0] = (dz_st_write_tensor){"h.f16", DZ_F16, 1, {5}, s->f16};
    w[1] = (dz_st_write_tensor){"cube", DZ_BF16, 3, {2, 3, 4}, s->bf16_cube};
    w[2] = (dz_st_write_tensor){"empty", DZ_F32, 2, {0, 7}, NULL};
    w[3] = (dz_st_write_tensor){"weights.f32", DZ_F32, 2, {2, 3}, s->f32};
    return 4;
}

static void check_sample(const dz_safetensors *st, const sample *s) {
    dz_st_write_tensor w[4];
    int n = sample_tensors(s, w);
    assert_int_equal(st->count, n);
    for (int i = 0; i < n; i++) {
        const dz_st_tensor *t = dz_safetensors_find(st, w[i].name);
        if (!t) fail_msg("tensor %s missing", w[i].name);
        assert_int_equal(t->dtype, w[i].dtype);
        assert_int_equal(t->ndim, w[i].ndim);
        size_t numel = 1;
        for (int d = 0; d < t->ndim; d++) {
            assert_int_equal(t->shape[d], w[i].shape[d]);
            numel *= (size_t)w[i].shape[d];
        }
        assert_int_equal(t->nbytes, numel * dz_dtype_size(t->dtype));
        assert_int_equal((uintptr_t)t->data % dz_dtype_size(t->dtype), 0); /* aligned */
        if (t->nbytes) assert_memory_equal(t->data, w[i].data, t->nbytes);
    }
}

static void round_trip(void **state) {
    (void)state;
    sample s;
    fill_sample(&s);
    dz_st_write_tensor w[4];
    int n = sample_tensors(&s, w);
    char path[512];
    path_in(path, sizeof path, "rt.safetensors");
    dz_error err = {0};
    if (dz_safetensors_write(path, w, n, &err) != DZ_OK) fail_msg("%s", err.msg);

    dz_safetensors st;
    if (dz_safetensors_open(path, &st, &err) != DZ_OK) fail_msg("%s", err.msg);
    check_sample(&st, &s);
    /* Header: length a multiple of 8, the metadata transformers wants. */
    const unsigned char *b = st.map;
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = (hlen << 8) | b[i];
    assert_int_equal(hlen % 8, 0);
    char *hdr = strndup((const char *)b + 8, hlen);
    assert_non_null(strstr(hdr, "\"__metadata__\":{\"format\":\"pt\"}"));
    free(hdr);
    /* The same bytes parsed from memory. */
    void *copy = malloc(st.map_size);
    memcpy(copy, st.map, st.map_size);
    size_t size = st.map_size;
    dz_safetensors_close(&st);
    dz_safetensors mem;
    if (dz_safetensors_parse(path, copy, size, &mem, &err) != DZ_OK) fail_msg("%s", err.msg);
    assert_null(mem.map);
    check_sample(&mem, &s);
    dz_safetensors_close(&mem);
    free(copy);
    /* No temp file is left behind. */
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
    assert_int_equal(access(tmp, F_OK), -1);
}

static void write_rejects_bad_input(void **state) {
    (void)state;
    float x[2] = {1, 2};
    char path[512];
    path_in(path, sizeof path, "bad_write.safetensors");
    dz_error err = {0};
    dz_st_write_tensor dup[2] = {{"a", DZ_F32, 1, {2}, x}, {"a", DZ_F32, 1, {2}, x}};
    assert_int_equal(dz_safetensors_write(path, dup, 2, &err), DZ_ERR_INVALID);
    assert_non_null(strstr(err.msg, "'a'"));
    dz_st_write_tensor neg = {"n", DZ_F32, 1, {-2}, x};
    assert_int_equal(dz_safetensors_write(path, &neg, 1, &err), DZ_ERR_INVALID);
    assert_non_null(strstr(err.msg, "'n'"));
    dz_st_write_tensor meta = {"__metadata__", DZ_F32, 1, {2}, x};
    assert_int_equal(dz_safetensors_write(path, &meta, 1, &err), DZ_ERR_INVALID);
    assert_int_equal(access(path, F_OK), -1);
}

/* ---- HF folders ---- */

static void make_dir(char *out, size_t cap, const char *name) {
    path_in(out, cap, name);
    assert_int_equal(mkdir(out, 0755), 0);
}

static void write_in(const char *dir, const char *name, const dz_st_write_tensor *w, int n) {
    char p[1400];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    dz_error err = {0};
    if (dz_safetensors_write(p, w, n, &err) != DZ_OK) fail_msg("%s", err.msg);
}

static void text_in(const char *dir, const char *name, const char *text) {
    char p[600];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    write_bytes(p, text, strlen(text));
}

static void expect_ck(const char *dir, dz_status want, const char *c1, const char *c2) {
    dz_hf_checkpoint ck;
    dz_error err = {0};
    dz_status s = dz_hf_checkpoint_open(dir, &ck, &err);
    if (s != want) fail_msg("%s: got %s (%s)", dir, dz_status_name(s), err.msg);
    assert_int_equal(ck.n_files, 0);
    if (!strstr(err.msg, c1) || (c2 && !strstr(err.msg, c2))) fail_msg("message lacks %s/%s: %s", c1, c2, err.msg);
}

#define SHARD1 "model-00001-of-00002.safetensors"
#define SHARD2 "model-00002-of-00002.safetensors"

static void sharded_folder(void **state) {
    (void)state;
    float a[3] = {1, 2, 3}, b[2] = {4, 5}, c[4] = {6, 7, 8, 9};
    dz_st_write_tensor s1[2] = {{"a", DZ_F32, 1, {3}, a}, {"b", DZ_F32, 1, {2}, b}};
    dz_st_write_tensor s2[1] = {{"c", DZ_F32, 2, {2, 2}, c}};
    char dir[512];
    make_dir(dir, sizeof dir, "sharded");
    write_in(dir, SHARD1, s1, 2);
    write_in(dir, SHARD2, s2, 1);
    text_in(dir, "model.safetensors.index.json",
            "{\"metadata\": {\"total_size\": 36}, \"weight_map\": {\"a\": \"" SHARD1 "\", \"c\": \"" SHARD2
            "\", \"b\": \"" SHARD1 "\"}}");
    dz_hf_checkpoint ck;
    dz_error err = {0};
    if (dz_hf_checkpoint_open(dir, &ck, &err) != DZ_OK) fail_msg("%s", err.msg);
    assert_int_equal(ck.n_files, 2); /* each shard opened once */
    const char *file = NULL;
    const dz_st_tensor *t = dz_hf_checkpoint_find(&ck, "c", &file);
    assert_non_null(t);
    assert_non_null(strstr(file, SHARD2));
    assert_memory_equal(t->data, c, sizeof c);
    t = dz_hf_checkpoint_find(&ck, "b", &file);
    assert_non_null(t);
    assert_non_null(strstr(file, SHARD1));
    assert_memory_equal(t->data, b, sizeof b);
    assert_null(dz_hf_checkpoint_find(&ck, "zz", &file));
    dz_hf_checkpoint_close(&ck);
    /* The index decides: a tensor it does not list is absent even though a shard has it. */
    text_in(dir, "model.safetensors.index.json",
            "{\"weight_map\": {\"a\": \"" SHARD1 "\", \"c\": \"" SHARD2 "\"}}");
    if (dz_hf_checkpoint_open(dir, &ck, &err) != DZ_OK) fail_msg("%s", err.msg);
    assert_null(dz_hf_checkpoint_find(&ck, "b", &file));
    assert_non_null(dz_hf_checkpoint_find(&ck, "a", &file));
    dz_hf_checkpoint_close(&ck);

    /* The Hugging Face hub cache: snapshots/REV/model.safetensors -> ../../blobs/HASH. */
    char hub[512], snap[600], blobs[600], target[64], lnk[700];
    make_dir(hub, sizeof hub, "hub");
    snprintf(blobs, sizeof blobs, "%s/blobs", hub);
    snprintf(snap, sizeof snap, "%s/snapshots", hub);
    assert_int_equal(mkdir(blobs, 0755), 0);
    assert_int_equal(mkdir(snap, 0755), 0);
    snprintf(snap, sizeof snap, "%s/snapshots/0123abc", hub);
    assert_int_equal(mkdir(snap, 0755), 0);
    write_in(blobs, "e3b0c442", s2, 1);
    snprintf(target, sizeof target, "../../blobs/e3b0c442");
    snprintf(lnk, sizeof lnk, "%s/model.safetensors", snap);
    assert_int_equal(symlink(target, lnk), 0);
    if (dz_hf_checkpoint_open(snap, &ck, &err) != DZ_OK) fail_msg("%s", err.msg);
    assert_non_null(dz_hf_checkpoint_find(&ck, "c", NULL));
    dz_hf_checkpoint_close(&ck);

    /* Single-file folder. */
    char one[512];
    make_dir(one, sizeof one, "single");
    write_in(one, "model.safetensors", s2, 1);
    if (dz_hf_checkpoint_open(one, &ck, &err) != DZ_OK) fail_msg("%s", err.msg);
    assert_int_equal(ck.n_files, 1);
    assert_non_null(dz_hf_checkpoint_find(&ck, "c", NULL));
    dz_hf_checkpoint_close(&ck);
}

static void sharded_folder_errors(void **state) {
    (void)state;
    float a[3] = {1, 2, 3};
    dz_st_write_tensor s1[1] = {{"a", DZ_F32, 1, {3}, a}};
    char dir[512];
    make_dir(dir, sizeof dir, "bad_index");
    write_in(dir, SHARD1, s1, 1);
    /* Listed in a shard that lacks it. */
    text_in(dir, "model.safetensors.index.json",
            "{\"weight_map\": {\"a\": \"" SHARD1 "\", \"ghost\": \"" SHARD1 "\"}}");
    expect_ck(dir, DZ_ERR_FORMAT, "index.json", "'ghost'");
    /* A shard that does not exist. */
    text_in(dir, "model.safetensors.index.json", "{\"weight_map\": {\"a\": \"" SHARD2 "\"}}");
    expect_ck(dir, DZ_ERR_IO, SHARD2, NULL);
    /* A shard outside the folder. */
    text_in(dir, "model.safetensors.index.json", "{\"weight_map\": {\"a\": \"../x.safetensors\"}}");
    expect_ck(dir, DZ_ERR_FORMAT, "index.json", "'a'");
    /* A shard that is a symlink to a file outside the folder. */
    char outside[600], link[600];
    snprintf(outside, sizeof outside, "%s/../outside.safetensors", dir);
    write_in(dir, "../outside.safetensors", s1, 1);
    snprintf(link, sizeof link, "%s/" SHARD2, dir);
    assert_int_equal(symlink(outside, link), 0);
    text_in(dir, "model.safetensors.index.json", "{\"weight_map\": {\"a\": \"" SHARD2 "\"}}");
    expect_ck(dir, DZ_ERR_FORMAT, SHARD2, "outside the folder");
    unlink(link);
    /* A shard that is a FIFO: refused without blocking. */
    assert_int_equal(mkfifo(link, 0600), 0);
    expect_ck(dir, DZ_ERR_IO, SHARD2, "not a regular file (a FIFO)");
    unlink(link);
    /* A tensor listed twice (JSON duplicate keys), or in two shards. */
    text_in(dir, "model.safetensors.index.json",
            "{\"weight_map\": {\"a\": \"" SHARD1 "\", \"a\": \"" SHARD1 "\"}}");
    expect_ck(dir, DZ_ERR_FORMAT, "index.json", "'a' twice");
    float c[2] = {7, 8};
    dz_st_write_tensor s2[2] = {{"a", DZ_F32, 1, {3}, a}, {"c", DZ_F32, 1, {2}, c}};
    write_in(dir, SHARD2, s2, 2);
    text_in(dir, "model.safetensors.index.json",
            "{\"weight_map\": {\"a\": \"" SHARD1 "\", \"c\": \"" SHARD2 "\"}}");
    expect_ck(dir, DZ_ERR_FORMAT, "'a'", "two shards");
    unlink(link);
    /* No weight_map / malformed JSON. */
    text_in(dir, "model.safetensors.index.json", "{\"metadata\": {}}");
    expect_ck(dir, DZ_ERR_FORMAT, "index.json", "weight_map");
    text_in(dir, "model.safetensors.index.json", "{\"weight_map\": ");
    expect_ck(dir, DZ_ERR_FORMAT, "index.json", "malformed");
    /* Nothing there. */
    char empty[512];
    make_dir(empty, sizeof empty, "empty_dir");
    expect_ck(empty, DZ_ERR_NOT_FOUND, empty, "model.safetensors");
}

/* ---- malformed files ---- */

#define T_OK(name, dtype, shape, b, e) \
    "\"" name "\":{\"dtype\":\"" dtype "\",\"shape\":" shape ",\"data_offsets\":[" #b "," #e "]}"

static void bad(const char *name, const char *header, size_t data_len, dz_status want, const char *c1,
                const char *c2) {
    char path[512];
    path_in(path, sizeof path, name);
    craft_header(path, header, data_len);
    expect_open(path, want, c1, c2, (const char *)NULL);
}

static void malformed_sizes(void **state) {
    (void)state;
    char path[512];
    path_in(path, sizeof path, "huge_len.safetensors");
    craft(path, UINT64_C(1) << 62, "{}", 8);
    expect_open(path, DZ_ERR_FORMAT, "header length", "absurd", (const char *)NULL);
    path_in(path, sizeof path, "past_end.safetensors");
    craft(path, 1000, "{}", 8);
    expect_open(path, DZ_ERR_FORMAT, "header length 1000", "past the end", (const char *)NULL);
    path_in(path, sizeof path, "tiny.safetensors");
    write_bytes(path, "\x02\0\0", 3);
    expect_open(path, DZ_ERR_FORMAT, "too short", (const char *)NULL);
    path_in(path, sizeof path, "empty.safetensors");
    write_bytes(path, "", 0);
    expect_open(path, DZ_ERR_FORMAT, "too short", (const char *)NULL);
    path_in(path, sizeof path, "does_not_exist.safetensors");
    expect_open(path, DZ_ERR_IO, "cannot open", (const char *)NULL);

    /* A valid file cut short inside the data section. */
    float v[4] = {1, 2, 3, 4};
    dz_st_write_tensor w = {"last", DZ_F32, 1, {4}, v};
    path_in(path, sizeof path, "truncated.safetensors");
    dz_error err = {0};
    assert_int_equal(dz_safetensors_write(path, &w, 1, &err), DZ_OK);
    struct stat sb;
    assert_int_equal(stat(path, &sb), 0);
    assert_int_equal(truncate(path, sb.st_size - 4), 0); /* drop the last element */
    expect_open(path, DZ_ERR_FORMAT, "'last'", "beyond the data section", (const char *)NULL);
}

static void malformed_json(void **state) {
    (void)state;
    bad("bad_json.st", "{\"w\": {\"dtype\": ", 0, DZ_ERR_FORMAT, "malformed", NULL);
    bad("array.st", "[1, 2, 3]", 0, DZ_ERR_FORMAT, "not an object", NULL);
    bad("string.st", "\"hello\"", 0, DZ_ERR_FORMAT, "not an object", NULL);
    bad("trailing.st", "{} xyz", 0, DZ_ERR_FORMAT, "trailing", NULL);
    bad("entry_not_obj.st", "{\"w\": 3}", 0, DZ_ERR_FORMAT, "'w'", "not an object");
    bad("meta.st", "{\"__metadata__\": 5}", 0, DZ_ERR_FORMAT, "__metadata__", NULL);
    bad("meta_val.st", "{\"__metadata__\": {\"format\": 1}}", 0, DZ_ERR_FORMAT, "__metadata__", "'format'");
    /* A NUL before the closing brace, or inside a name (issue 27.10): JSON has no raw control
     * bytes, and cJSON would skip the first as whitespace and cut the name at the second. */
    static const char nul_brace[] = "{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}\0}";
    static const char nul_name[] = "{\"w\0x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}";
    const struct { const char *name, *header; size_t len, at; } nuls[] = {
        {"nul_brace.st", nul_brace, sizeof nul_brace - 1, sizeof nul_brace - 3},
        {"nul_name.st", nul_name, sizeof nul_name - 1, 3}};
    char path[512];
    for (int i = 0; i < 2; i++) {
        unsigned char file[8 + 96 + 4] = {0};
        for (int b = 0; b < 8; b++) file[b] = (unsigned char)((uint64_t)nuls[i].len >> (8 * b));
        memcpy(file + 8, nuls[i].header, nuls[i].len);
        path_in(path, sizeof path, nuls[i].name);
        write_bytes(path, file, 8 + nuls[i].len + 4);
        char at[64];
        snprintf(at, sizeof at, "control byte 0x00 at byte %zu", nuls[i].at);
        expect_open(path, DZ_ERR_FORMAT, at, (const char *)NULL);
    }
    /* Padding after the object is fine, and so is an empty file with metadata only. */
    path_in(path, sizeof path, "padded.st");
    craft_header(path, "{\"__metadata__\":{\"format\":\"pt\"}}      ", 0);
    dz_safetensors st;
    dz_error err = {0};
    if (dz_safetensors_open(path, &st, &err) != DZ_OK) fail_msg("%s", err.msg);
    assert_int_equal(st.count, 0);
    dz_safetensors_close(&st);
}

static void malformed_fields(void **state) {
    (void)state;
    bad("no_dtype.st", "{\"w\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4, DZ_ERR_FORMAT, "'w'", "'dtype'");
    bad("no_shape.st", "{\"w\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", 4, DZ_ERR_FORMAT, "'w'", "'shape'");
    bad("no_offs.st", "{\"w\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4, DZ_ERR_FORMAT, "'w'", "'data_offsets'");
    bad("dtype_num.st", "{\"w\":{\"dtype\":7,\"shape\":[1],\"data_offsets\":[0,4]}}", 4, DZ_ERR_FORMAT,
        "'w'", "'dtype'");
    bad("shape_str.st", "{\"w\":{\"dtype\":\"F32\",\"shape\":\"1\",\"data_offsets\":[0,4]}}", 4,
        DZ_ERR_FORMAT, "'w'", "'shape'");
    bad("offs_three.st", "{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4,8]}}", 8,
        DZ_ERR_FORMAT, "'w'", "'data_offsets'");
    bad("offs_neg.st", "{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[-4,0]}}", 8,
        DZ_ERR_FORMAT, "'w'", "'data_offsets'");
    bad("i64.st", "{" T_OK("ids", "I64", "[2]", 0, 16) "}", 16, DZ_ERR_UNSUPPORTED, "'ids'", "I64");
    bad("q4.st", "{" T_OK("w", "Q4", "[2]", 0, 1) "}", 16, DZ_ERR_FORMAT, "'w'", "unknown dtype 'Q4'");
    bad("f32_lower.st", "{" T_OK("w", "f32", "[2]", 0, 8) "}", 16, DZ_ERR_FORMAT, "'w'", "'f32'");
    bad("ndim9.st", "{" T_OK("w", "F32", "[1,1,1,1,1,1,1,1,1]", 0, 4) "}", 4, DZ_ERR_UNSUPPORTED, "'w'",
        "9 dimensions");
}

static void malformed_shapes_and_ranges(void **state) {
    (void)state;
    bad("neg_shape.st", "{" T_OK("w", "F32", "[2,-1]", 0, 8) "}", 8, DZ_ERR_FORMAT, "'w'", "shape[1]");
    bad("frac_shape.st", "{" T_OK("w", "F32", "[1.5]", 0, 8) "}", 8, DZ_ERR_FORMAT, "'w'", "shape[0]");
    bad("huge_shape.st", "{" T_OK("w", "F32", "[1e300]", 0, 8) "}", 8, DZ_ERR_FORMAT, "'w'", "shape[0]");
    /* 2^32 * 2^32 * 4 elements: the element count itself overflows 64 bits. */
    bad("ovf_numel.st", "{" T_OK("w", "F32", "[4294967296,4294967296,4]", 0, 8) "}", 8, DZ_ERR_FORMAT,
        "'w'", "overflows");
    /* 2^53 * 1024 = 2^63 elements fit; times 4 bytes does not. */
    bad("ovf_bytes.st", "{" T_OK("w", "F32", "[9007199254740992,1024]", 0, 8) "}", 8, DZ_ERR_FORMAT,
        "'w'", "overflows");
    bad("size_mismatch.st", "{" T_OK("w", "F32", "[2,2]", 0, 12) "}", 16, DZ_ERR_FORMAT, "'w'",
        "16 bytes but data_offsets span 12");
    bad("bf16_mismatch.st", "{" T_OK("w", "BF16", "[3]", 0, 4) "}", 16, DZ_ERR_FORMAT, "'w'", "span 4");
    bad("beyond.st", "{" T_OK("w", "F32", "[4]", 0, 16) "}", 8, DZ_ERR_FORMAT, "'w'", "beyond the data section");
    bad("begin_gt_end.st", "{" T_OK("w", "F32", "[1]", 8, 4) "}", 16, DZ_ERR_FORMAT, "'w'", "begin 8 > end 4");
    bad("overlap.st", "{" T_OK("a", "F32", "[4]", 0, 16) "," T_OK("b", "F32", "[4]", 8, 24) "}", 24,
        DZ_ERR_FORMAT, "'a'", "'b'");
    bad("same_range.st", "{" T_OK("a", "F32", "[2]", 0, 8) "," T_OK("b", "BF16", "[4]", 0, 8) "}", 8,
        DZ_ERR_FORMAT, "overlap", NULL);
    bad("dup.st", "{" T_OK("w", "F32", "[1]", 0, 4) "," T_OK("w", "F32", "[1]", 4, 8) "}", 8,
        DZ_ERR_FORMAT, "'w'", "twice");
}

/* Zero-size tensors anywhere (even at the end of the data, or "inside" another's range)
 * and gaps between tensors are accepted. */
static void accepts_edge_cases(void **state) {
    (void)state;
    char path[512];
    path_in(path, sizeof path, "edges.st");
    craft_header(path,
                 "{" T_OK("z1", "F32", "[0]", 0, 0) "," T_OK("a", "F32", "[2]", 0, 8) ","
                 T_OK("z2", "BF16", "[3,0]", 4, 4) "," T_OK("b", "F16", "[2]", 12, 16) ","
                 T_OK("z3", "F16", "[0]", 16, 16) "}", 16);
    dz_safetensors st;
    dz_error err = {0};
    if (dz_safetensors_open(path, &st, &err) != DZ_OK) fail_msg("%s", err.msg);
    assert_int_equal(st.count, 5);
    assert_int_equal(dz_safetensors_find(&st, "z3")->nbytes, 0);
    assert_int_equal(dz_safetensors_find(&st, "b")->nbytes, 4);
    dz_safetensors_close(&st);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(reads_reference_file),
        cmocka_unit_test(round_trip),
        cmocka_unit_test(write_rejects_bad_input),
        cmocka_unit_test(sharded_folder),
        cmocka_unit_test(sharded_folder_errors),
        cmocka_unit_test(malformed_sizes),
        cmocka_unit_test(malformed_json),
        cmocka_unit_test(malformed_fields),
        cmocka_unit_test(malformed_shapes_and_ranges),
        cmocka_unit_test(accepts_edge_cases),
    };
    return cmocka_run_group_tests(tests, dz_temp_dir_setup, dz_temp_dir_teardown);
}
