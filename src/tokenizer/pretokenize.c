/* The pre-tokenizer patterns as matchers: at position i each tries the pattern's
 * alternatives in order, as a backtracking regex engine would, and returns where the first
 * one that matches ends (the patterns match every character, so a match always starts at i). */
#include <string.h>

#include "tokenizer/pretokenize.h"
#include "tokenizer/unicode.h"

static const char *const regex_text[] = {
    [DZ_PATTERN_GPT2] = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+",
    [DZ_PATTERN_LLAMA3] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
                          "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    [DZ_PATTERN_QWEN2] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
                         "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
};

int dz_pattern_from_regex(const char *re, dz_pattern *out) {
    for (int p = 0; p < (int)(sizeof regex_text / sizeof regex_text[0]); p++)
        if (!strcmp(re, regex_text[p])) {
            *out = (dz_pattern)p;
            return 0;
        }
    return -1;
}

const char *dz_pattern_regex(dz_pattern p) { return regex_text[p]; }

int dz_pretok_from_gguf_name(const char *name, dz_pretok *out) {
    *out = (dz_pretok){DZ_PATTERN_GPT2, 0, 0};
    if (!strcmp(name, "gpt2")) return 0;
    if (!strcmp(name, "smollm")) return out->split_digits = 1, 0; /* llama.cpp: "\p{N}" then GPT-2's */
    if (!strcmp(name, "llama-bpe") || !strcmp(name, "llama3")) return out->pattern = DZ_PATTERN_LLAMA3, 0;
    if (!strcmp(name, "qwen2")) return out->pattern = DZ_PATTERN_QWEN2, 0;
    return -1;
}

static dz_uni_class class_at(const uint8_t *s, size_t n, size_t i, int *len) {
    uint8_t b = s[i];
    if (b < 0x80) {
        *len = 1;
        if ((b | 0x20) >= 'a' && (b | 0x20) <= 'z') return DZ_UNI_LETTER;
        if (b >= '0' && b <= '9') return DZ_UNI_NUMBER;
        if (b == ' ' || (b >= '\t' && b <= '\r')) return DZ_UNI_SPACE;
        return DZ_UNI_OTHER;
    }
    int32_t cp = dz_utf8_decode(s + i, n - i, len);
    return cp < 0 ? DZ_UNI_OTHER : dz_uni_class_of((uint32_t)cp);
}

static size_t run_end(const uint8_t *s, size_t n, size_t j, dz_uni_class cls) {
    int len;
    while (j < n && class_at(s, n, j, &len) == cls) j += (size_t)len;
    return j;
}

/* \s+(?!\S)|\s+ at a whitespace char i: the run, less its last char when a non-space
 * follows and the run has more than one char (that char then joins the next pre-token). */
static size_t space_run_end(const uint8_t *s, size_t n, size_t i) {
    int len;
    class_at(s, n, i, &len);
    size_t last = i, j = i + (size_t)len;
    while (j < n && class_at(s, n, j, &len) == DZ_UNI_SPACE) last = j, j += (size_t)len;
    return (j == n || last == i) ? j : last;
}

/* GPT-2's pattern (alternatives tried in order at i, each quantifier greedy). */
static size_t gpt2_end(const uint8_t *s, size_t n, size_t i) {
    if (s[i] == '\'' && i + 1 < n) {
        uint8_t a = s[i + 1], b = i + 2 < n ? s[i + 2] : 0;
        if (a == 's' || a == 't' || a == 'm' || a == 'd') return i + 2;
        if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return i + 3;
    }
    int len;
    size_t start = i;
    dz_uni_class cls = class_at(s, n, i, &len);
    if (s[i] == ' ' && i + 1 < n) { /* " ?" joins a following letter/number/other run */
        int len1;
        dz_uni_class next = class_at(s, n, i + 1, &len1);
        if (next != DZ_UNI_SPACE) start = i + 1, cls = next, len = len1;
    }
    if (cls != DZ_UNI_SPACE) return run_end(s, n, start + (size_t)len, cls);
    return space_run_end(s, n, i);
}

/* One letter of a case-insensitive contraction at s[j]: its ASCII lower case (or 's' for
 * U+017F LATIN SMALL LETTER LONG S, which Unicode case folding maps to s), 0 if none. */
static int folded_letter(const uint8_t *s, size_t n, size_t j, int *len) {
    *len = 1;
    if (j >= n) return 0;
    if (s[j] == 0xC5 && j + 1 < n && s[j + 1] == 0xBF) return *len = 2, 's';
    return s[j] < 0x80 ? (s[j] | 0x20) : 0;
}

/* (?i:'s|'t|'re|'ve|'m|'ll|'d): its end, or 0. */
static size_t contraction_end(const uint8_t *s, size_t n, size_t i) {
    if (s[i] != '\'') return 0;
    int la, lb;
    int a = folded_letter(s, n, i + 1, &la), b = folded_letter(s, n, i + 1 + (size_t)la, &lb);
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return i + 1 + (size_t)la;
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return i + 1 + (size_t)(la + lb);
    return 0;
}

static int is_crlf(uint8_t b) { return b == '\r' || b == '\n'; }

/* Llama-3's pattern (max_digits 3) and Qwen2's (max_digits 1). */
static size_t llama3_end(const uint8_t *s, size_t n, size_t i, int max_digits) {
    size_t e = contraction_end(s, n, i);
    if (e) return e;
    int len, len1;
    dz_uni_class cls = class_at(s, n, i, &len);
    /* [^\r\n\p{L}\p{N}]?\p{L}+ */
    if (cls == DZ_UNI_LETTER) return run_end(s, n, i, DZ_UNI_LETTER);
    if (cls != DZ_UNI_NUMBER && !is_crlf(s[i]) && i + (size_t)len < n &&
        class_at(s, n, i + (size_t)len, &len1) == DZ_UNI_LETTER)
        return run_end(s, n, i + (size_t)len, DZ_UNI_LETTER);
    /* \p{N}{1,max_digits} */
    if (cls == DZ_UNI_NUMBER) {
        size_t j = i;
        for (int k = 0; k < max_digits && j < n && class_at(s, n, j, &len) == DZ_UNI_NUMBER; k++) j += (size_t)len;
        return j;
    }
    /*  ?[^\s\p{L}\p{N}]+[\r\n]* */
    size_t start = i;
    if (s[i] == ' ' && i + 1 < n && class_at(s, n, i + 1, &len1) == DZ_UNI_OTHER) start = i + 1;
    if (start > i || cls == DZ_UNI_OTHER) {
        size_t j = run_end(s, n, start, DZ_UNI_OTHER);
        while (j < n && is_crlf(s[j])) j++;
        return j;
    }
    /* \s*[\r\n]+ : the whitespace run up to and including its last \r or \n */
    size_t run = run_end(s, n, i, DZ_UNI_SPACE), last_crlf = 0;
    int found = 0;
    for (size_t j = i; j < run; j++)
        if (is_crlf(s[j])) last_crlf = j, found = 1;
    if (found) return last_crlf + 1;
    return space_run_end(s, n, i);
}

size_t dz_pretoken_end(dz_pattern p, const uint8_t *s, size_t n, size_t i) {
    switch (p) {
    case DZ_PATTERN_LLAMA3: return llama3_end(s, n, i, 3);
    case DZ_PATTERN_QWEN2: return llama3_end(s, n, i, 1);
    case DZ_PATTERN_GPT2: break;
    }
    return gpt2_end(s, n, i);
}

size_t dz_digit_piece_end(const uint8_t *s, size_t n, size_t i) {
    int len;
    if (class_at(s, n, i, &len) == DZ_UNI_NUMBER) return i + (size_t)len;
    size_t j = i + (size_t)len;
    while (j < n && class_at(s, n, j, &len) != DZ_UNI_NUMBER) j += (size_t)len;
    return j;
}
