/* distzo export: a run's trained weights (its seed log replayed onto the base model), or a
 * model as it is, written as a Hugging Face folder or a GGUF file for llama.cpp. */
#include <stdio.h>
#include <string.h>

#include "cli/common.h"

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && !strcmp(s + n - k, suffix);
}

static const dz_cmd_spec export_cmd = {
    .name = "export",
    .usage = "--run RUN_DIR [--base M] [--merge] -o OUT | --model M -o OUT  [--format hf|gguf] [--type f16|f32|bf16|q8_0]",
    .summary = "Replays a run's seed log onto its base model and writes the trained weights\n"
               "(bitwise those of training) in Hugging Face layout or as a GGUF file that\n"
               "llama.cpp runs; an adapter run's as a PEFT adapter folder (--merge: merged\n"
               "into the base, HF or GGUF); or converts a model (--model) the same way."};

int dz_cmd_export(int argc, char **argv) {
    const char *base = NULL, *model = NULL, *run = NULL, *out = NULL, *store = NULL, *format = NULL, *type = NULL;
    int threads = 0, allow_short = 0, merge = 0;
    const dz_opt opts[] = {
        {"run", DZ_OPT_STR, &run, "run folder (with run.json and seeds.log): its trained weights"},
        {"base", DZ_OPT_STR, &base, "base model of --run (default: the run's own)"},
        {"model", DZ_OPT_STR, &model,
         "without --run: a model to convert as it is (HF folder, checkpoint folder such as RUN/best, .gguf, llama2.c .bin)"},
        {"out|o", DZ_OPT_STR, &out, "output: a folder for hf, a file (model.gguf) for gguf"},
        {"format", DZ_OPT_STR, &format,
         "hf or gguf (default: gguf when -o ends in .gguf, else hf). gguf: llama.cpp's llama layout; OPT is refused"},
        {"type", DZ_OPT_STR, &type,
         "gguf tensor type: f16 (default, as llama.cpp's convert_hf_to_gguf), f32, bf16 or q8_0; norms stay f32, "
         "q8_0 matrices whose rows are not multiples of 32 are f16"},
        {"store", DZ_OPT_STR, &store,
         "disk:PATH or disk-nocache:PATH: stream the layers through a store file (models larger than memory)"},
        {"allow-short-log", DZ_OPT_FLAG, &allow_short,
         "export a seed log that ends before the step the run's checkpoints or metrics reached (warns)"},
        {"merge", DZ_OPT_FLAG, &merge, "a --peft lora run: the base with the adapter merged in (default: the PEFT "
         "adapter folder, adapter_config.json + adapter_model.safetensors; a prefix has nothing to merge)"},
        dz_cli_threads_option(&threads, NULL),
        {0},
    };
    int rc = dz_cli_parse(&export_cmd, opts, argc, argv, NULL);
    if (rc >= 0) return rc;
    if ((!run && !model) || !out) return dz_cli_failf("export needs --run RUN_DIR (or --model M) and -o OUT");
    if (run && model) return dz_cli_failf("export: --model is for converting without a run; with --run use --base");
    if (!run && base) return dz_cli_failf("export: --base needs --run");
    if (!run && merge) return dz_cli_failf("export: --merge needs --run (a LoRA run)");
    dz_export_format fmt = ends_with(out, ".gguf") ? DZ_EXPORT_GGUF : DZ_EXPORT_HF;
    if (format && !strcmp(format, "gguf")) fmt = DZ_EXPORT_GGUF;
    else if (format && !strcmp(format, "hf")) fmt = DZ_EXPORT_HF;
    else if (format) return dz_cli_failf("option --format: '%s' is not one of hf, gguf", format);
    if (type && fmt != DZ_EXPORT_GGUF) return dz_cli_failf("option --type is for --format gguf");
    if ((rc = dz_cli_start(&(dz_cli_preamble){.threads = threads}, NULL, NULL))) return rc;
    dz_error err = {0};
    const dz_export_spec es = {
        .run_dir = run, .model = run ? base : model, .out = out, .store = store, .format = fmt, .gguf_type = type,
        .allow_short_log = allow_short, .merge = merge};
    if (dz_export_model(&es, &err) != DZ_OK) return dz_cli_fail(&err);
    printf("wrote %s\n", out);
    return 0;
}
