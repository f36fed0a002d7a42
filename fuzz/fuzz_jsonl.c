/* libFuzzer target for the jsonl loaders (classification with labels, causal-LM text or
 * prompt/completion). Beyond "does not crash": a loaded set has at least one example,
 * every text is non-empty UTF-8 text, labels are non-negative, lines are increasing. */
#include "fuzz_input.h"

#include <string.h>

#include "distzo/data.h"

static void check(const dz_dataset *ds, int labelled) {
    if (ds->count < 1) abort();
    for (int i = 0; i < ds->count; i++) {
        const dz_example *e = &ds->items[i];
        if (!e->text || !e->text[0]) abort();
        if (labelled ? e->label < 0 : e->label != -1) abort();
        if (i > 0 && e->line <= ds->items[i - 1].line) abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_file(0, data, size);
    dz_dataset ds;
    dz_error err;
    if (dz_dataset_load_jsonl(path, "text", "label", &ds, &err) == DZ_OK) {
        check(&ds, 1);
        dz_dataset_free(&ds);
    }
    if (dz_dataset_load_lm_jsonl(path, &ds, &err) == DZ_OK) {
        check(&ds, 0);
        dz_dataset_free(&ds);
    }
    return 0;
}
