/* distzo: the command-line tool. The only place that exits. */
#include <stdio.h>
#include <string.h>

#include "cli/common.h"
#include "cli/progress_view.h"

typedef struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} command;

static const command commands[] = {
    {"train", dz_cmd_train, "fine-tune with zeroth-order SPSA (MeZO); default: stories260K on SST-2"},
    {"export", dz_cmd_export, "replay a run's seed log onto its base model and write the weights"},
    {"info", dz_cmd_info, "describe a model: architecture, shapes, parameters, bytes, GEMM kernel"},
    {"generate", dz_cmd_generate, "generate text from a prompt (greedy or sampled)"},
    {"eval", dz_cmd_eval, "evaluate a model: prompt classification (SST-2, jsonl) or LM perplexity"},
    {"init", dz_cmd_init, "write a random-initialized model of a real shape (OPT, LLaMA presets)"},
    {"bench", dz_cmd_bench, "benchmarks: `bench forward` (throughput vs this machine's sgemm)"},
    {"plan", dz_cmd_plan, "which MPI layout fits a cluster: memory, bytes and work per rank per step"},
    {"serve", dz_cmd_serve, "coordinate a federated run: workers send one-byte projected gradients"},
    {"join", dz_cmd_join, "work for a federated run (`distzo serve`) on this machine's own data"},
    {"plot", dz_cmd_plot, "draw a run's metrics.jsonl: loss.png and accuracy.png (needs gnuplot)"},
};

static void usage(FILE *out) {
    fprintf(out, "distzo %s: zeroth-order fine-tuning of language models\n\nusage: distzo COMMAND [options]\n\n",
            DISTZO_VERSION);
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(out, "\n`distzo COMMAND --help` describes each command.\n");
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("distzo %s\n", DISTZO_VERSION);
        return 0;
    }
    dz_cli_progress_init(); /* long operations show progress on stderr */
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name)) return commands[i].run(argc - 1, argv + 1);
    const char *names[sizeof commands / sizeof commands[0]];
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) names[i] = commands[i].name;
    const char *near = dz_args_closest(argv[1], strlen(argv[1]), names, sizeof names / sizeof names[0]);
    if (near) fprintf(stderr, "distzo: unknown command '%s' (did you mean %s?)\n\n", argv[1], near);
    else fprintf(stderr, "distzo: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    return 2;
}
