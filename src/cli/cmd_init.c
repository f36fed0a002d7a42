/* distzo init --preset NAME -o DIR: a random-initialized model of a real shape in
 * Hugging Face layout, with the GPT-2/OPT tokenizer files for OPT presets. */
#include <dirent.h>
#include <errno.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/common.h"

static int copy_file(const char *src, const char *dst) {
    char *buf;
    size_t len;
    dz_error err = {0};
    if (dz_read_file(src, &buf, &len, &err) != DZ_OK) return dz_cli_fail(&err);
    dz_status st = dz_write_file_atomic(dst, buf, len, &err);
    free(buf);
    return st == DZ_OK ? 0 : dz_cli_fail(&err);
}

static int copy_tokenizer(const char *dir) {
    static const char *files[] = {"encoder.json", "vocab.bpe", "dict.txt"};
    char src[4096], dst[4096], rel[256];
    for (int i = 0; i < 3; i++) {
        snprintf(rel, sizeof rel, "gpt2-bpe/%s", files[i]);
        dz_cli_asset(rel, src, sizeof src);
        if (!dz_file_exists(src)) {
            fprintf(stderr, "distzo: warning: %s not found (set DISTZO_ASSETS); the model has no tokenizer\n", src);
            return 0;
        }
        snprintf(dst, sizeof dst, "%s/%s", dir, files[i]);
        int rc = copy_file(src, dst);
        if (rc) return rc;
    }
    return 0;
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
    const char *arch = NULL, *preset = "opt-125m", *out = NULL, *dtype = "f32";
    int seed = 0, layers = 0, threads = 0;
    float std = 0.02f;
    const dz_opt opts[] = {
        {"preset", DZ_OPT_STR, &preset, "model shape (default opt-125m)"},
        {"arch", DZ_OPT_STR, &arch, "opt or llama: checks that the preset is of this family"},
        {"seed", DZ_OPT_INT, &seed, "random seed (default 0)"},
        {"out", DZ_OPT_STR, &out, "output folder (also -o)"},
        {"dtype", DZ_OPT_STR, &dtype, "stored dtype: f32 (default) or bf16"},
        {"layers", DZ_OPT_INT, &layers, "override the number of layers (smaller test models)"},
        {"std", DZ_OPT_FLOAT, &std, "standard deviation of weights (default 0.02, as OPT)"},
        {"threads", DZ_OPT_INT, &threads, "threads (default: $OMP_NUM_THREADS, else all cores)"},
        {0},
    };
    char presets[512];
    snprintf(presets, sizeof presets, "Writes a random model in Hugging Face layout (config.json + model.safetensors).\n"
             "Presets: %s.", dz_preset_names());
    const dz_cmd_spec spec = {
        .name = "init",
        .usage = "--preset NAME -o DIR [options]",
        .summary = presets,
        .min_positional = 0,
        .max_positional = 0,
        .opts = opts,
    };
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "-o")) argv[i] = "--out";
    const char *pos[1];
    int npos, rc = dz_args_parse(&spec, argc, argv, pos, &npos);
    if (rc) return rc < 0 ? 2 : 0;
    if (!out) return dz_cli_failf("init needs an output folder: -o DIR");
    if (!folder_empty_or_new(out)) /* a mistyped -o must not replace a model with random weights */
        return dz_cli_failf("-o %s: exists and is not an empty folder; init writes only a new or empty one", out);
    dz_error err = {0};
    dz_config cfg;
    if (dz_config_preset(preset, &cfg, &err) != DZ_OK) return dz_cli_fail(&err);
    if (arch && strcmp(arch, dz_arch_name(cfg.arch)))
        return dz_cli_failf("option --arch: preset '%s' is %s, not %s", preset, dz_arch_name(cfg.arch), arch);
    if (layers < 0 || layers > DZ_MAX_LAYERS) return dz_cli_failf("option --layers: %d is out of range", layers);
    if (layers) cfg.n_layers = layers;
    dz_dtype dt;
    if (dz_dtype_parse(dtype, &dt) != 0) return dz_cli_failf("option --dtype: '%s' is not f32, bf16 or f16", dtype);
    if ((rc = dz_cli_runtime(threads))) return rc;
    dz_model *m;
    if (dz_model_init_random(&cfg, dt, (uint64_t)seed, std, &m, &err) != DZ_OK) return dz_cli_fail(&err);
    if (dz_model_save_hf(m, out, &err) != DZ_OK) rc = dz_cli_fail(&err);
    if (!rc && cfg.arch == DZ_ARCH_OPT) rc = copy_tokenizer(out);
    if (!rc)
        printf("wrote %s: %s, %lld parameters, %s\n", out, preset, (long long)dz_param_table_numel(dz_model_params(m)),
               dz_dtype_name(dt));
    dz_model_free(m);
    return rc;
}
