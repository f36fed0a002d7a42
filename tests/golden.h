/* The golden batches under tests/data: a right-padded batch of tokens with a reference
 * implementation's logits at every position and log-probs of each next token, written by
 * tools/make_hf_golden.py (tests/data/hf/NAME/golden.bin, Hugging Face transformers) and
 * tools/ref_llama2c.py (tests/data/stories260k/logits_first.bin, B = 1).
 *
 * Format, little endian, no padding:
 *   int32 B, T, V; int32 tokens[B*T]; int32 lengths[B]; float32 logits[B*T*V];
 *   float32 logprobs[B*T] (log p(tokens[b,t+1] | tokens[b,..t]); 0 where no next token).
 * Header-only (static functions), one test program per file; include after cmocka.h. */
#ifndef DZ_TESTS_GOLDEN_H
#define DZ_TESTS_GOLDEN_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct golden_batch {
    int B, T, V;
    int *tokens, *lengths;
    float *logits, *logprobs;
} golden_batch;

/* Reads path, failing the calling test on a short, long or unreadable file. */
static inline void golden_batch_load(const char *path, golden_batch *g) {
    FILE *f = fopen(path, "rb");
    if (!f) fail_msg("%s: cannot open the golden batch", path);
    int32_t hdr[3];
    if (fread(hdr, 4, 3, f) != 3 || hdr[0] <= 0 || hdr[1] <= 0 || hdr[2] <= 0)
        fail_msg("%s: bad golden batch header", path);
    g->B = hdr[0], g->T = hdr[1], g->V = hdr[2];
    const size_t bt = (size_t)g->B * (size_t)g->T;
    g->tokens = malloc(sizeof(int) * bt);
    g->lengths = malloc(sizeof(int) * (size_t)g->B);
    g->logits = malloc(sizeof(float) * bt * (size_t)g->V);
    g->logprobs = malloc(sizeof(float) * bt);
    assert_true(g->tokens && g->lengths && g->logits && g->logprobs);
    char extra;
    if (fread(g->tokens, 4, bt, f) != bt || fread(g->lengths, 4, (size_t)g->B, f) != (size_t)g->B ||
        fread(g->logits, 4, bt * (size_t)g->V, f) != bt * (size_t)g->V || fread(g->logprobs, 4, bt, f) != bt ||
        fread(&extra, 1, 1, f) != 0)
        fail_msg("%s: not a golden batch of B %d, T %d, V %d (the file is shorter or longer)", path, g->B, g->T, g->V);
    fclose(f);
    for (int b = 0; b < g->B; b++)
        if (g->lengths[b] < 1 || g->lengths[b] > g->T) fail_msg("%s: length %d of sequence %d", path, g->lengths[b], b);
}

/* tests/data/hf/NAME/golden.bin. */
static inline void golden_batch_load_hf(const char *name, golden_batch *g) {
    char path[1024];
    snprintf(path, sizeof path, "%s/hf/%s/golden.bin", DZ_TEST_DATA, name);
    golden_batch_load(path, g);
}

/* Next-token prediction over the real positions: rows[i] = b*T + t and targets[i] =
 * tokens[b*T + t + 1] for every t + 1 < lengths[b] (room for B*T each); returns the count. */
static inline int golden_batch_next_token_rows(const golden_batch *g, int *rows, int *targets) {
    int n = 0;
    for (int b = 0; b < g->B; b++)
        for (int t = 0; t + 1 < g->lengths[b]; t++) {
            rows[n] = b * g->T + t;
            targets[n++] = g->tokens[b * g->T + t + 1];
        }
    return n;
}

static inline void golden_batch_free(golden_batch *g) {
    free(g->tokens);
    free(g->lengths);
    free(g->logits);
    free(g->logprobs);
}

#endif
