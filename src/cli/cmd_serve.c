/* distzo serve: the coordinator of a federated run (docs/FEDERATED.md). */
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/common.h"
#include "cli/train_options.h"
#include "distzo/federated.h"

/* DISTZO_TEST_KILL=serve:ROUND: the coordinator dies (SIGKILL) once that many rounds are
 * logged (the tests' coordinator crash). */
static void on_round(const dz_fed_round_info *r, void *user) {
    const int *kill_round = user;
    if (!r->url && r->round == *kill_round) raise(SIGKILL);
    if (r->url) {
        if (r->replayed) printf("resumed after round %d of %d\n", r->round, r->rounds);
        printf("listening on %s\n", r->url);
        fflush(stdout);
        return;
    }
    if (r->round == 0) printf("round 0/%d  before training", r->rounds);
    else printf("round %d/%d  %d/%d slots  %d workers  loss %.4f", r->round, r->rounds, r->contributions, r->slots,
                r->workers, r->loss);
    if (r->has_eval) printf("  test %s %.4f", r->lm ? "loss" : "acc", r->test_score);
    printf("  %.3f s\n", r->seconds);
    fflush(stdout);
}

/* The federated settings from their options: the g code, the seed pool, the rounds. */
static int fed_options(dz_fed_serve_config *c, const char *code, int seed_pool, const char *sampling) {
    dz_train_config *t = &c->train;
    if (!strcmp(code, "byte")) c->fed.code = DZ_FED_CODE_BYTE;
    else if (!strcmp(code, "f32")) c->fed.code = DZ_FED_CODE_F32;
    else return dz_cli_failf("option --g-code: '%s' is not byte or f32", code);
    if (seed_pool != DZ_OPT_UNSET && seed_pool < 1)
        return dz_cli_failf("option --seed-pool: %d is not 1..2097152 seeds", seed_pool);
    if (seed_pool > 0 || sampling) c->fed.seed_pool = seed_pool > 0 ? (uint32_t)seed_pool : 4096u;
    if (sampling && !strcmp(sampling, "importance")) c->fed.seed_sampling = 1;
    else if (sampling && strcmp(sampling, "uniform"))
        return dz_cli_failf("option --seed-sampling: '%s' is not uniform or importance", sampling);
    if (t->optim.steps != DZ_OPT_UNSET && t->optim.steps < 1)
        return dz_cli_failf("option --steps: %d: run at least 1 round", t->optim.steps);
    if (t->optim.steps == DZ_OPT_UNSET) t->optim.steps = c->resume ? 0 : 1000; /* 0: the run's own */
    return 0;
}

/* --estimator: mezo, or fzoo, whose round is one worker's N directions on one batch: the
 * slots are its --fzoo-directions, all a worker's, Rademacher. On --resume run.json says. */
static int estimator_options(dz_fed_serve_config *c, const char *name, int argc, char **argv) {
    dz_train_optim *o = &c->train.optim;
    if (dz_zo_estimator_parse(name, &o->estimator) != 0 || (o->estimator != DZ_ZO_MEZO && o->estimator != DZ_ZO_FZOO))
        return dz_cli_failf("option --estimator: '%s' is not mezo or fzoo (the estimators a federated run carries)", name);
    int q_given = 0, per_given = 0, gaussian = 0, clip_given = 0;
    for (int i = 1; i < argc; i++) {
        q_given |= !strncmp(argv[i], "--spsa-samples", 14);
        clip_given |= !strncmp(argv[i], "--g-clip", 8);
        gaussian |= !strncmp(argv[i], "--perturbation", 14) && !o->rademacher;
        per_given |= !strncmp(argv[i], "--samples-per-worker", 20);
    }
    if (o->estimator != DZ_ZO_FZOO) {
        if (o->fzoo_directions != DZ_ZO_FZOO_DEFAULT_DIRECTIONS)
            return dz_cli_failf("option --fzoo-directions: without --estimator fzoo it would be ignored");
        return 0;
    }
    if (q_given)
        return dz_cli_failf("option --spsa-samples: --estimator fzoo's slots are its --fzoo-directions");
    if (gaussian) return dz_cli_failf("option --perturbation: --estimator fzoo perturbs with Rademacher directions only");
    o->q = o->fzoo_directions, o->rademacher = 1;
    if (!per_given) c->fed.samples_per_worker = o->q;
    /* its coefficients scale as 1 / eps: MeZO's 64 would clip every one (a resume: federated.json's) */
    if (!clip_given && !c->resume && o->eps > 0) c->fed.g_clip = (float)(8.0 / o->eps);
    return 0;
}

/* --keep-quantized only where the base is never written, and the coordinator's own data:
 * its --test set by absolute path, no training data. */
static int base_and_data(dz_fed_serve_config *c, int keep_quantized) {
    dz_train_config *t = &c->train;
    /* on --resume the run's run.json says whether it trains an adapter (the coordinator checks) */
    t->peft.keep_quantized = keep_quantized && (c->resume || (t->peft.method && strcmp(t->peft.method, "none")));
    if (keep_quantized && !t->peft.keep_quantized)
        return dz_cli_failf("option --keep-quantized: a federated run of every parameter updates the base, which a "
                            "quantized base held as loaded cannot take: add --peft lora or prefix, or leave it out");
    static char abs_test[PATH_MAX], abs_adapter[PATH_MAX];
    if (t->data.test && realpath(t->data.test, abs_test)) t->data.test = abs_test;
    /* a new run's --adapter by absolute path (a resume compares the folder a path names) */
    if (!c->resume && t->peft.lora_init && realpath(t->peft.lora_init, abs_adapter)) t->peft.lora_init = abs_adapter;
    t->data.train = NULL;
    return 0;
}

static const dz_cmd_spec serve_cmd = {
    .name = "serve", .usage = "--out RUN_DIR --token-file F [--listen HOST:PORT] [--resume] [training settings]",
    .summary = "Coordinates a federated ZO run: workers (`distzo join`) compute one-byte projected gradients\n"
               "on their own data; each round becomes one seed-log record (`distzo export` replays it)."};

int dz_cmd_serve(int argc, char **argv) {
    dz_fed_serve_config c = {.listen = "127.0.0.1:8470", .linger = 10.0};
    dz_train_config *t = &c.train;
    dz_train_config_default(t);
    t->optim.lr = 3e-5f;
    t->optim.steps = DZ_OPT_UNSET; /* 1000, or on --resume the run's, unless given */
    t->optim.q = 4;
    dz_fed_settings_default(&c.fed);
    dz_cli_train_values v = dz_cli_train_values_default();
    const char *model = NULL, *out = NULL, *code = "byte", *sampling = NULL, *gpu_math = NULL, *estimator = "mezo";
    dz_cli_gpus gpus = DZ_CLI_GPUS_UNSET;
    int threads = 0, seed_pool = DZ_OPT_UNSET, keep_quantized = 0;
    float round_timeout = 30.0f, worker_timeout = 10.0f, linger = 10.0f;
    const dz_opt own[] = {
        {"out", DZ_OPT_STR, &out, "run folder: run.json, federated.json, seeds.log, metrics.jsonl"},
        {"listen", DZ_OPT_STR, &c.listen, "HOST:PORT to serve on (default 127.0.0.1:8470; port 0: any free one)"},
        {"token-file", DZ_OPT_STR, &c.token_file, "file whose first line is the token every worker must send"},
        {"tls-cert", DZ_OPT_STR, &c.tls_cert, "PEM certificate: serve HTTPS (with --tls-key)"},
        {"tls-key", DZ_OPT_STR, &c.tls_key, "PEM private key of --tls-cert"},
        {"resume", DZ_OPT_FLAG, &c.resume, "continue the run in --out from its seed log (its settings are kept; --steps may grow)"},
        {"model", DZ_OPT_STR, &model, "base model (default: stories260K from the assets); every worker needs the same"},
        {"estimator", DZ_OPT_STR, &estimator, "mezo (default) or fzoo (a round is one worker's N directions; docs/FEDERATED.md)"},
        {"fzoo-directions", DZ_OPT_INT, &t->optim.fzoo_directions, "fzoo: directions per round, its slots (default 8)"},
        {"samples-per-worker", DZ_OPT_INT, &c.fed.samples_per_worker, "slots each worker gets per round (default 1; fzoo: all)"},
        {"quorum", DZ_OPT_INT, &c.fed.quorum, "close a round once this many slots are in (default 0: every assigned one)"},
        {"round-timeout", DZ_OPT_FLOAT, &round_timeout, "seconds after which a round closes with what it has (default 30)"},
        {"min-workers", DZ_OPT_INT, &c.fed.min_workers, "workers needed to open a round (default 1)"},
        {"worker-timeout", DZ_OPT_FLOAT, &worker_timeout, "seconds of silence after which a worker counts as gone (default 10)"},
        {"g-code", DZ_OPT_STR, &code, "how g travels: byte (default; sign + log-magnitude) or f32"},
        {"g-clip", DZ_OPT_FLOAT, &c.fed.g_clip, "largest |g| taken (the byte code's range; default 64, fzoo 8 / eps)"},
        {"robust-clip", DZ_OPT_FLOAT, &c.fed.robust_clip, "each |g| at most this many times the round's median |g| (>= 1; default 0: off)"},
        {"max-joins-per-client", DZ_OPT_INT, &c.fed.max_joins_per_client, "joins a client address may make per minute, and "
         "new workers per address given slots before they have delivered (1..256; default 8)"},
        {"seed-pool", DZ_OPT_INT, &seed_pool, "FedKSeed: perturbations only from K seeds; a joining worker downloads K "
         "scalars, not the log (K = 1..2^21; default off, 4096 with --seed-sampling)"},
        {"seed-sampling", DZ_OPT_STR, &sampling, "the pool's seed draw: uniform (default) or importance (FedKSeed-Pro)"},
        DZ_CLI_PEFT_OPTIONS(t),
        {"adapter", DZ_OPT_STR, &t->peft.lora_init, "lora, prefix: the adapter starts from this PEFT folder (its r, alpha "
         "and targets, or its num_virtual_tokens, must be the run's); run.json keeps its path and fingerprint, and a "
         "worker takes it from there or from join --adapter"},
        dz_cli_keep_quantized_option(&keep_quantized),
        {"linger", DZ_OPT_FLOAT, &linger, "seconds to keep serving after the last round for workers to catch up (default 10)"},
        {"test", DZ_OPT_STR, &t->data.test, "labelled examples of the coordinator's own (workers never see them): the replica's accuracy on them goes to metrics.jsonl"},
        {"eval-every", DZ_OPT_INT, &t->schedule.eval_every, "with --test: rounds between evaluations (default 0: at the end); "
                                                             "one more before the first round (row 0) and after the last"},
        {"log-sync-every", DZ_OPT_INT, &t->schedule.log_sync_every, "fsync the seed log every N rounds (default 64)"},
        {"checkpoint-every", DZ_OPT_INT, &t->schedule.checkpoint_every,
         "write RUN/checkpoint-N (the weights, for distzo eval) every N rounds (default 1000; 0: never)"},
        {"keep-checkpoints", DZ_OPT_INT, &t->schedule.keep_checkpoints, "numbered checkpoints to keep (default 1)"},
        dz_cli_threads_option(&threads, NULL),
        dz_cli_backend_option(&t->layout.backend),
        dz_cli_gpu_math_option(&gpu_math),
        dz_cli_gpus_option(&gpus),
        dz_cli_share_gpus_option(&gpus),
    };
    enum { N_OWN = sizeof own / sizeof own[0] };
    dz_opt opts[N_OWN + DZ_CLI_TRAIN_OPTS + 1] = {{0}};
    memcpy(opts, own, sizeof own);
    dz_cli_train_options(opts + N_OWN, t, &v, DZ_CLI_SERVE);
    t->data.dev_examples = 0, t->schedule.eval_every = 0; /* no selection set: the coordinator has no training data */
    int rc = dz_cli_parse(&serve_cmd, opts, argc, argv, NULL);
    if (rc >= 0) return rc;
    dz_cli_train_cmdline cmdline = {.data = t->data, .task_file = v.task_file}; /* as given, for the check below */
    cmdline.data.gen_tokens = DZ_OPT_UNSET; /* not serve's: its workers take sst2, classify and lm */
    if ((rc = dz_cli_train_given(t))) return rc;
    if (!out) return dz_cli_failf("serve needs --out RUN_DIR");
    if (!(linger >= 0.0f)) return dz_cli_failf("option --linger: %g is negative", (double)linger);
    if ((rc = dz_cli_train_apply(t, &v, DZ_CLI_SERVE, model))) return rc;
    if ((rc = dz_cli_train_refuse_unused(t, &cmdline, v.task_file, NULL, c.resume))) return rc; /* as train */
    if (t->schedule.eval_every > 0 && !t->data.test && !c.resume)
        return dz_cli_failf("option --eval-every: the coordinator scores only a --test file of its own (its workers' data "
                            "never reaches it): give --test, or leave --eval-every out");
    if ((rc = fed_options(&c, code, seed_pool, sampling)) || (rc = estimator_options(&c, estimator, argc, argv))) return rc;
    if ((rc = dz_cli_refuse_adapter_alone(t, argc, argv))) return rc;
    if ((rc = base_and_data(&c, keep_quantized))) return rc;
    t->out_dir = out;
    c.fed.round_timeout = round_timeout, c.fed.worker_timeout = worker_timeout, c.linger = linger;
    dz_cli_gpu_math_join(&t->layout.backend, gpu_math);
    if ((rc = dz_cli_gpus_join(&t->layout.backend, &gpus, 0, 1))) return rc; /* one process: rank 0 of 1 */
    if ((rc = dz_cli_start(&(dz_cli_preamble){.threads = threads, .backend = t->layout.backend}, NULL, NULL)))
        return rc;
    dz_error err = {0};
    /* the run's settings stand: one given that differs is refused, as train --resume refuses it */
    if (c.resume && dz_train_config_check_given(out, t, argv, argc, &err) != DZ_OK) return dz_cli_fail(&err);
    int kill_round = -1;
    const char *kill = getenv("DISTZO_TEST_KILL");
    if (kill && sscanf(kill, "serve:%d", &kill_round) != 1) kill_round = -1;
    if (dz_fed_serve(&c, on_round, &kill_round, &err) != DZ_OK) return dz_cli_fail(&err);
    printf("done: run in %s (distzo export --run %s -o OUT writes the weights)\n", out, out);
    return 0;
}
