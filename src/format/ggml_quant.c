/* ggml block types into fp32. Each block is read byte by byte (blocks in a GGUF file are
 * packed, so 16-bit fields may sit at odd addresses); the float arithmetic is in ggml's
 * order (scale * quant, then +/- the min), which -ffp-contract=off keeps unfused, so a
 * value equals what ggml's reference dequantization gives, bit for bit. The block and the
 * output never overlap (restrict): without it a char read may alias a float store and the
 * loops stay scalar (Q4_1 ran at half the speed; a base kept quantized dequantizes on
 * every forward). */
#include "format/ggml_quant.h"

#include <math.h>
#include <string.h>

#include "distzo/dtype.h"

enum { QK = 32, QK_K = 256 };

static const struct {
    uint32_t type;
    dz_ggml_type_info info;
} k_types[] = {
    {DZ_GGML_F32, {"F32", 1, 4, 1}},       {DZ_GGML_F16, {"F16", 1, 2, 1}},
    {DZ_GGML_BF16, {"BF16", 1, 2, 1}},     {DZ_GGML_Q4_0, {"Q4_0", QK, 18, 1}},
    {DZ_GGML_Q4_1, {"Q4_1", QK, 20, 1}},   {DZ_GGML_Q5_0, {"Q5_0", QK, 22, 1}},
    {DZ_GGML_Q5_1, {"Q5_1", QK, 24, 1}},   {DZ_GGML_Q8_0, {"Q8_0", QK, 34, 1}},
    {DZ_GGML_Q8_1, {"Q8_1", QK, 36, 0}},   {DZ_GGML_Q2_K, {"Q2_K", QK_K, 84, 1}},
    {DZ_GGML_Q3_K, {"Q3_K", QK_K, 110, 1}}, {DZ_GGML_Q4_K, {"Q4_K", QK_K, 144, 1}},
    {DZ_GGML_Q5_K, {"Q5_K", QK_K, 176, 1}}, {DZ_GGML_Q6_K, {"Q6_K", QK_K, 210, 1}},
    {DZ_GGML_Q8_K, {"Q8_K", QK_K, 292, 0}}, {DZ_GGML_I8, {"I8", 1, 1, 0}},
    {DZ_GGML_I16, {"I16", 1, 2, 0}},       {DZ_GGML_I32, {"I32", 1, 4, 0}},
    {DZ_GGML_I64, {"I64", 1, 8, 0}},       {DZ_GGML_F64, {"F64", 1, 8, 0}},
    /* Known to ggml, layouts not carried here: named in messages, refused by the parser. */
    {16, {"IQ2_XXS", QK_K, 0, 0}}, {17, {"IQ2_XS", QK_K, 0, 0}}, {18, {"IQ3_XXS", QK_K, 0, 0}},
    {19, {"IQ1_S", QK_K, 0, 0}},   {20, {"IQ4_NL", QK, 0, 0}},    {21, {"IQ3_S", QK_K, 0, 0}},
    {22, {"IQ2_S", QK_K, 0, 0}},   {23, {"IQ4_XS", QK_K, 0, 0}},  {29, {"IQ1_M", QK_K, 0, 0}},
    {34, {"TQ1_0", QK_K, 0, 0}},   {35, {"TQ2_0", QK_K, 0, 0}},   {39, {"MXFP4", QK, 0, 0}},
};

dz_ggml_type_info dz_ggml_type_describe(uint32_t type) {
    for (size_t i = 0; i < sizeof k_types / sizeof k_types[0]; i++)
        if (k_types[i].type == type) return k_types[i].info;
    const dz_ggml_type_info unknown = {"unknown", 1, 0, 0};
    return unknown;
}

static float half_at(const unsigned char *p) { return dz_f16_to_f32((uint16_t)(p[0] | p[1] << 8)); }

/* Q4_0 / Q4_1: byte j holds element j (low nibble) and element j + 16 (high nibble). */
static void q4(const unsigned char *restrict b, float *restrict y, int has_min) {
    const float d = half_at(b), m = has_min ? half_at(b + 2) : 0.0f;
    const unsigned char *qs = b + (has_min ? 4 : 2);
    for (int j = 0; j < QK / 2; j++) {
        if (has_min) {
            y[j] = (float)(qs[j] & 0xF) * d + m;
            y[j + QK / 2] = (float)(qs[j] >> 4) * d + m;
        } else {
            y[j] = (float)((qs[j] & 0xF) - 8) * d;
            y[j + QK / 2] = (float)((qs[j] >> 4) - 8) * d;
        }
    }
}

/* Q5_0 / Q5_1: as Q4, with element e's fifth bit at bit e of a 32-bit little-endian word. */
static void q5(const unsigned char *restrict b, float *restrict y, int has_min) {
    const float d = half_at(b), m = has_min ? half_at(b + 2) : 0.0f;
    const unsigned char *hb = b + (has_min ? 4 : 2), *qs = hb + 4;
    const uint32_t high = (uint32_t)hb[0] | (uint32_t)hb[1] << 8 | (uint32_t)hb[2] << 16 | (uint32_t)hb[3] << 24;
    for (int j = 0; j < QK / 2; j++) {
        const int lo = (qs[j] & 0xF) | (int)((high >> j) & 1) << 4;
        const int hi = (qs[j] >> 4) | (int)((high >> (j + QK / 2)) & 1) << 4;
        if (has_min) {
            y[j] = (float)lo * d + m;
            y[j + QK / 2] = (float)hi * d + m;
        } else {
            y[j] = (float)(lo - 16) * d;
            y[j + QK / 2] = (float)(hi - 16) * d;
        }
    }
}

static void q8_0(const unsigned char *restrict b, float *restrict y) {
    const float d = half_at(b);
    for (int j = 0; j < QK; j++) y[j] = (float)(int8_t)b[2 + j] * d;
}

/* Q2_K: 16 groups of 16, each with a 4-bit scale (low nibble) and 4-bit min (high).
 * Each half of 128 elements reads 32 bytes of quants four times, 2 bits further each time. */
static void q2_k(const unsigned char *restrict b, float *restrict y) {
    const unsigned char *scales = b, *qs = b + 16;
    const float d = half_at(b + 80), dmin = half_at(b + 82);
    int group = 0;
    for (int half = 0; half < 2; half++, qs += 32)
        for (int shift = 0; shift < 8; shift += 2)
            for (int sub = 0; sub < 2; sub++, group++) {
                const float dl = d * (float)(scales[group] & 0xF), ml = dmin * (float)(scales[group] >> 4);
                for (int l = 0; l < 16; l++) *y++ = dl * (float)((qs[16 * sub + l] >> shift) & 3) - ml;
            }
}

/* Q3_K's 16 6-bit scales: low 4 bits from bytes 0-7 (low nibbles first, then high), the top
 * 2 bits from bytes 8-11 (scale s uses byte 8 + s % 4, bits 2 * (s / 4)). */
static int q3_k_scale(const unsigned char *sc, int s) {
    const int low = s < 8 ? sc[s] & 0xF : sc[s - 8] >> 4;
    const int top = (sc[8 + s % 4] >> (2 * (s / 4))) & 3;
    return (low | top << 4) - 32;
}

/* Q3_K: 2 low bits as Q2_K; the third bit from hmask (one bit plane per 32 elements),
 * a cleared bit meaning "minus 4". */
static void q3_k(const unsigned char *restrict b, float *restrict y) {
    const unsigned char *hmask = b, *qs = b + 32, *sc = b + 96;
    const float d = half_at(b + 108);
    int group = 0, plane = 0;
    for (int half = 0; half < 2; half++, qs += 32)
        for (int shift = 0; shift < 8; shift += 2, plane++)
            for (int sub = 0; sub < 2; sub++, group++) {
                const float dl = d * (float)q3_k_scale(sc, group);
                for (int l = 0; l < 16; l++) {
                    const int q = (qs[16 * sub + l] >> shift) & 3;
                    const int minus = (hmask[16 * sub + l] >> plane) & 1 ? 0 : 4;
                    *y++ = dl * (float)(q - minus);
                }
            }
}

/* Q4_K / Q5_K: 8 groups of 32 with 6-bit scale and min packed in 12 bytes: groups 0-3 in the
 * low 6 bits of bytes 0-3 (scale) and 4-7 (min); groups 4-7 take 4 bits from bytes 8-11 and
 * their top 2 from the spare top bits of bytes 0-3 (scale) and 4-7 (min). */
static void k_scale_min(const unsigned char *sc, int g, float d, float dmin, float *scale, float *min) {
    int s, m;
    if (g < 4) {
        s = sc[g] & 63;
        m = sc[g + 4] & 63;
    } else {
        s = (sc[g + 4] & 0xF) | (sc[g - 4] >> 6) << 4;
        m = (sc[g + 4] >> 4) | (sc[g] >> 6) << 4;
    }
    *scale = d * (float)s;
    *min = dmin * (float)m;
}

/* Q4_K (high == NULL) and Q5_K: each 32 bytes of nibbles give two groups (low nibbles, then
 * high); Q5_K's fifth bit of element l of group g is bit g of high[l]. */
static void q45_k(const unsigned char *restrict b, float *restrict y, const unsigned char *restrict high,
                  const unsigned char *restrict qs) {
    const float d = half_at(b), dmin = half_at(b + 2);
    const unsigned char *sc = b + 4;
    for (int g = 0; g < 8; g += 2, qs += 32)
        for (int nib = 0; nib < 2; nib++) {
            float scale, min;
            k_scale_min(sc, g + nib, d, dmin, &scale, &min);
            for (int l = 0; l < 32; l++) {
                int q = nib ? qs[l] >> 4 : qs[l] & 0xF;
                if (high && (high[l] >> (g + nib)) & 1) q += 16;
                *y++ = scale * (float)q - min;
            }
        }
}

/* Q6_K: per half of 128, 64 bytes of low nibbles and 32 of 2-bit highs; four runs of 32
 * (low nibbles of bytes 0-31, of 32-63, high nibbles of 0-31, of 32-63) take high bits
 * 0-1, 2-3, 4-5, 6-7; an 8-bit scale per 16 elements. */
static void q6_k(const unsigned char *restrict b, float *restrict y) {
    const unsigned char *ql = b, *qh = b + 128;
    const int8_t *sc = (const int8_t *)(b + 192);
    const float d = half_at(b + 208);
    for (int half = 0; half < 2; half++, ql += 64, qh += 32, sc += 8, y += 128)
        for (int run = 0; run < 4; run++)
            for (int l = 0; l < 32; l++) {
                const unsigned char lowbyte = ql[l + 32 * (run & 1)];
                const int low = run < 2 ? lowbyte & 0xF : lowbyte >> 4;
                const int q = (low | ((qh[l] >> (2 * run)) & 3) << 4) - 32;
                y[32 * run + l] = d * (float)sc[l / 16 + 2 * run] * (float)q;
            }
}

void dz_ggml_dequantize(uint32_t type, const void *src, float *dst, size_t n) {
    const unsigned char *b = src;
    switch (type) {
    case DZ_GGML_F32: memcpy(dst, src, n * 4); return;
    case DZ_GGML_F16: dz_to_f32(dst, src, DZ_F16, n); return;
    case DZ_GGML_BF16: dz_to_f32(dst, src, DZ_BF16, n); return;
    default: break;
    }
    const dz_ggml_type_info t = dz_ggml_type_describe(type);
    for (size_t i = 0; i < n / (size_t)t.block; i++, b += t.block_bytes, dst += t.block) {
        switch (type) {
        case DZ_GGML_Q4_0: q4(b, dst, 0); break;
        case DZ_GGML_Q4_1: q4(b, dst, 1); break;
        case DZ_GGML_Q5_0: q5(b, dst, 0); break;
        case DZ_GGML_Q5_1: q5(b, dst, 1); break;
        case DZ_GGML_Q8_0: q8_0(b, dst); break;
        case DZ_GGML_Q2_K: q2_k(b, dst); break;
        case DZ_GGML_Q3_K: q3_k(b, dst); break;
        case DZ_GGML_Q4_K: q45_k(b, dst, NULL, b + 16); break;
        case DZ_GGML_Q5_K: q45_k(b, dst, b + 16, b + 48); break;
        case DZ_GGML_Q6_K: q6_k(b, dst); break;
        default: return; /* callers check dequantizable first */
        }
    }
}

int dz_ggml_quantizable(uint32_t type) {
    return type == DZ_GGML_F32 || type == DZ_GGML_F16 || type == DZ_GGML_BF16 || type == DZ_GGML_Q8_0;
}

static void put_half(unsigned char *p, uint16_t h) {
    p[0] = (unsigned char)(h & 0xFF);
    p[1] = (unsigned char)(h >> 8);
}

static void quantize_q8_0(const float *x, unsigned char *b) {
    float amax = 0.0f;
    for (int j = 0; j < QK; j++) amax = amax > fabsf(x[j]) ? amax : fabsf(x[j]); /* ggml's MAX() */
    const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    put_half(b, dz_f32_to_f16(d));
    for (int j = 0; j < QK; j++) b[2 + j] = (unsigned char)(int8_t)roundf(x[j] * id);
}

void dz_ggml_quantize(uint32_t type, const float *src, void *dst, size_t n) {
    unsigned char *b = dst;
    switch (type) {
    case DZ_GGML_F32: memcpy(dst, src, n * 4); return;
    case DZ_GGML_F16: dz_from_f32(dst, DZ_F16, src, n); return;
    case DZ_GGML_BF16: dz_from_f32(dst, DZ_BF16, src, n); return;
    case DZ_GGML_Q8_0:
        for (size_t i = 0; i < n / QK; i++) quantize_q8_0(src + i * QK, b + i * 34);
        return;
    default: return; /* callers check dz_ggml_quantizable first */
    }
}
