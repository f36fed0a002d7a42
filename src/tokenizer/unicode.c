#include "tokenizer/unicode.h"

dz_uni_class dz_uni_class_of(uint32_t cp) {
    int lo = 0, hi = dz_uni_range_count - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (cp < dz_uni_ranges[mid].lo) hi = mid - 1;
        else if (cp > dz_uni_ranges[mid].hi) lo = mid + 1;
        else return (dz_uni_class)dz_uni_ranges[mid].cls;
    }
    return DZ_UNI_OTHER;
}

int32_t dz_utf8_decode(const uint8_t *s, size_t n, int *len) {
    uint8_t b = s[0];
    *len = 1;
    if (b < 0x80) return b;
    int need;
    uint32_t cp, min;
    if ((b & 0xE0) == 0xC0) need = 1, cp = b & 0x1F, min = 0x80;
    else if ((b & 0xF0) == 0xE0) need = 2, cp = b & 0x0F, min = 0x800;
    else if ((b & 0xF8) == 0xF0) need = 3, cp = b & 0x07, min = 0x10000;
    else return -1;
    if ((size_t)need >= n) return -1;
    for (int i = 1; i <= need; i++) {
        if ((s[i] & 0xC0) != 0x80) return -1;
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return -1;
    *len = need + 1;
    return (int32_t)cp;
}

int dz_utf8_encode(uint32_t cp, char *out) {
    uint8_t *o = (uint8_t *)out;
    if (cp < 0x80) {
        o[0] = (uint8_t)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (uint8_t)(0xC0 | (cp >> 6));
        o[1] = (uint8_t)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (uint8_t)(0xE0 | (cp >> 12));
        o[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (uint8_t)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (uint8_t)(0xF0 | (cp >> 18));
    o[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (uint8_t)(0x80 | (cp & 0x3F));
    return 4;
}
