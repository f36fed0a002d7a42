/* distzo init --preset NAME -o DIR: a random-initialized model of a real shape in
 * Hugging Face layout, with a tokenizer it can be trained with (--tokenizer, else the
 * preset's from the assets), written in HF layout so the folder loads with no flags. */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/common.h"

/* The tokenizer each preset family is used with, from the assets. The Llama-2 and Qwen2
 * vocabulary presets have none there: init says so, and train/eval/generate refuse the
 * folder until one is given (--tokenizer here, or to each of them). */
static const struct preset_tokenizer {
    const char *preset; /* a preset name, or a prefix ending in '-' */
    const char *asset;  /* relative to the assets folder; NULL: none there */
    const char *what;
} preset_tokenizers[] = {
    {"opt-", "gpt2-bpe/dict.txt", "GPT-2 byte-level BPE with OPT's ids (vocab.json + merges.txt)"},
    {"smollm2-135m", "smollm2-135m/hf-tokenizer", "SmolLM2's own (tokenizer.json)"},
    {"llama-", NULL, "Llama-2's 32,000-token tokenizer.model (TinyLlama's), which the assets do not have"},
    {"qwen2-", NULL, "Qwen2's tokenizer.json (151,646 tokens), which the assets do not have"},
    {"qwen2.5-", NULL, "Qwen2.5's tokenizer.json (151,665 tokens), which the assets do not have"},
};

static const struct preset_tokenizer *tokenizer_of(const char *preset) {
    for (size_t i = 0; i < sizeof preset_tokenizers / sizeof preset_tokenizers[0]; i++) {
        const char *p = preset_tokenizers[i].preset;
        const size_t n = strlen(p);
        if (p[n - 1] == '-' ? !strncmp(preset, p, n) : !strcmp(preset, p)) return &preset_tokenizers[i];
    }
    return NULL;
}

/* The tokenizer at path, checked against the model's vocabulary before anything is written. */
static int load_tokenizer(const char *path, int vocab_size, dz_tokenizer **tok) {
    dz_error err = {0};
    if (dz_tokenizer_load(path, vocab_size, tok, &err) != DZ_OK) return dz_cli_fail(&err);
    if (dz_tokenizer_vocab_size(*tok) <= vocab_size) return 0;
    const int n = dz_tokenizer_vocab_size(*tok);
    dz_tokenizer_free(*tok);
    *tok = NULL;
    return dz_cli_failf("%s: the tokenizer has %d tokens but the model's vocabulary is %d", path, n, vocab_size);
}

/* 1 when path does not exist or is an empty folder. */
static int folder_empty_or_new(const char *path) {
    struct stat sb;
    if (stat(path, &sb) != 0) return errno == ENOENT;
    if (!S_ISDIR(sb.st_mode)) return 0;
    DIR *d = opendir(path);
    int empty = d != NULL;
    for (struct dirent *e; d && empty && (e = readdir(d));) empty = !strcmp(e->d_name, ".") || !strcmp(e->d_name, "..");
    if (d) closedir(d);
    return empty;
}

int dz_cmd_init(int argc, char **argv) {
    const char *arch = NULL, *preset = "opt-125m", *out = NULL, *dtype = "f32", *tokenizer = NULL;
    int layers = DZ_OPT_UNSET, threads = 0; /* --layers 0 is refused, not the preset's */
    uint64_t seed = 0;
    float std = 0.02f;
    const dz_opt opts[] = {
        {"preset", DZ_OPT_STR, &preset, "model shape (default opt-125m)"},
        {"arch", DZ_OPT_STR, &arch, "opt or llama: checks that the preset is of this family"},
        {"seed", DZ_OPT_SEED, &seed, "random seed (default 0)"},
        {"out|o", DZ_OPT_STR, &out, "output folder"},
        {"dtype", DZ_OPT_STR, &dtype, "stored dtype: f32 (default), bf16 or f16"},
        {"layers", DZ_OPT_INT, &layers, "override the preset's number of layers, 1 or more (smaller test models)"},
        {"std", DZ_OPT_FLOAT, &std, "standard deviation of weights (default 0.02, as OPT)"},
        {"tokenizer", DZ_OPT_STR, &tokenizer, "tokenizer to write beside the weights (default: the preset's from the assets)"},
        dz_cli_threads_option(&threads, NULL),
        {0},
    };
    char presets[512];
    snprintf(presets, sizeof presets, "Writes a random model in Hugging Face layout (config.json + model.safetensors) with a\n"
             "tokenizer: --tokenizer, else the preset's from the assets (OPT: GPT-2 BPE with OPT's ids;\n"
             "smollm2-135m: SmolLM2's; llama-* and qwen2*: none there, pass the family's).\nPresets: %s.", dz_preset_names());
    const dz_cmd_spec init_cmd = {.name = "init", .usage = "--preset NAME -o DIR [options]", .summary = presets};
    int rc = dz_cli_parse(&init_cmd, opts, argc, argv, NULL);
    if (rc >= 0) return rc;
    if (!out) return dz_cli_failf("init needs an output folder: -o DIR");
    if (!folder_empty_or_new(out)) /* a mistyped -o must not replace a model with random weights */
        return dz_cli_failf("-o %s: exists and is not an empty folder; init writes only a new or empty one", out);
    dz_error err = {0};
    dz_config cfg;
    if (dz_config_preset(preset, &cfg, &err) != DZ_OK) return dz_cli_fail(&err);
    if (arch && strcmp(arch, dz_arch_name(cfg.arch)))
        return dz_cli_failf("option --arch: preset '%s' is %s, not %s", preset, dz_arch_name(cfg.arch), arch);
    if (layers != DZ_OPT_UNSET && (layers < 1 || layers > DZ_MAX_LAYERS))
        return dz_cli_failf("option --layers: %d is outside 1..%d", layers, DZ_MAX_LAYERS);
    if (layers != DZ_OPT_UNSET) cfg.n_layers = layers;
    if (!(std >= 0.0f) || !isfinite(std)) return dz_cli_failf("option --std: %g is not a finite number >= 0", (double)std);
    dz_dtype dt;
    if (dz_dtype_parse(dtype, &dt) != 0) return dz_cli_failf("option --dtype: '%s' is not f32, bf16 or f16", dtype);
    if ((rc = dz_cli_start(&(dz_cli_preamble){.threads = threads}, NULL, NULL))) return rc;
    const struct preset_tokenizer *pt = tokenizer_of(preset);
    char asset[4096];
    const char *tp = tokenizer ? tokenizer : pt && pt->asset ? dz_cli_asset(pt->asset, asset, sizeof asset) : NULL;
    dz_tokenizer *tok = NULL;
    if (tp && (tokenizer || dz_file_exists(tp) || dz_is_dir(tp)) && (rc = load_tokenizer(tp, cfg.vocab_size, &tok)))
        return rc;
    dz_model *m;
    if (dz_model_init_random(&cfg, dt, seed, std, &m, &err) != DZ_OK) {
        dz_tokenizer_free(tok);
        return dz_cli_fail(&err);
    }
    if (dz_model_save_hf(m, out, &err) != DZ_OK || (tok && dz_tokenizer_save_hf(tok, out, &err) != DZ_OK))
        rc = dz_cli_fail(&err);
    if (!rc) {
        printf("wrote %s: %s, %lld parameters, %s\n", out, preset, (long long)dz_param_table_numel(dz_model_params(m)),
               dz_dtype_name(dt));
        if (tok) printf("tokenizer: %s, from %s\n", tokenizer ? "--tokenizer" : pt->what, tp);
        else if (tp)
            fprintf(stderr, "distzo: warning: %s: no tokenizer written (%s not found: set DISTZO_ASSETS); pass "
                    "--tokenizer PATH to init, or to train, eval and generate\n", out, tp);
        else
            fprintf(stderr, "distzo: warning: %s: no tokenizer written: this preset is used with %s; pass it as "
                    "--tokenizer PATH to init (or to train, eval and generate)\n", out,
                    pt ? pt->what : "no tokenizer distzo knows");
    }
    dz_tokenizer_free(tok);
    dz_model_free(m);
    return rc;
}
