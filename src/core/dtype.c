#include "distzo/dtype.h"

#include <math.h>
#include <string.h>
#include <strings.h>

size_t dz_dtype_size(dz_dtype t) { return t == DZ_F32 ? 4 : 2; }

const char *dz_dtype_name(dz_dtype t) {
    switch (t) {
    case DZ_F32: return "F32";
    case DZ_F16: return "F16";
    case DZ_BF16: return "BF16";
    }
    return "?";
}

int dz_dtype_parse(const char *s, dz_dtype *out) {
    if (!s || !out) return -1;
    if (!strcasecmp(s, "F32") || !strcasecmp(s, "fp32") || !strcasecmp(s, "float32")) *out = DZ_F32;
    else if (!strcasecmp(s, "BF16") || !strcasecmp(s, "bfloat16")) *out = DZ_BF16;
    else if (!strcasecmp(s, "F16") || !strcasecmp(s, "fp16") || !strcasecmp(s, "float16")) *out = DZ_F16;
    else return -1;
    return 0;
}

static uint32_t f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float bits_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

float dz_bf16_to_f32(uint16_t h) { return bits_f32((uint32_t)h << 16); }

uint16_t dz_f32_to_bf16(float f) {
    uint32_t u = f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

float dz_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
    if (exp == 0x1f) return bits_f32(sign | 0x7f800000u | (man << 13));
    if (exp == 0) {
        float v = ldexpf((float)man, -24); /* subnormal (or zero) */
        return sign ? -v : v;
    }
    return bits_f32(sign | ((exp + 112u) << 23) | (man << 13));
}

uint16_t dz_f32_to_f16(float f) {
    uint32_t u = f32_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return sign | 0x7e00u;
    if (a >= 0x477ff000u) return sign | 0x7c00u; /* rounds to >= 65520: inf */
    if (a < 0x38800000u) {                       /* below the smallest normal: subnormal */
        float v = bits_f32(a) * 16777216.0f;     /* exact scale by 2^24 */
        return sign | (uint16_t)lrintf(v);       /* lrintf rounds to nearest even */
    }
    uint32_t r = a + 0xfffu + ((a >> 13) & 1u);
    return sign | (uint16_t)((r >> 13) - (112u << 10));
}

/* 16-bit values go through memcpy: a tensor in a file from another writer may start at
 * an odd offset, and a misaligned uint16_t load is undefined behaviour. */
static uint16_t load16(const void *p, size_t i) {
    uint16_t v;
    memcpy(&v, (const char *)p + 2 * i, 2);
    return v;
}

static void store16(void *p, size_t i, uint16_t v) { memcpy((char *)p + 2 * i, &v, 2); }

void dz_to_f32(float *dst, const void *src, dz_dtype t, size_t n) {
    if (t == DZ_F32) {
        memcpy(dst, src, n * 4);
    } else if (t == DZ_BF16) {
        for (size_t i = 0; i < n; i++) dst[i] = dz_bf16_to_f32(load16(src, i));
    } else {
        for (size_t i = 0; i < n; i++) dst[i] = dz_f16_to_f32(load16(src, i));
    }
}

void dz_from_f32(void *dst, dz_dtype t, const float *src, size_t n) {
    if (t == DZ_F32) {
        memcpy(dst, src, n * 4);
    } else if (t == DZ_BF16) {
        for (size_t i = 0; i < n; i++) store16(dst, i, dz_f32_to_bf16(src[i]));
    } else {
        for (size_t i = 0; i < n; i++) store16(dst, i, dz_f32_to_f16(src[i]));
    }
}
