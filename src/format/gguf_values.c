/* A parsed GGUF's metadata values as typed numbers, strings and arrays (gguf.h), checked
 * against the asked type and range. */
#include "format/gguf.h"

#include <inttypes.h>
#include <stdint.h>
#include <string.h>

static dz_status lookup(const dz_gguf *g, const char *key, const dz_gguf_kv **kv, dz_error *err) {
    *kv = dz_gguf_find_kv(g, key);
    return *kv ? DZ_OK : dz_fail(err, DZ_ERR_NOT_FOUND, "%s: metadata key '%s' is missing", g->path, key);
}

/* Value types as a set: TYPE(DZ_GGUF_F32) | TYPE(DZ_GGUF_F64). */
#define TYPE(t) (1u << (t))
#define INTEGER_TYPES                                                                                             \
    (TYPE(DZ_GGUF_U8) | TYPE(DZ_GGUF_I8) | TYPE(DZ_GGUF_U16) | TYPE(DZ_GGUF_I16) | TYPE(DZ_GGUF_U32) |           \
     TYPE(DZ_GGUF_I32) | TYPE(DZ_GGUF_U64) | TYPE(DZ_GGUF_I64))

/* key's value when its type is in types, else an error saying it should be `expected`. */
static dz_status lookup_as(const dz_gguf *g, const char *key, unsigned types, const char *expected,
                           const dz_gguf_kv **kv, dz_error *err) {
    dz_status st = lookup(g, key, kv, err);
    if (st == DZ_OK && !((unsigned)(*kv)->type < 32 && (TYPE((*kv)->type) & types)))
        st = dz_fail(err, DZ_ERR_FORMAT, "%s: metadata key '%s' is a %s, expected %s", g->path, key,
                     dz_gguf_vtype_name((*kv)->type), expected);
    return st;
}

static int is_signed(dz_gguf_vtype t) {
    return t == DZ_GGUF_I8 || t == DZ_GGUF_I16 || t == DZ_GGUF_I32 || t == DZ_GGUF_I64;
}

/* An integer value as sign + magnitude, so every type compares against any range. */
static void integer_value(dz_gguf_vtype t, const unsigned char *p, int *negative, uint64_t *magnitude) {
    const int n = (int)dz_gguf_scalar_size(t);
    uint64_t u = dz_gguf_le(p, n);
    *negative = 0;
    if (is_signed(t) && n < 8 && (u >> (8 * n - 1)) & 1) u |= ~0ull << (8 * n); /* sign-extend */
    if (is_signed(t) && (int64_t)u < 0) {
        *negative = 1;
        u = 0 - u;
    }
    *magnitude = u;
}

static dz_status get_integer(const dz_gguf *g, const char *key, int64_t lo, uint64_t hi, int64_t *out, dz_error *err) {
    const dz_gguf_kv *kv;
    dz_status st = lookup_as(g, key, INTEGER_TYPES, "an integer", &kv, err);
    if (st != DZ_OK) return st;
    int neg;
    uint64_t mag;
    integer_value(kv->type, kv->data, &neg, &mag);
    if (neg ? mag > (uint64_t)(-(lo + 1)) + 1 : mag > hi)
        return dz_fail(err, DZ_ERR_FORMAT, "%s: metadata key '%s' = %s%" PRIu64 " is out of range [%" PRId64 ", %" PRIu64 "]",
                       g->path, key, neg ? "-" : "", mag, lo, hi);
    *out = neg ? (int64_t)(0 - mag) : (int64_t)mag;
    return DZ_OK;
}

dz_status dz_gguf_get_u32(const dz_gguf *g, const char *key, uint32_t *out, dz_error *err) {
    int64_t v = 0;
    dz_status st = get_integer(g, key, 0, UINT32_MAX, &v, err);
    if (st == DZ_OK) *out = (uint32_t)v;
    return st;
}

dz_status dz_gguf_get_i32(const dz_gguf *g, const char *key, int32_t *out, dz_error *err) {
    int64_t v = 0;
    dz_status st = get_integer(g, key, INT32_MIN, INT32_MAX, &v, err);
    if (st == DZ_OK) *out = (int32_t)v;
    return st;
}

static double float_value(dz_gguf_vtype t, const unsigned char *p) {
    if (t == DZ_GGUF_F32) {
        const uint32_t u = (uint32_t)dz_gguf_le(p, 4);
        float f;
        memcpy(&f, &u, 4);
        return f;
    }
    const uint64_t u = dz_gguf_le(p, 8);
    double d;
    memcpy(&d, &u, 8);
    return d;
}

dz_status dz_gguf_get_f32(const dz_gguf *g, const char *key, float *out, dz_error *err) {
    const dz_gguf_kv *kv;
    dz_status st = lookup_as(g, key, TYPE(DZ_GGUF_F32) | TYPE(DZ_GGUF_F64), "a float", &kv, err);
    if (st == DZ_OK) *out = (float)float_value(kv->type, kv->data);
    return st;
}

dz_status dz_gguf_get_bool(const dz_gguf *g, const char *key, int *out, dz_error *err) {
    const dz_gguf_kv *kv;
    dz_status st = lookup_as(g, key, TYPE(DZ_GGUF_BOOL), "a bool", &kv, err);
    if (st == DZ_OK) *out = kv->data[0] != 0;
    return st;
}

dz_status dz_gguf_get_string(const dz_gguf *g, const char *key, dz_gguf_str *out, dz_error *err) {
    const dz_gguf_kv *kv;
    dz_status st = lookup_as(g, key, TYPE(DZ_GGUF_STRING), "a string", &kv, err);
    if (st == DZ_OK) *out = kv->str;
    return st;
}

dz_status dz_gguf_get_array(const dz_gguf *g, const char *key, int elem, const dz_gguf_kv **out, dz_error *err) {
    dz_status st = lookup_as(g, key, TYPE(DZ_GGUF_ARRAY), "an array", out, err);
    if (st != DZ_OK) return st;
    if (elem >= 0 && (int)(*out)->elem_type != elem)
        return dz_fail(err, DZ_ERR_FORMAT, "%s: metadata key '%s' is an array of %s, expected an array of %s", g->path,
                       key, dz_gguf_vtype_name((*out)->elem_type), dz_gguf_vtype_name((dz_gguf_vtype)elem));
    return DZ_OK;
}

void dz_gguf_array_strings(const dz_gguf_kv *kv, dz_gguf_str *out) {
    const unsigned char *p = kv->data; /* validated by the parser: every string is inside the file */
    for (uint64_t i = 0; i < kv->count; i++) {
        out[i].len = dz_gguf_le(p, 8);
        out[i].s = (const char *)p + 8;
        p += 8 + out[i].len;
    }
}

double dz_gguf_array_number(const dz_gguf_kv *kv, uint64_t i) {
    const size_t n = dz_gguf_scalar_size(kv->elem_type);
    const unsigned char *p = kv->data + i * n;
    if (kv->elem_type == DZ_GGUF_F32 || kv->elem_type == DZ_GGUF_F64) return float_value(kv->elem_type, p);
    if (kv->elem_type == DZ_GGUF_BOOL) return p[0] != 0;
    int neg;
    uint64_t mag;
    integer_value(kv->elem_type, p, &neg, &mag);
    return neg ? -(double)mag : (double)mag;
}
