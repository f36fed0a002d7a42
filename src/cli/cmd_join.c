/* distzo join: a worker of a federated run (docs/FEDERATED.md). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/common.h"
#include "distzo/federated.h"

/* DISTZO_TEST_KILL=join:ROUND: this worker dies (SIGKILL) once it has computed its
 * contribution to that round, before sending it (the tests' worker lost mid-round). */
typedef struct join_progress {
    int kill_round;
} join_progress;

static void on_event(const dz_fed_join_event *ev, void *user) {
    const join_progress *p = user;
    if (ev->kind == DZ_FED_COMPUTED && p->kill_round >= 0 && ev->round == p->kill_round) raise(SIGKILL);
    if (ev->kind == DZ_FED_JOINED) fprintf(stderr, "distzo: joined as machine %u (%d records applied)\n", ev->machine, ev->round);
    if (ev->kind == DZ_FED_RESYNC) fprintf(stderr, "distzo: resync at %d records\n", ev->round);
}

/* An output path the worker writes at the end: a folder there (or its parent) for --save, a
 * file in a folder this process can write for --checksum-file. 0, or the refusal. */
static int writable_target(const char *option, const char *path, int folder) {
    if (!path) return 0;
    char dir[4200];
    dz_path_parent(path, dir, sizeof dir);
    if (folder && dz_is_dir(path))
        return access(path, W_OK) == 0 ? 0 : dz_cli_failf("option %s: %s is not writable", option, path);
    if (!folder && dz_is_dir(path)) return dz_cli_failf("option %s: %s is a folder", option, path);
    for (char up[4200]; folder && !dz_file_exists(dir) && strcmp(dir, ".") && strcmp(dir, "/");) /* made on save */
        dz_path_parent(dir, up, sizeof up), snprintf(dir, sizeof dir, "%s", up);
    if (!dz_is_dir(dir) || access(dir, W_OK) != 0)
        return dz_cli_failf("option %s: %s cannot be written (%s is not a folder this process can write)", option, path,
                            dir);
    return 0;
}

static const dz_cmd_spec join_cmd = {
    .name = "join",
    .usage = "URL --data FILE --token-file F [--model M] [--adapter DIR] [--save DIR]",
    .min_positional = 1, .max_positional = 1,
    .summary = "Works for a federated run: replays its log, then computes one-byte projected gradients\n"
               "on this machine's data for the slots each round assigns it, until the run is done."};

int dz_cmd_join(int argc, char **argv) {
    dz_fed_join_config c = {.retry_for = 60.0};
    float retry_for = 60.0f;
    int threads = 0;
    const char *checksum_file = NULL, *gpu_math = NULL;
    dz_cli_gpus gpus = DZ_CLI_GPUS_UNSET;
    const dz_opt opts[] = {
        {"data", DZ_OPT_STR, &c.data, "this machine's training file (its examples never leave it)"},
        {"model", DZ_OPT_STR, &c.model, "the base model here (default: the path the coordinator's run names)"},
        {"adapter", DZ_OPT_STR, &c.adapter, "a run whose adapter starts from a PEFT folder (serve --adapter): that "
         "folder here (default: the path the coordinator's run names; its file must be the run's)"},
        {"tokenizer", DZ_OPT_STR, &c.tokenizer, "the tokenizer here (default: the run's, else the one beside the model)"},
        {"token-file", DZ_OPT_STR, &c.token_file, "file whose first line is the coordinator's token"},
        {"ca-file", DZ_OPT_STR, &c.ca_file, "PEM certificate(s) to trust for an https:// coordinator (default: the system's)"},
        {"name", DZ_OPT_STR, &c.name, "a name for the coordinator's log (at most 64 characters)"},
        {"save", DZ_OPT_STR, &c.save, "folder to write this replica's weights to at the end (HF layout)"},
        {"checksum-file", DZ_OPT_STR, &checksum_file, "file to write the replica's final checksum to (16 hex digits)"},
        {"retry-for", DZ_OPT_FLOAT, &retry_for, "seconds to keep retrying an unreachable coordinator (default 60)"},
        dz_cli_threads_option(&threads, NULL),
        dz_cli_keep_quantized_option(&c.keep_quantized),
        dz_cli_backend_option(&c.backend),
        dz_cli_gpu_math_option(&gpu_math),
        dz_cli_gpus_option(&gpus),
        dz_cli_share_gpus_option(&gpus),
        {0},
    };
    const char *pos[1];
    int rc = dz_cli_parse(&join_cmd, opts, argc, argv, pos);
    if (rc >= 0) return rc;
    c.url = pos[0];
    c.retry_for = retry_for;
    if (!(c.retry_for >= 0)) return dz_cli_failf("option --retry-for: %g is negative", (double)retry_for);
    if (c.name && strlen(c.name) > 64) return dz_cli_failf("option --name: %zu characters; at most 64", strlen(c.name));
    /* where the results go is checked now, not after the rounds (a late failure loses them) */
    if ((rc = writable_target("--save", c.save, 1)) || (rc = writable_target("--checksum-file", checksum_file, 0)))
        return rc;
    join_progress p = {.kill_round = -1};
    const char *kill = getenv("DISTZO_TEST_KILL");
    if (kill && sscanf(kill, "join:%d", &p.kill_round) != 1) p.kill_round = -1;
    dz_cli_gpu_math_join(&c.backend, gpu_math);
    if ((rc = dz_cli_gpus_join(&c.backend, &gpus, 0, 1))) return rc; /* one process: rank 0 of 1 */
    if ((rc = dz_cli_start(&(dz_cli_preamble){.threads = threads, .backend = c.backend}, NULL, NULL))) return rc;
    dz_error err = {0};
    dz_fed_join_result res;
    if (dz_fed_join(&c, on_event, &p, &res, &err) != DZ_OK) return dz_cli_fail(&err);
    if (checksum_file) {
        char text[32];
        snprintf(text, sizeof text, "%016llx\n", (unsigned long long)res.checksum);
        if (dz_write_file_atomic(checksum_file, text, strlen(text), &err) != DZ_OK) return dz_cli_fail(&err);
    }
    printf("done: %d records applied, %d contributions, %d rejoins, %d resyncs; network %llu bytes sent, %llu "
           "received; checksum %016llx\n", res.rounds_applied, res.contributions, res.rejoins, res.resyncs,
           (unsigned long long)res.bytes_sent, (unsigned long long)res.bytes_received,
           (unsigned long long)res.checksum);
    return 0;
}
