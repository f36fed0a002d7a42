/* libFuzzer target for the GGUF parser. Beyond "does not crash", it checks the parser's
 * promises: every tensor's bytes lie inside the input (ASan sees each one read, and each
 * is dequantized when its type allows), sizes match shapes, lookups find every key and
 * tensor, and string arrays walk inside the input. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "format/gguf.h"

static volatile float g_sink; /* keeps the reads from being optimized out */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    dz_gguf g;
    dz_error err;
    if (dz_gguf_parse("fuzz.gguf", data, size, &g, &err) != DZ_OK) {
        if (g.n_tensors != 0 || g.tensors || g.kv || g.path) abort(); /* failure leaves *out empty */
        return 0;
    }
    float sum = 0.0f, row[1024];
    for (int i = 0; i < g.n_tensors; i++) {
        const dz_gguf_tensor *t = &g.tensors[i];
        if (t->row_bytes * (size_t)t->nrows != t->nbytes) abort();
        const uint8_t *p = t->data;
        if (t->nbytes && (p < data || p + t->nbytes > data + size)) abort();
        if (dz_gguf_find_tensor(&g, t->name) != t) abort();
        const dz_ggml_type_info ti = dz_ggml_type_describe(t->type);
        if (ti.dequantizable && t->ne[0] <= 1024)
            for (int64_t r = 0; r < t->nrows && r < 64; r++) {
                dz_ggml_dequantize(t->type, p + (size_t)r * t->row_bytes, row, (size_t)t->ne[0]);
                for (int64_t k = 0; k < t->ne[0]; k++) sum += row[k];
            }
        else
            for (size_t k = 0; k < t->nbytes; k++) sum += p[k];
    }
    for (int i = 0; i < g.n_kv; i++) {
        const dz_gguf_kv *kv = &g.kv[i];
        if (dz_gguf_find_kv(&g, kv->key) != kv) abort();
        if (kv->type == DZ_GGUF_ARRAY && kv->elem_type == DZ_GGUF_STRING && kv->count <= 4096) {
            dz_gguf_str *s = malloc(sizeof *s * (kv->count + 1));
            dz_gguf_array_strings(kv, s);
            for (uint64_t k = 0; k < kv->count; k++) {
                if (s[k].len && ((const uint8_t *)s[k].s < data || (const uint8_t *)s[k].s + s[k].len > data + size))
                    abort();
                if (s[k].len) sum += (float)(unsigned char)s[k].s[s[k].len - 1];
            }
            free(s);
        } else if (kv->type == DZ_GGUF_ARRAY && kv->elem_type != DZ_GGUF_STRING && kv->count) {
            sum += (float)dz_gguf_array_number(kv, kv->count - 1);
        }
        uint32_t u;
        int32_t v;
        float f;
        dz_gguf_str str;
        if (dz_gguf_get_u32(&g, kv->key, &u, &err) == DZ_OK) sum += (float)u;
        if (dz_gguf_get_i32(&g, kv->key, &v, &err) == DZ_OK) sum += (float)v;
        if (dz_gguf_get_f32(&g, kv->key, &f, &err) == DZ_OK) sum += f;
        if (dz_gguf_get_string(&g, kv->key, &str, &err) == DZ_OK && str.len) sum += (float)str.s[str.len - 1];
    }
    g_sink = sum;
    dz_gguf_close(&g);
    return 0;
}
