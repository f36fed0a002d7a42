/* libFuzzer target for the tokenizer loaders and encoders. The input's first byte picks
 * the format: even = llama2.c tokenizer.bin (the rest of the input), odd = GPT-2 BPE
 * (vocab.json and merges.txt, split at the first NUL byte). A tokenizer that loads must
 * encode a fixed text, ids inside its vocabulary, and decode every id it produced. */
#include "fuzz_input.h"

#include <string.h>
#include <sys/stat.h>

#include "distzo/tokenizer.h"

static void write_in(const char *dir, const char *name, const uint8_t *data, size_t size) {
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, size, f) != size || fclose(f) != 0) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    static char dir[64];
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "/dev/shm/dz_fuzz_tok_%d", (int)getpid());
        if (mkdir(dir, 0700) != 0) abort();
    }
    const char *path;
    if (data[0] % 2 == 0) {
        path = fuzz_file(0, data + 1, size - 1);
    } else {
        const uint8_t *nul = memchr(data + 1, 0, size - 1);
        const size_t vlen = nul ? (size_t)(nul - data - 1) : size - 1;
        write_in(dir, "vocab.json", data + 1, vlen);
        write_in(dir, "merges.txt", nul ? nul + 1 : data + size, nul ? size - vlen - 2 : 0);
        path = dir;
    }
    dz_tokenizer *tok = NULL;
    dz_error err;
    if (dz_tokenizer_load(path, 0, &tok, &err) != DZ_OK) return 0;
    int ids[256];
    const int n = dz_tokenizer_encode(tok, "Hello world, caf\xc3\xa9 \xe2\x82\xac 12", 1, ids, 256, &err);
    const int vocab = dz_tokenizer_vocab_size(tok);
    char buf[64];
    for (int i = 0; i < (n < 256 ? n : 256); i++) {
        if (ids[i] < 0 || ids[i] >= vocab) abort();
        dz_tokenizer_decode(tok, i ? ids[i - 1] : -1, ids[i], buf, sizeof buf);
    }
    dz_tokenizer_free(tok);
    return 0;
}
