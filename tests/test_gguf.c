/* GGUF: the parser on crafted images (every validation names what it refuses), ggml
 * dequantization of every type against a plain per-element reference written here from
 * the block layouts (plus hand-computed values), and the real SmolLM2-135M-Instruct GGUF
 * (Q4_1 + Q8_0 + F32): config, dtype conversion, and logits and greedy tokens against
 * tools/make_gguf_golden.py (gguf-py dequantization + a float64 numpy forward that
 * rotates the file's interleaved Q/K rows as llama.cpp does, so distzo's un-permutation
 * is checked too). The real-model tests need $DISTZO_ASSETS. */
#define _GNU_SOURCE
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "distzo/dtype.h"
#include "distzo/model.h"
#include "format/ggml_quant.h"
#include "format/gguf.h"
#include "temp_dir.h"
#include "assets.h"

/* ---- an in-memory GGUF writer for crafted files ------------------------------------- */

typedef struct buf {
    unsigned char *p;
    size_t n, cap;
} buf;

static void put(buf *b, const void *src, size_t n) {
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
        assert_non_null(b->p);
    }
    memcpy(b->p + b->n, src, n);
    b->n += n;
}
static void put_u32(buf *b, uint32_t v) { put(b, &v, 4); }
static void put_u64(buf *b, uint64_t v) { put(b, &v, 8); }
static void put_str(buf *b, const char *s) {
    put_u64(b, strlen(s));
    put(b, s, strlen(s));
}
static void put_header(buf *b, uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
    put(b, "GGUF", 4);
    put_u32(b, version);
    put_u64(b, n_tensors);
    put_u64(b, n_kv);
}
static void put_kv_u32(buf *b, const char *key, uint32_t v) {
    put_str(b, key);
    put_u32(b, DZ_GGUF_U32);
    put_u32(b, v);
}
static void put_tensor_info(buf *b, const char *name, int nd, const uint64_t *ne, uint32_t type, uint64_t off) {
    put_str(b, name);
    put_u32(b, (uint32_t)nd);
    for (int i = 0; i < nd; i++) put_u64(b, ne[i]);
    put_u32(b, type);
    put_u64(b, off);
}
static void pad_to(buf *b, size_t align) {
    static const unsigned char zero[64];
    while (b->n % align) put(b, zero, 1);
}

static dz_status parse(const buf *b, dz_gguf *g, dz_error *err) {
    memset(err, 0, sizeof *err);
    return dz_gguf_parse("crafted.gguf", b->p, b->n, g, err);
}

/* A valid file: two tensors (an F32 vector, a Q8_0 matrix), scalar, string and array keys. */
static buf valid_file(void) {
    buf b = {0};
    put_header(&b, 3, 2, 4);
    put_kv_u32(&b, "general.alignment", 64);
    put_str(&b, "general.architecture");
    put_u32(&b, DZ_GGUF_STRING);
    put_str(&b, "llama");
    put_str(&b, "tokenizer.ggml.tokens");
    put_u32(&b, DZ_GGUF_ARRAY);
    put_u32(&b, DZ_GGUF_STRING);
    put_u64(&b, 3);
    put_str(&b, "a");
    put_str(&b, "");
    put_str(&b, "xyz");
    put_str(&b, "x.eps");
    put_u32(&b, DZ_GGUF_F32);
    float eps = 1e-5f;
    put(&b, &eps, 4);
    const uint64_t ne_v[1] = {8}, ne_m[2] = {64, 3};
    put_tensor_info(&b, "vec", 1, ne_v, DZ_GGML_F32, 0);
    put_tensor_info(&b, "mat", 2, ne_m, DZ_GGML_Q8_0, 64);
    pad_to(&b, 64);
    const float v[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    put(&b, v, sizeof v);
    pad_to(&b, 64);
    unsigned char blocks[6][34] = {{0}};
    put(&b, blocks, sizeof blocks);
    return b;
}

static void parses_a_valid_file(void **s) {
    (void)s;
    buf b = valid_file();
    dz_gguf g;
    dz_error err;
    assert_int_equal(parse(&b, &g, &err), DZ_OK);
    assert_int_equal(g.version, 3);
    assert_int_equal(g.alignment, 64);
    assert_int_equal(g.n_tensors, 2);
    const dz_gguf_tensor *vec = dz_gguf_find_tensor(&g, "vec"), *mat = dz_gguf_find_tensor(&g, "mat");
    assert_non_null(vec);
    assert_non_null(mat);
    assert_null(dz_gguf_find_tensor(&g, "nope"));
    assert_int_equal(vec->nbytes, 32);
    assert_int_equal((const unsigned char *)vec->data - b.p, g.data_offset);
    assert_int_equal(g.data_offset % 64, 0);
    float v3;
    memcpy(&v3, (const char *)vec->data + 12, 4);
    assert_true(v3 == 4.0f);
    assert_int_equal(mat->ne[0], 64);
    assert_int_equal(mat->nrows, 3);
    assert_int_equal(mat->row_bytes, 2 * 34);
    assert_int_equal(mat->nbytes, 6 * 34);
    dz_gguf_str arch;
    assert_int_equal(dz_gguf_get_string(&g, "general.architecture", &arch, &err), DZ_OK);
    assert_int_equal(arch.len, 5);
    assert_memory_equal(arch.s, "llama", 5);
    uint32_t al;
    int32_t al_i;
    assert_int_equal(dz_gguf_get_u32(&g, "general.alignment", &al, &err), DZ_OK);
    assert_int_equal(dz_gguf_get_i32(&g, "general.alignment", &al_i, &err), DZ_OK);
    assert_int_equal(al, 64);
    assert_int_equal(al_i, 64);
    float eps;
    assert_int_equal(dz_gguf_get_f32(&g, "x.eps", &eps, &err), DZ_OK);
    assert_true(eps == 1e-5f);
    const dz_gguf_kv *toks;
    assert_int_equal(dz_gguf_get_array(&g, "tokenizer.ggml.tokens", DZ_GGUF_STRING, &toks, &err), DZ_OK);
    assert_int_equal(toks->count, 3);
    dz_gguf_str strs[3];
    dz_gguf_array_strings(toks, strs);
    assert_int_equal(strs[0].len, 1);
    assert_int_equal(strs[1].len, 0);
    assert_int_equal(strs[2].len, 3);
    assert_memory_equal(strs[2].s, "xyz", 3);
    /* Type errors and missing keys name the key. */
    assert_int_equal(dz_gguf_get_u32(&g, "general.architecture", &al, &err), DZ_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "'general.architecture'"));
    assert_non_null(strstr(err.msg, "crafted.gguf"));
    assert_int_equal(dz_gguf_get_f32(&g, "general.alignment", &eps, &err), DZ_ERR_FORMAT);
    assert_int_equal(dz_gguf_get_u32(&g, "llama.block_count", &al, &err), DZ_ERR_NOT_FOUND);
    assert_non_null(strstr(err.msg, "'llama.block_count'"));
    assert_int_equal(dz_gguf_get_array(&g, "tokenizer.ggml.tokens", DZ_GGUF_F32, &toks, &err), DZ_ERR_FORMAT);
    dz_gguf_close(&g);
    free(b.p);
}

/* Byte offsets inside valid_file() for mutation. */
static size_t find_bytes(const buf *b, const void *needle, size_t n) {
    for (size_t i = 0; i + n <= b->n; i++)
        if (memcmp(b->p + i, needle, n) == 0) return i;
    fail_msg("needle not found");
    return 0;
}

/* Parses b, expects code and a message holding want; the output is left empty. */
static void expect_refused(const buf *b, dz_status code, const char *want) {
    dz_gguf g;
    dz_error err;
    dz_status st = parse(b, &g, &err);
    if (st != code || !strstr(err.msg, want))
        fail_msg("expected %d with \"%s\", got %d: %s", code, want, st, err.msg);
    assert_int_equal(g.n_tensors, 0);
    assert_null(g.tensors);
    assert_null(g.kv);
}

static void refuses_bad_headers(void **s) {
    (void)s;
    buf b = valid_file();
    memcpy(b.p, "GGUG", 4);
    expect_refused(&b, DZ_ERR_FORMAT, "not a GGUF file");
    memcpy(b.p, "GGUF", 4);
    const uint32_t v1 = 1, v9 = 9, big3 = 0x03000000u;
    memcpy(b.p + 4, &v1, 4);
    expect_refused(&b, DZ_ERR_UNSUPPORTED, "version 1");
    memcpy(b.p + 4, &v9, 4);
    expect_refused(&b, DZ_ERR_FORMAT, "unknown GGUF version 9");
    memcpy(b.p + 4, &big3, 4);
    expect_refused(&b, DZ_ERR_UNSUPPORTED, "big-endian");
    const uint32_t v2 = 2;
    memcpy(b.p + 4, &v2, 4);
    dz_gguf g;
    dz_error err;
    assert_int_equal(parse(&b, &g, &err), DZ_OK); /* v2 has v3's layout */
    dz_gguf_close(&g);
    /* Counts larger than the file could hold are refused before allocating. */
    const uint64_t huge = 1ull << 40;
    memcpy(b.p + 8, &huge, 8);
    expect_refused(&b, DZ_ERR_FORMAT, "tensors cannot fit");
    const uint64_t two = 2;
    memcpy(b.p + 8, &two, 8);
    memcpy(b.p + 16, &huge, 8);
    expect_refused(&b, DZ_ERR_FORMAT, "key/values cannot fit");
    /* Every truncation point fails cleanly (ASan checks no byte past the end is read). */
    for (size_t n = 0; n < b.n; n++) {
        buf t = {b.p, n, n};
        dz_gguf gt;
        if (parse(&t, &gt, &err) == DZ_OK) {
            /* Only cuts inside the last tensor's data could pass, and they do not. */
            fail_msg("a file cut at %zu bytes of %zu parsed", n, b.n);
        }
    }
    free(b.p);
}

static void refuses_bad_metadata(void **s) {
    (void)s;
    buf b = valid_file();
    /* A string longer than the file. */
    size_t at = find_bytes(&b, "llama", 5) - 8;
    const uint64_t long_len = 1ull << 50;
    memcpy(b.p + at, &long_len, 8);
    expect_refused(&b, DZ_ERR_FORMAT, "past the end of the file");
    free(b.p);
    /* A duplicate key. */
    buf d = {0};
    put_header(&d, 3, 0, 2);
    put_kv_u32(&d, "k", 1);
    put_kv_u32(&d, "k", 2);
    expect_refused(&d, DZ_ERR_FORMAT, "key 'k' appears twice");
    free(d.p);
    /* Nested arrays, unknown value types, an empty key, a key with a NUL. */
    d = (buf){0};
    put_header(&d, 3, 0, 1);
    put_str(&d, "nest");
    put_u32(&d, DZ_GGUF_ARRAY);
    put_u32(&d, DZ_GGUF_ARRAY);
    put_u64(&d, 1);
    put_u32(&d, DZ_GGUF_U8);
    put_u64(&d, 0);
    expect_refused(&d, DZ_ERR_UNSUPPORTED, "'nest' is an array of arrays");
    free(d.p);
    d = (buf){0};
    put_header(&d, 3, 0, 1);
    put_str(&d, "odd");
    put_u32(&d, 13);
    put_u32(&d, 0);
    expect_refused(&d, DZ_ERR_FORMAT, "'odd' has unknown value type 13");
    free(d.p);
    d = (buf){0};
    put_header(&d, 3, 0, 1);
    put_str(&d, "");
    put_u32(&d, DZ_GGUF_U32);
    put_u32(&d, 0);
    expect_refused(&d, DZ_ERR_FORMAT, "metadata key at byte 32 is empty");
    free(d.p);
    d = (buf){0};
    put_header(&d, 3, 0, 1);
    put_u64(&d, 3);
    put(&d, "a\0b", 3);
    put_u32(&d, DZ_GGUF_U32);
    put_u32(&d, 0);
    expect_refused(&d, DZ_ERR_FORMAT, "holds a NUL byte");
    free(d.p);
    /* An array of u32 longer than the file; a string array whose count cannot fit. */
    d = (buf){0};
    put_header(&d, 3, 0, 1);
    put_str(&d, "arr");
    put_u32(&d, DZ_GGUF_ARRAY);
    put_u32(&d, DZ_GGUF_U32);
    put_u64(&d, (1ull << 62) + 1); /* * 4 would wrap to 4 */
    put_u32(&d, 0);
    expect_refused(&d, DZ_ERR_FORMAT, "'arr': array of 4611686018427387905 u32 runs past the end");
    free(d.p);
    d = (buf){0};
    put_header(&d, 3, 0, 1);
    put_str(&d, "strs");
    put_u32(&d, DZ_GGUF_ARRAY);
    put_u32(&d, DZ_GGUF_STRING);
    put_u64(&d, 3);
    put_u64(&d, 0);
    expect_refused(&d, DZ_ERR_FORMAT, "'strs': array of 3 strings cannot fit");
    free(d.p);
    /* Alignment: a u32 power of two. */
    d = (buf){0};
    put_header(&d, 3, 0, 1);
    put_kv_u32(&d, "general.alignment", 48);
    expect_refused(&d, DZ_ERR_FORMAT, "'general.alignment' = 48 is not a power of two");
    free(d.p);
    /* Integer range checks name the key. */
    d = (buf){0};
    put_header(&d, 3, 0, 1);
    put_str(&d, "neg");
    put_u32(&d, DZ_GGUF_I32);
    put_u32(&d, (uint32_t)-5);
    dz_gguf g;
    dz_error err;
    assert_int_equal(parse(&d, &g, &err), DZ_OK);
    uint32_t u;
    int32_t i;
    assert_int_equal(dz_gguf_get_u32(&g, "neg", &u, &err), DZ_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "'neg' = -5 is out of range"));
    assert_int_equal(dz_gguf_get_i32(&g, "neg", &i, &err), DZ_OK);
    assert_int_equal(i, -5);
    dz_gguf_close(&g);
    free(d.p);
}

/* A file with one tensor info described by the arguments and data_bytes of data. */
static buf one_tensor(const char *name, int nd, const uint64_t *ne, uint32_t type, uint64_t off, size_t data_bytes) {
    buf b = {0};
    put_header(&b, 3, 1, 0);
    put_tensor_info(&b, name, nd, ne, type, off);
    pad_to(&b, 32);
    unsigned char *zeros = calloc(data_bytes + 1, 1);
    put(&b, zeros, data_bytes);
    free(zeros);
    return b;
}

static void refuses_bad_tensors(void **s) {
    (void)s;
    const uint64_t ne[2] = {32, 2};
    buf b = one_tensor("w", 2, ne, DZ_GGML_Q4_0, 0, 36);
    dz_gguf g;
    dz_error err;
    assert_int_equal(parse(&b, &g, &err), DZ_OK);
    dz_gguf_close(&g);
    free(b.p);
    b = one_tensor("w", 2, ne, DZ_GGML_Q4_0, 0, 35);
    expect_refused(&b, DZ_ERR_FORMAT, "tensor 'w': bytes [0, +36) run past the end");
    free(b.p);
    b = one_tensor("w", 2, ne, DZ_GGML_Q4_0, 8, 64);
    expect_refused(&b, DZ_ERR_FORMAT, "tensor 'w': offset 8 is not a multiple of the alignment 32");
    free(b.p);
    const uint64_t ne_odd[2] = {48, 2};
    b = one_tensor("w", 2, ne_odd, DZ_GGML_Q4_0, 0, 64);
    expect_refused(&b, DZ_ERR_FORMAT, "row length 48 is not a multiple of Q4_0's block of 32");
    free(b.p);
    b = one_tensor("w", 2, ne, 16 /* IQ2_XXS */, 0, 64);
    expect_refused(&b, DZ_ERR_UNSUPPORTED, "tensor 'w' has ggml type IQ2_XXS (16)");
    free(b.p);
    b = one_tensor("w", 2, ne, 77, 0, 64);
    expect_refused(&b, DZ_ERR_UNSUPPORTED, "type unknown (77)");
    free(b.p);
    const uint64_t ne_big[4] = {1ull << 32, 1ull << 32, 0, 1}, ne_rows[4] = {0, 1ull << 32, 1ull << 32, 1};
    b = one_tensor("w", 4, ne_big, DZ_GGML_F32, 0, 0);
    expect_refused(&b, DZ_ERR_FORMAT, "tensor 'w': dimensions overflow"); /* a zero does not hide it */
    free(b.p);
    b = one_tensor("w", 4, ne_rows, DZ_GGML_F32, 0, 0);
    expect_refused(&b, DZ_ERR_FORMAT, "tensor 'w': dimensions overflow"); /* nor an empty row */
    free(b.p);
    const uint64_t ne_bytes[2] = {1ull << 62, 1};
    b = one_tensor("w", 2, ne_bytes, DZ_GGML_F32, 0, 0);
    expect_refused(&b, DZ_ERR_FORMAT, "tensor 'w': byte size overflows");
    free(b.p);
    const uint64_t ne5[5] = {1, 1, 1, 1, 1};
    b = one_tensor("w", 5, ne5, DZ_GGML_F32, 0, 4);
    expect_refused(&b, DZ_ERR_FORMAT, "tensor 'w' has 5 dimensions");
    free(b.p);
    /* Two tensors: duplicate names, overlapping ranges. */
    const uint64_t ne8[1] = {8};
    for (int dup = 0; dup < 2; dup++) {
        b = (buf){0};
        put_header(&b, 3, 2, 0);
        put_tensor_info(&b, "a", 1, ne8, DZ_GGML_F32, 0);
        put_tensor_info(&b, dup ? "a" : "b", 1, ne8, DZ_GGML_F32, dup ? 32 : 0);
        pad_to(&b, 32);
        unsigned char z[64] = {0};
        put(&b, z, 64);
        if (dup) expect_refused(&b, DZ_ERR_FORMAT, "tensor 'a' appears twice");
        else expect_refused(&b, DZ_ERR_FORMAT, "tensors 'a' and 'b' overlap");
        free(b.p);
    }
}

/* ---- dequantization ----------------------------------------------------------------- */

static float h2f(const unsigned char *p) { return dz_f16_to_f32((uint16_t)(p[0] | p[1] << 8)); }

/* Element e of one block, from the layout (ggml-common.h) and ggml's arithmetic order
 * (scale * quant, then the min; d * sub-scale first), written per element. */
static float ref_elem(uint32_t type, const unsigned char *b, int e) {
    switch (type) {
    case DZ_GGML_Q4_0: {
        const int q = e < 16 ? b[2 + e] & 15 : b[2 + e - 16] >> 4;
        return (float)(q - 8) * h2f(b);
    }
    case DZ_GGML_Q4_1: {
        const int q = e < 16 ? b[4 + e] & 15 : b[4 + e - 16] >> 4;
        return (float)q * h2f(b) + h2f(b + 2);
    }
    case DZ_GGML_Q5_0:
    case DZ_GGML_Q5_1: {
        const int m = type == DZ_GGML_Q5_1, qs = m ? 8 : 6, qh = m ? 4 : 2;
        const int low = e < 16 ? b[qs + e] & 15 : b[qs + e - 16] >> 4;
        const int high = (b[qh + e / 8] >> (e % 8)) & 1;
        const int q = low + 16 * high;
        return m ? (float)q * h2f(b) + h2f(b + 2) : (float)(q - 16) * h2f(b);
    }
    case DZ_GGML_Q8_0: return (float)(int8_t)b[2 + e] * h2f(b);
    case DZ_GGML_Q2_K: {
        const int half = e / 128, r = e % 128, j = r / 32, k = (r % 32) / 16, l = r % 16;
        const int q = (b[16 + 32 * half + 16 * k + l] >> (2 * j)) & 3, sc = b[8 * half + 2 * j + k];
        return h2f(b + 80) * (float)(sc & 15) * (float)q - h2f(b + 82) * (float)(sc >> 4);
    }
    case DZ_GGML_Q3_K: {
        const int half = e / 128, r = e % 128, j = r / 32, k = (r % 32) / 16, l = r % 16;
        const int q2 = (b[32 + 32 * half + 16 * k + l] >> (2 * j)) & 3;
        const int hbit = (b[16 * k + l] >> (4 * half + j)) & 1;
        /* the 16 scales as ggml unpacks them: 32-bit words w0..w2 of the 12 bytes */
        uint32_t w[3], out[4];
        memcpy(w, b + 96, 12);
        out[0] = (w[0] & 0x0f0f0f0f) | ((w[2] & 0x03030303) << 4);
        out[1] = (w[1] & 0x0f0f0f0f) | (((w[2] >> 2) & 0x03030303) << 4);
        out[2] = ((w[0] >> 4) & 0x0f0f0f0f) | (((w[2] >> 4) & 0x03030303) << 4);
        out[3] = ((w[1] >> 4) & 0x0f0f0f0f) | (((w[2] >> 6) & 0x03030303) << 4);
        const int s = 8 * half + 2 * j + k, scale = (int)((out[s / 4] >> (8 * (s % 4))) & 0xff) - 32;
        return h2f(b + 108) * (float)scale * (float)(q2 - (hbit ? 0 : 4));
    }
    case DZ_GGML_Q4_K:
    case DZ_GGML_Q5_K: {
        const int five = type == DZ_GGML_Q5_K, g = e / 32, l = e % 32;
        const unsigned char *sc = b + 4, *qs = b + (five ? 48 : 16);
        const int byte = qs[32 * (g / 2) + l];
        int q = g % 2 ? byte >> 4 : byte & 15;
        if (five) q += 16 * ((b[16 + l] >> g) & 1);
        const int scale = g < 4 ? sc[g] & 63 : (sc[g + 4] & 15) | (sc[g - 4] >> 6) << 4;
        const int min = g < 4 ? sc[g + 4] & 63 : (sc[g + 4] >> 4) | (sc[g] >> 6) << 4;
        return h2f(b) * (float)scale * (float)q - h2f(b + 2) * (float)min;
    }
    case DZ_GGML_Q6_K: {
        const int half = e / 128, r = e % 128, run = r / 32, l = r % 32;
        const int lb = b[64 * half + l + 32 * (run % 2)], low = run < 2 ? lb & 15 : lb >> 4;
        const int high = (b[128 + 32 * half + l] >> (2 * run)) & 3;
        const int8_t sc = (int8_t)b[192 + 8 * half + l / 16 + 2 * run];
        return h2f(b + 208) * (float)sc * (float)((low | high << 4) - 32);
    }
    default: fail_msg("no reference for type %u", type); return 0;
    }
}

/* Random blocks with finite fp16 scales in +-[2^-8, 2), at an odd address. */
static void random_blocks(uint32_t type, unsigned char *b, int nblocks, uint32_t seed) {
    const dz_ggml_type_info t = dz_ggml_type_describe(type);
    for (int i = 0; i < nblocks * t.block_bytes; i++) {
        seed = seed * 1664525u + 1013904223u;
        b[i] = (unsigned char)(seed >> 24);
    }
    static const struct { uint32_t type; int at[2]; } halves[] = {
        {DZ_GGML_Q4_0, {0, -1}}, {DZ_GGML_Q4_1, {0, 2}},   {DZ_GGML_Q5_0, {0, -1}},  {DZ_GGML_Q5_1, {0, 2}},
        {DZ_GGML_Q8_0, {0, -1}}, {DZ_GGML_Q2_K, {80, 82}}, {DZ_GGML_Q3_K, {108, -1}}, {DZ_GGML_Q4_K, {0, 2}},
        {DZ_GGML_Q5_K, {0, 2}},  {DZ_GGML_Q6_K, {208, -1}},
    };
    for (size_t k = 0; k < sizeof halves / sizeof halves[0]; k++)
        if (halves[k].type == type)
            for (int i = 0; i < nblocks; i++)
                for (int h = 0; h < 2; h++)
                    if (halves[k].at[h] >= 0) {
                        unsigned char *p = b + i * t.block_bytes + halves[k].at[h];
                        p[1] = (unsigned char)((p[1] & 0x80) | (0x1c + (p[1] & 0x07))); /* exponent 7..14 */
                    }
}

static void dequantizes_every_type_as_the_reference(void **s) {
    (void)s;
    const uint32_t types[] = {DZ_GGML_Q4_0, DZ_GGML_Q4_1, DZ_GGML_Q5_0, DZ_GGML_Q5_1, DZ_GGML_Q8_0,
                              DZ_GGML_Q2_K, DZ_GGML_Q3_K, DZ_GGML_Q4_K, DZ_GGML_Q5_K, DZ_GGML_Q6_K};
    enum { NB = 5 };
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
        const dz_ggml_type_info t = dz_ggml_type_describe(types[k]);
        assert_true(t.dequantizable);
        unsigned char *raw = malloc((size_t)NB * t.block_bytes + 1), *b = raw + 1;
        float *got = malloc(sizeof(float) * NB * t.block);
        for (uint32_t seed = 1; seed <= 20; seed++) {
            random_blocks(types[k], b, NB, seed * 7919u + (uint32_t)k);
            dz_ggml_dequantize(types[k], b, got, (size_t)NB * t.block);
            for (int i = 0; i < NB; i++)
                for (int e = 0; e < t.block; e++) {
                    const float want = ref_elem(types[k], b + i * t.block_bytes, e), have = got[i * t.block + e];
                    if (memcmp(&want, &have, 4) != 0)
                        fail_msg("%s block %d element %d: %.9g, reference %.9g", t.name, i, e, have, want);
                }
        }
        free(raw);
        free(got);
    }
}

/* A few values worked out by hand from the layouts. */
static void dequantizes_hand_computed_blocks(void **s) {
    (void)s;
    float y[256];
    unsigned char b[256];
    /* Q4_0: d = 0.5 (0x3800); byte 0 = 0x1f: element 0 = (15 - 8) * 0.5, element 16 = (1 - 8) * 0.5. */
    memset(b, 0x88, sizeof b);
    b[0] = 0x00, b[1] = 0x38, b[2] = 0x1f;
    dz_ggml_dequantize(DZ_GGML_Q4_0, b, y, 32);
    assert_true(y[0] == 3.5f && y[16] == -3.5f && y[1] == 0.0f);
    /* Q4_1: d = 0.5, m = -1 (0xbc00); byte 0 = 0x3a: 10 * 0.5 - 1 = 4, 3 * 0.5 - 1 = 0.5. */
    b[0] = 0x00, b[1] = 0x38, b[2] = 0x00, b[3] = 0xbc, b[4] = 0x3a;
    dz_ggml_dequantize(DZ_GGML_Q4_1, b, y, 32);
    assert_true(y[0] == 4.0f && y[16] == 0.5f);
    /* Q5_0: d = 1 (0x3c00), qh bit 0 and bit 16 set, byte 0 = 0x21: (1 + 16 - 16) = 1, (2 + 16 - 16) = 2;
     * element 1: low nibble 8, no high bit: 8 - 16 = -8. */
    memset(b, 0, sizeof b);
    b[0] = 0x00, b[1] = 0x3c, b[2] = 0x01, b[4] = 0x01, b[6] = 0x21, b[7] = 0x08;
    dz_ggml_dequantize(DZ_GGML_Q5_0, b, y, 32);
    assert_true(y[0] == 1.0f && y[16] == 2.0f && y[1] == -8.0f && y[17] == -16.0f);
    /* Q8_0: d = 0.25 (0x3400), qs[3] = -4: -1. */
    memset(b, 0, sizeof b);
    b[0] = 0x00, b[1] = 0x34, b[2 + 3] = 0xfc;
    dz_ggml_dequantize(DZ_GGML_Q8_0, b, y, 32);
    assert_true(y[3] == -1.0f && y[0] == 0.0f);
    /* Q2_K: d = 1, dmin = 1; scales[0] = 0x21 (scale 1, min 2); qs[0] = 0x03 (element 0 = 3,
     * element 32 = 0 with scales[2] = 0x00): 1 * 3 - 2 = 1 and 0. */
    memset(b, 0, sizeof b);
    b[0] = 0x21, b[16] = 0x03, b[81] = 0x3c, b[83] = 0x3c;
    dz_ggml_dequantize(DZ_GGML_Q2_K, b, y, 256);
    assert_true(y[0] == 1.0f && y[1] == -2.0f && y[32] == 0.0f);
    /* Q3_K: d = 1; scale 0 = (low 1 | top 2 << 4) - 32 = 1; qs[0] = 3: hmask bit clear: 3 - 4 = -1, set: 3. */
    memset(b, 0, sizeof b);
    b[96] = 0x01, b[104] = 0x02, b[32] = 0x03, b[109] = 0x3c;
    dz_ggml_dequantize(DZ_GGML_Q3_K, b, y, 256);
    assert_true(y[0] == -1.0f);
    b[0] = 0x01;
    dz_ggml_dequantize(DZ_GGML_Q3_K, b, y, 256);
    assert_true(y[0] == 3.0f);
    /* Q4_K: d = 1, dmin = 0.5; group 0 scale 3 min 2; qs[0] = 0x07: 3 * 7 - 0.5 * 2 = 20. Group 4:
     * scale = (byte 8 & 15) | (byte 0 >> 6) << 4 = 1 | 3 << 4 = 49 with byte 0 = 0xc3 (scale 0 still 3). */
    memset(b, 0, sizeof b);
    b[1] = 0x3c, b[3] = 0x38, b[4] = 0xc3, b[8] = 0x02, b[12] = 0x01, b[16] = 0x07, b[16 + 64] = 0x01;
    dz_ggml_dequantize(DZ_GGML_Q4_K, b, y, 256);
    assert_true(y[0] == 20.0f);
    assert_true(y[128] == 49.0f); /* group 4 element 0: quant 1, min 0 */
    /* Q6_K: d = 1; scales[0] = 2; ql[0] = 0x05, qh[0] = 0x02: (5 | 2 << 4) - 32 = 5: 2 * 5 = 10. */
    memset(b, 0, sizeof b);
    b[0] = 0x05, b[128] = 0x02, b[192] = 2, b[209] = 0x3c;
    dz_ggml_dequantize(DZ_GGML_Q6_K, b, y, 256);
    assert_true(y[0] == 10.0f && y[1] == -64.0f);
    /* F16 and BF16 through the core conversions. */
    const uint16_t h[2] = {0x3c00, 0xc000}, bf[2] = {0x3f80, 0x4040};
    dz_ggml_dequantize(DZ_GGML_F16, h, y, 2);
    assert_true(y[0] == 1.0f && y[1] == -2.0f);
    dz_ggml_dequantize(DZ_GGML_BF16, bf, y, 2);
    assert_true(y[0] == 1.0f && y[1] == 3.0f);
}

/* A file written by gguf-py (llama.cpp's writer) with one tensor per type, against
 * gguf-py's own numpy dequantization (tools/make_gguf_quants.py): bit for bit. */
static void dequantizes_as_gguf_py(void **s) {
    (void)s;
    dz_gguf g;
    dz_error err = {0};
    if (dz_gguf_open(DZ_TEST_DATA "/gguf/quants.gguf", &g, &err) != DZ_OK) fail_msg("%s", err.msg);
    assert_int_equal(g.n_tensors, 13);
    FILE *f = fopen(DZ_TEST_DATA "/gguf/quants_f32.bin", "rb");
    assert_non_null(f);
    float want[256], got[256];
    for (int i = 0; i < g.n_tensors; i++) {
        const dz_gguf_tensor *t = &g.tensors[i];
        const dz_ggml_type_info ti = dz_ggml_type_describe(t->type);
        assert_string_equal(t->name, ti.name);
        assert_int_equal(t->ne[0], 256);
        for (int64_t r = 0; r < t->nrows; r++) {
            assert_int_equal(fread(want, sizeof want, 1, f), 1);
            dz_ggml_dequantize(t->type, (const char *)t->data + (size_t)r * t->row_bytes, got, 256);
            for (int e = 0; e < 256; e++)
                if (memcmp(&want[e], &got[e], 4) != 0)
                    fail_msg("%s row %lld element %d: %.9g, gguf-py %.9g", t->name, (long long)r, e, got[e], want[e]);
        }
    }
    fclose(f);
    dz_gguf_close(&g);
}

/* Tiny random models written as llama.cpp writes them (tools/make_gguf_tiny.py), against
 * transformers' own loading of the same GGUF (its dequantization, its reverse rotary
 * permutation): llama with an untied head and Q8_0/Q5_1/Q4_0/Q4_1/Q5_0/F16/BF16 tensors,
 * qwen2 with q/k/v biases and a tied head. Both sides compute in fp32 from identical
 * weights; logits are ~4.5 at most, so 1e-4 is fp32 rounding with room to spare. */
static void tiny_model_matches_transformers(const char *name) {
    char path[1024];
    snprintf(path, sizeof path, "%s/gguf/%s.logits", DZ_TEST_DATA, name);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    int32_t tv[2], tokens[64];
    assert_int_equal(fread(tv, 4, 2, f), 2);
    assert_true(tv[0] <= 64);
    assert_int_equal(fread(tokens, 4, (size_t)tv[0], f), (size_t)tv[0]);
    float *want = malloc(sizeof(float) * (size_t)tv[0] * tv[1]), *got = malloc(sizeof(float) * (size_t)tv[0] * tv[1]);
    assert_int_equal(fread(want, sizeof(float) * tv[1], (size_t)tv[0], f), (size_t)tv[0]);
    fclose(f);
    snprintf(path, sizeof path, "%s/gguf/%s.gguf", DZ_TEST_DATA, name);
    dz_model *m;
    dz_error err = {0};
    if (dz_model_load(path, DZ_F32, &m, &err) != DZ_OK) fail_msg("%s", err.msg);
    assert_int_equal(dz_model_config(m)->vocab_size, tv[1]);
    dz_forward *fw;
    dz_weight_source w = dz_model_weights(m);
    int rows[64];
    for (int i = 0; i < tv[0]; i++) rows[i] = i;
    assert_int_equal(dz_forward_create(m, 1, tv[0], 0, &fw, &err), DZ_OK);
    assert_int_equal(dz_forward_run(fw, &w, tokens, NULL, 1, tv[0], 0, &err), DZ_OK);
    assert_int_equal(dz_forward_logits(fw, &w, rows, tv[0], got, &err), DZ_OK);
    double worst = 0;
    for (size_t i = 0; i < (size_t)tv[0] * tv[1]; i++) worst = fmax(worst, fabs((double)got[i] - want[i]));
    printf("  %-10s max |logit - transformers| %.2e\n", name, worst);
    assert_true(worst <= 1e-4);
    dz_forward_free(fw);
    dz_model_free(m);
    free(want);
    free(got);
}

static void tiny_llama_untied_mixed_quants(void **s) {
    (void)s;
    tiny_model_matches_transformers("tiny_llama");
    dz_config c;
    dz_error err = {0};
    assert_int_equal(dz_config_load(DZ_TEST_DATA "/gguf/tiny_llama.gguf", &c, &err), DZ_OK);
    assert_false(c.tied_head);
    assert_false(c.qkv_bias);
    assert_true(c.rope_theta == 5e5f);
    assert_int_equal(c.bos_id, 1);
    assert_int_equal(c.eos_id, 2);
}

static void tiny_qwen2_biases_tied(void **s) {
    (void)s;
    tiny_model_matches_transformers("tiny_qwen2");
    dz_config c;
    dz_error err = {0};
    assert_int_equal(dz_config_load(DZ_TEST_DATA "/gguf/tiny_qwen2.gguf", &c, &err), DZ_OK);
    assert_true(c.tied_head);
    assert_true(c.qkv_bias);
}

/* tiny_llama.gguf with the first occurrence of `from` replaced by `to` (same length),
 * loaded: expects code and a message holding want. */
static void expect_load_refused(const void *from, const void *to, size_t n, dz_status code, const char *want) {
    FILE *f = fopen(DZ_TEST_DATA "/gguf/tiny_llama.gguf", "rb");
    assert_non_null(f);
    buf b = {0};
    unsigned char chunk[4096];
    size_t got;
    while ((got = fread(chunk, 1, sizeof chunk, f)) > 0) put(&b, chunk, got);
    fclose(f);
    memcpy(b.p + find_bytes(&b, from, n), to, n);
    char path[512];
    assert_int_equal(dz_temp_dir_make("dz_gguf_"), 0);
    snprintf(path, sizeof path, "%s/mutated.gguf", g_dir);
    f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(b.p, 1, b.n, f), b.n);
    fclose(f);
    free(b.p);
    dz_model *m = NULL;
    dz_error err = {0};
    const dz_status st = dz_model_load(path, DZ_F32, &m, &err);
    dz_temp_dir_remove();
    if (st != code || !strstr(err.msg, want)) fail_msg("expected %d with \"%s\", got %d: %s", code, want, st, err.msg);
    assert_null(m);
}

static void loader_errors_name_the_key_or_tensor(void **s) {
    (void)s;
    expect_load_refused("\x05\0\0\0\0\0\0\0llama", "\x05\0\0\0\0\0\0\0falco", 13, DZ_ERR_UNSUPPORTED,
                        "key 'general.architecture' is \"falco\"; supported: llama (also Mistral), qwen2");
    expect_load_refused("llama.block_count", "llama.block_xount", 17, DZ_ERR_NOT_FOUND,
                        "metadata key 'llama.block_count' is missing");
    expect_load_refused("llama.attention.head_count_kv", "llama.attention.head_count_xx", 29, DZ_ERR_FORMAT,
                        "tensor 'blk.0.attn_k.weight' has ne [64, 32]"); /* KV heads default to 4: K is half that */
    /* 3 heads of a 64-wide model: named as such (it said "partial rotary embeddings") */
    expect_load_refused("llama.attention.head_count\x04\0\0\0\x04", "llama.attention.head_count\x04\0\0\0\x03", 31,
                        DZ_ERR_FORMAT, "llama.embedding_length 64 is not a multiple of llama.attention.head_count 3");
    expect_load_refused("output_norm.weight", "output_xorm.weight", 18, DZ_ERR_FORMAT,
                        "tensor 'output_norm.weight' is missing");
    /* A tensor the model does not use (here the head, renamed: the model turns tied) is refused. */
    expect_load_refused("\x0d\0\0\0\0\0\0\0output.weight", "\x0d\0\0\0\0\0\0\0outpux.weight", 21, DZ_ERR_UNSUPPORTED,
                        "tensor 'outpux.weight' is not part of a llama model");
    /* attn_norm is F32 (type 0); as I32 (26, same size) it parses but cannot be dequantized. */
    const unsigned char f32_norm[] = {'b', 'l', 'k', '.', '0', '.', 'a', 't', 't', 'n', '_', 'n', 'o', 'r', 'm', '.',
                                      'w', 'e', 'i', 'g', 'h', 't', 1, 0, 0, 0, 64, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    unsigned char i32_norm[sizeof f32_norm];
    memcpy(i32_norm, f32_norm, sizeof f32_norm);
    i32_norm[sizeof i32_norm - 4] = 26;
    expect_load_refused(f32_norm, i32_norm, sizeof f32_norm, DZ_ERR_UNSUPPORTED,
                        "tensor 'blk.0.attn_norm.weight' has type I32, which distzo does not dequantize");
}

/* ---- the real model ----------------------------------------------------------------- */

static const char *smollm_path(char *out, size_t cap) {
    test_asset_path(out, cap, "smollm2-135m/SmolLM2-135M-Instruct.Q4_1.gguf");
    return out;
}

static void real_file_metadata_and_types(void **s) {
    (void)s;
    char path[1024];
    dz_gguf g;
    dz_error err = {0};
    if (dz_gguf_open(smollm_path(path, sizeof path), &g, &err) != DZ_OK) fail_msg("%s", err.msg);
    assert_int_equal(g.version, 3);
    assert_int_equal(g.n_tensors, 272);
    int n_q41 = 0, n_q80 = 0, n_f32 = 0;
    for (int i = 0; i < g.n_tensors; i++) {
        n_q41 += g.tensors[i].type == DZ_GGML_Q4_1;
        n_q80 += g.tensors[i].type == DZ_GGML_Q8_0;
        n_f32 += g.tensors[i].type == DZ_GGML_F32;
    }
    assert_int_equal(n_q41, 210);
    assert_int_equal(n_q80, 1);
    assert_int_equal(n_f32, 61);
    assert_int_equal(dz_gguf_find_tensor(&g, "token_embd.weight")->type, DZ_GGML_Q8_0);
    const dz_gguf_kv *toks, *merges;
    assert_int_equal(dz_gguf_get_array(&g, "tokenizer.ggml.tokens", DZ_GGUF_STRING, &toks, &err), DZ_OK);
    assert_int_equal(toks->count, 49152);
    assert_int_equal(dz_gguf_get_array(&g, "tokenizer.ggml.merges", DZ_GGUF_STRING, &merges, &err), DZ_OK);
    assert_int_equal(merges->count, 48900);
    dz_gguf_str *strs = malloc(sizeof *strs * toks->count);
    dz_gguf_array_strings(toks, strs);
    assert_int_equal(strs[7042].len, 7); /* "ĠParis" (Ġ, U+0120, is 2 bytes) */
    assert_memory_equal(strs[7042].s, "\xc4\xa0Paris", 7);
    free(strs);
    dz_gguf_str pre;
    assert_int_equal(dz_gguf_get_string(&g, "tokenizer.ggml.pre", &pre, &err), DZ_OK);
    assert_int_equal(pre.len, 6);
    assert_memory_equal(pre.s, "smollm", 6);
    dz_gguf_close(&g);

    dz_config c;
    assert_int_equal(dz_config_load(path, &c, &err), DZ_OK);
    assert_int_equal(c.n_layers, 30);
    assert_int_equal(c.dim, 576);
    assert_int_equal(c.hidden_dim, 1536);
    assert_int_equal(c.n_heads, 9);
    assert_int_equal(c.n_kv_heads, 3);
    assert_int_equal(c.head_dim, 64);
    assert_int_equal(c.vocab_size, 49152);
    assert_int_equal(c.max_seq_len, 8192);
    assert_true(c.tied_head);
    assert_true(c.rope_theta == 100000.0f);
    assert_true(fabsf(c.norm_eps - 1e-5f) < 1e-12f);
}

typedef struct golden_line {
    char kind[8];
    int a, b, c;
    int vals[64];
    double fvals[64];
} golden_line;

enum { MAX_PROMPTS = 8, MAX_IDS = 64 };

typedef struct smollm_golden {
    int n_prompts, len[MAX_PROMPTS], ids[MAX_PROMPTS][MAX_IDS];
    int n_greedy, greedy[MAX_IDS];
    int n_topk, topk_prompt[32], topk_pos[32], topk_ids[32][10];
    double topk_vals[32][10];
    int n_full, full_prompt[4], full_pos[4];
    float *full;
} smollm_golden;

static void golden_read(smollm_golden *g) {
    memset(g, 0, sizeof *g);
    FILE *f = fopen(DZ_TEST_DATA "/gguf/golden.txt", "r");
    assert_non_null(f);
    char kind[16];
    while (fscanf(f, "%15s", kind) == 1) {
        int p, n, k;
        if (!strcmp(kind, "prompt")) {
            assert_int_equal(fscanf(f, "%d %d", &p, &n), 2);
            assert_true(p == g->n_prompts && n <= MAX_IDS);
            g->len[p] = n;
            for (int i = 0; i < n; i++) assert_int_equal(fscanf(f, "%d", &g->ids[p][i]), 1);
            g->n_prompts++;
        } else if (!strcmp(kind, "greedy")) {
            assert_int_equal(fscanf(f, "%d %d", &p, &g->n_greedy), 2);
            assert_int_equal(p, 0);
            for (int i = 0; i < g->n_greedy; i++) assert_int_equal(fscanf(f, "%d", &g->greedy[i]), 1);
        } else if (!strcmp(kind, "topk")) {
            const int t = g->n_topk++;
            assert_int_equal(fscanf(f, "%d %d %d", &g->topk_prompt[t], &g->topk_pos[t], &k), 3);
            assert_int_equal(k, 10);
            for (int i = 0; i < k; i++)
                assert_int_equal(fscanf(f, "%d %lf", &g->topk_ids[t][i], &g->topk_vals[t][i]), 2);
        } else if (!strcmp(kind, "full")) {
            int r;
            assert_int_equal(fscanf(f, "%d %d %d", &r, &g->full_prompt[g->n_full], &g->full_pos[g->n_full]), 3);
            assert_int_equal(r, g->n_full);
            g->n_full++;
        } else {
            fail_msg("golden.txt: unknown line kind '%s'", kind);
        }
    }
    fclose(f);
    g->full = malloc(sizeof(float) * 49152 * (size_t)g->n_full);
    f = fopen(DZ_TEST_DATA "/gguf/logits.bin", "rb");
    assert_non_null(f);
    assert_int_equal(fread(g->full, sizeof(float) * 49152, (size_t)g->n_full, f), (size_t)g->n_full);
    fclose(f);
}

/* Tolerance: distzo computes in fp32 from the same dequantized weights (dequantization is
 * exact in fp32 on both sides); the reference is float64. fp32 rounding over 30 layers
 * (K up to 1536, logits up to ~30) measures 5.7e-5 (printed below, x86 AVX-512 kernels);
 * 1e-3 leaves room for other kernels' summation orders, while a layout error (Q/K rows
 * left interleaved, a misread block) moves logits by whole units. */
static const double k_logit_tol = 1e-3;

static void real_model_logits_and_greedy_match_the_reference(void **s) {
    (void)s;
    char path[1024];
    smollm_path(path, sizeof path);
    smollm_golden g;
    golden_read(&g);
    dz_model *m;
    dz_error err = {0};
    if (dz_model_load(path, DZ_F32, &m, &err) != DZ_OK) fail_msg("%s", err.msg);
    const int V = dz_model_config(m)->vocab_size;
    dz_weight_source w = dz_model_weights(m);
    float *logits = malloc(sizeof(float) * (size_t)V * MAX_IDS);
    double worst_topk = 0, worst_full = 0;
    for (int p = 0; p < g.n_prompts; p++) {
        dz_forward *f;
        assert_int_equal(dz_forward_create(m, 1, g.len[p], 0, &f, &err), DZ_OK);
        assert_int_equal(dz_forward_run(f, &w, g.ids[p], NULL, 1, g.len[p], 0, &err), DZ_OK);
        int rows[MAX_IDS];
        for (int i = 0; i < g.len[p]; i++) rows[i] = i;
        assert_int_equal(dz_forward_logits(f, &w, rows, g.len[p], logits, &err), DZ_OK);
        for (int t = 0; t < g.n_topk; t++) {
            if (g.topk_prompt[t] != p) continue;
            const float *row = logits + (size_t)g.topk_pos[t] * V;
            for (int i = 0; i < 10; i++) {
                const double d = fabs(row[g.topk_ids[t][i]] - g.topk_vals[t][i]);
                worst_topk = d > worst_topk ? d : worst_topk;
            }
            int best = 0;
            for (int v = 1; v < V; v++) best = row[v] > row[best] ? v : best;
            assert_int_equal(best, g.topk_ids[t][0]);
        }
        for (int r = 0; r < g.n_full; r++) {
            if (g.full_prompt[r] != p) continue;
            const float *row = logits + (size_t)g.full_pos[r] * V, *ref = g.full + (size_t)r * V;
            for (int v = 0; v < V; v++) {
                const double d = fabs((double)row[v] - ref[v]);
                worst_full = d > worst_full ? d : worst_full;
            }
        }
        dz_forward_free(f);
    }
    printf("  max |logit - float64 reference|: top-10 entries %.2e, full rows %.2e (tolerance %.0e)\n", worst_topk,
           worst_full, k_logit_tol);
    assert_true(worst_topk <= k_logit_tol);
    assert_true(worst_full <= k_logit_tol);

    /* Greedy continuation of prompt 0 with the KV cache, one token at a time
     * (" Paris.\n\nThe answer is: 2018-01-22 ", as transformers gives on the same weights). */
    dz_forward *f;
    const int n0 = g.len[0], total = n0 + g.n_greedy;
    assert_int_equal(dz_forward_create(m, 1, total, 1, &f, &err), DZ_OK);
    assert_int_equal(dz_forward_run(f, &w, g.ids[0], NULL, 1, n0, 0, &err), DZ_OK);
    int last = n0 - 1;
    for (int i = 0; i < g.n_greedy; i++) {
        assert_int_equal(dz_forward_logits(f, &w, &last, 1, logits, &err), DZ_OK);
        int best = 0;
        for (int v = 1; v < V; v++) best = logits[v] > logits[best] ? v : best;
        if (best != g.greedy[i]) fail_msg("greedy token %d: %d, reference %d", i, best, g.greedy[i]);
        int len = n0 + i + 1;
        assert_int_equal(dz_forward_run(f, &w, &best, &len, 1, 1, n0 + i, &err), DZ_OK);
        last = 0;
    }
    dz_forward_free(f);
    free(logits);
    free(g.full);
    dz_model_free(m);
}

/* The loader converts to the master dtype: held as bf16, each weight is the f32 load's
 * value rounded to nearest even. */
static void real_model_in_bf16_is_the_f32_load_rounded(void **s) {
    (void)s;
    char path[1024];
    smollm_path(path, sizeof path);
    dz_model *m32, *m16;
    dz_error err = {0};
    if (dz_model_load(path, DZ_F32, &m32, &err) != DZ_OK) fail_msg("%s", err.msg);
    if (dz_model_load(path, DZ_BF16, &m16, &err) != DZ_OK) fail_msg("%s", err.msg);
    const dz_param_table *t = dz_model_params(m32);
    for (int id = 0; id < t->count; id++) {
        const size_t n = (size_t)dz_param_numel(&t->params[id]);
        const float *a = dz_model_tensor(m32, id);
        const uint16_t *b = dz_model_tensor(m16, id);
        for (size_t i = 0; i < n; i += 97)
            if (dz_f32_to_bf16(a[i]) != b[i]) fail_msg("%s element %zu differs", t->params[id].hf_name, i);
    }
    dz_model_free(m32);
    dz_model_free(m16);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(parses_a_valid_file),
        cmocka_unit_test(refuses_bad_headers),
        cmocka_unit_test(refuses_bad_metadata),
        cmocka_unit_test(refuses_bad_tensors),
        cmocka_unit_test(dequantizes_every_type_as_the_reference),
        cmocka_unit_test(dequantizes_hand_computed_blocks),
        cmocka_unit_test(dequantizes_as_gguf_py),
        cmocka_unit_test(tiny_llama_untied_mixed_quants),
        cmocka_unit_test(tiny_qwen2_biases_tied),
        cmocka_unit_test(loader_errors_name_the_key_or_tensor),
        cmocka_unit_test(real_file_metadata_and_types),
        cmocka_unit_test(real_model_logits_and_greedy_match_the_reference),
        cmocka_unit_test(real_model_in_bf16_is_the_f32_load_rounded),
    };
    return test_assets_exit(cmocka_run_group_tests(tests, NULL, NULL));
}
