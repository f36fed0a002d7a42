/* libFuzzer target for the tokenizer loaders and encoders. The input's first byte picks
 * the format (mod 4): 0 = llama2.c tokenizer.bin (the rest of the input), 1 = GPT-2 BPE
 * (vocab.json and merges.txt, split at the first NUL byte), 2 = Hugging Face tokenizer.json,
 * 3 = SentencePiece tokenizer.model. A tokenizer that loads must encode a fixed text (plain
 * and with special tokens parsed), ids inside its vocabulary, and decode every id. */
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
    static char file[256];
    if (data[0] % 4 == 0) {
        path = fuzz_file(0, data + 1, size - 1);
    } else if (data[0] % 4 >= 2) {
        const char *name = data[0] % 4 == 2 ? "tokenizer.json" : "tokenizer.model";
        write_in(dir, name, data + 1, size - 1);
        snprintf(file, sizeof file, "%s/%s", dir, name);
        path = file;
    } else {
        const uint8_t *nul = memchr(data + 1, 0, size - 1);
        const size_t vlen = nul ? (size_t)(nul - data - 1) : size - 1;
        for (int k = 0; k < 2; k++) { /* a folder's tokenizer.json or tokenizer.model would be taken first */
            snprintf(file, sizeof file, "%s/%s", dir, k ? "tokenizer.model" : "tokenizer.json");
            unlink(file);
        }
        write_in(dir, "vocab.json", data + 1, vlen);
        write_in(dir, "merges.txt", nul ? nul + 1 : data + size, nul ? size - vlen - 2 : 0);
        path = dir;
    }
    dz_tokenizer *tok = NULL;
    dz_error err;
    if (dz_tokenizer_load(path, 0, &tok, &err) != DZ_OK) return 0;
    int ids[256];
    const int vocab = dz_tokenizer_vocab_size(tok);
    char buf[64];
    for (unsigned flags = DZ_ENCODE_BOS; flags <= (DZ_ENCODE_BOS | DZ_ENCODE_SPECIAL); flags += DZ_ENCODE_SPECIAL) {
        const int n = dz_tokenizer_encode_flags(tok, "Hello world, caf\xc3\xa9 \xe2\x82\xac 12<s> e\xcc\x81 <|x|>",
                                                flags, ids, 256, &err);
        for (int i = 0; i < (n < 256 ? n : 256); i++) {
            if (ids[i] < 0 || ids[i] >= vocab) abort();
            dz_tokenizer_decode(tok, i ? ids[i - 1] : -1, ids[i], buf, sizeof buf);
        }
    }
    dz_tokenizer_free(tok);
    return 0;
}
