/* libFuzzer target for the safetensors parser. Beyond "does not crash", it checks the
 * parser's promises: every tensor's bytes lie inside the input (ASan sees each one read),
 * sizes match shapes, names are sorted and found by dz_safetensors_find. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "format/safetensors.h"

static volatile unsigned g_sink; /* keeps the byte reads from being optimized out */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    dz_safetensors st;
    dz_error err;
    if (dz_safetensors_parse("fuzz.safetensors", data, size, &st, &err) != DZ_OK) {
        if (st.count != 0 || st.tensors || st.path) abort(); /* failure leaves *out empty */
        return 0;
    }
    unsigned sum = 0;
    for (int i = 0; i < st.count; i++) {
        const dz_st_tensor *t = &st.tensors[i];
        uint64_t n = dz_dtype_size(t->dtype);
        for (int d = 0; d < t->ndim; d++) n *= (uint64_t)t->shape[d];
        if (n != t->nbytes) abort();
        const uint8_t *p = t->data;
        if (t->nbytes && (p < data || p + t->nbytes > data + size)) abort();
        for (size_t k = 0; k < t->nbytes; k++) sum += p[k];
        if (i > 0 && strcmp(st.tensors[i - 1].name, t->name) >= 0) abort();
        if (dz_safetensors_find(&st, t->name) != t) abort();
    }
    g_sink = sum;
    dz_safetensors_close(&st);
    return 0;
}
