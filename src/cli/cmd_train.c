/* distzo train: ZO fine-tuning. With no model or data: stories260K on SST-2 from the
 * assets folder, with settings that work for it. (distzo export: cmd_export.c.) */
#include <limits.h>
#include <signal.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "cli/common.h"
#include "cli/progress_view.h"
#include "cli/train_options.h"

typedef struct progress {
    int tty;
    int last_line_step;
    int log_every;        /* --log-every: a line every N steps (0: piped, every steps/20; a tty: the bar only) */
    int quiet;            /* --quiet: no progress, no evaluation lines */
    FILE *out;            /* stdout, or stderr under --json (stdout is then the summary's alone) */
    int rank, kill_step;  /* DISTZO_TEST_KILL=RANK:STEP[:stop|:int]: this rank dies (SIGKILL), with ":stop"
                           * stops responding (SIGSTOP), with ":int" gets a Ctrl-C (SIGINT), after that step */
    int kill_signal;
} progress;

/* One score of a step's line (the trainer's scores are minus the loss for LM), n/a when
 * there is none. */
static void score(const progress *pr, const char *name, int lm, double v) {
    if (isfinite(v)) fprintf(pr->out, "  %s %.4f", name, lm ? -v : v);
    else fprintf(pr->out, "  %s n/a", name);
}

/* An evaluation's scores, the end of its step's line; a run with no test file has no test
 * score (the run said so at its start), so that part is left out. */
static void eval_scores(const progress *pr, const dz_train_progress *p) {
    score(pr, p->lm ? "dev loss" : "dev acc", p->lm, p->dev_accuracy);
    if (isfinite(p->test_accuracy)) score(pr, p->lm ? "test loss" : "test acc", p->lm, p->test_accuracy);
    score(pr, p->lm ? "best dev loss" : "best dev", p->lm, p->best_dev_accuracy);
}

/* A step's one line: its loss, g, lr, the rate and ETA when a line is due (full), and its
 * evaluation's scores when it has one; step 0 is the evaluation before training. */
static void step_line(progress *pr, const dz_train_progress *p, const char *rate, const char *eta, int full) {
    if (pr->tty) fprintf(stderr, "\r\033[K");
    if (p->step == 0) fprintf(pr->out, "step 0/%d  before training", p->steps);
    else if (full)
        fprintf(pr->out, "step %d/%d  loss %.4f  g %+.4e  lr %.3e  %s  ETA %s", p->step, p->steps, p->loss, p->g, p->lr,
                rate, eta);
    else fprintf(pr->out, "step %d/%d  loss %.4f", p->step, p->steps, p->loss);
    if (p->has_eval) eval_scores(pr, p);
    if (p->has_eval && !full && p->step > 0) fprintf(pr->out, "  (%s)", rate);
    fprintf(pr->out, "\n");
    fflush(pr->out);
    if (full) pr->last_line_step = p->step;
}

static void on_progress(const dz_train_progress *p, void *user) {
    progress *pr = user;
    if (pr->kill_step > 0 && p->step == pr->kill_step && !p->replayed) raise(pr->kill_signal);
    if (pr->rank != 0 || pr->quiet) return; /* rank 0 speaks for the job */
    if (p->replayed) {
        fprintf(stderr, "distzo: resuming at step %d of %d\n", p->step, p->steps);
        pr->last_line_step = p->step;
        return;
    }
    const double rate = p->steps_per_s; /* training steps only: evaluations do not slow the ETA's rate */
    char eta[32], speed[32];
    dz_cli_fmt_duration(rate > 0 ? (p->steps - p->step) / rate : NAN, eta, sizeof eta);
    dz_cli_fmt_rate(rate, speed, sizeof speed);
    const int every = pr->log_every > 0 ? pr->log_every : pr->tty ? 0 : p->steps >= 20 ? p->steps / 20 : 1;
    const int due = p->step > 0 && every > 0 && (p->step - pr->last_line_step >= every || p->step == p->steps);
    if (due || p->has_eval) step_line(pr, p, speed, eta, due); /* once per step, its evaluation included */
    if (p->step == 0) return;
    if (pr->tty) {
        const int width = 24, filled = (int)((double)width * p->step / p->steps);
        char bar[32];
        for (int i = 0; i < width; i++) bar[i] = i < filled ? '#' : '.';
        bar[width] = '\0';
        fprintf(stderr, "\r[%s] %d/%d  %s  loss %.4f  g %+.3e  lr %.2e  ETA %s\033[K", bar, p->step, p->steps, speed,
                p->loss, p->g, p->lr, eta);
        fflush(stderr);
    }
}

/* The command line's own settings (those not in dz_train_config, or named differently). */
typedef struct train_opts {
    dz_cli_train_values v; /* those train shares with serve */
    const char *model, *data, *out, *test, *config, *estimator;
    const char *resume_from; /* OLD_RUN:STEP */
    const char *gpu_math;    /* --gpu-math: joined into c->layout.backend */
    dz_cli_gpus gpus;        /* --gpus-per-node, --share-gpus: this rank's GPU, joined in train_run */
    char from_run[4096], from_config[4200];
    int from_step;
    int resume, no_fuse, threads, no_share, node_size, log_every, quiet, json;
    int keep_quantized; /* refused: full-parameter training writes the base */
    float rank_timeout;
} train_opts;

static int train_settings(dz_train_config *c, const train_opts *t);
static int store_options_need_disk(const dz_train_config *c, int argc, char **argv);
static int train_run(dz_train_config *c, const train_opts *t);

/* The options' values from settings (run.json's or a --config file's): what the command
 * line then goes over. */
static void options_from_settings(train_opts *t, const dz_train_config *c) {
    t->model = c->model;
    t->v.master = dz_dtype_name(c->store.master_dtype);
    t->v.perturbation = c->optim.rademacher ? "rademacher" : "gaussian";
    t->v.rng = c->optim.rng_v2 ? "v2" : "v1";
    t->estimator = dz_zo_estimator_name(c->optim.estimator);
    t->v.schedule = c->optim.lr_schedule == DZ_LR_LINEAR ? "linear" : c->optim.lr_schedule == DZ_LR_COSINE ? "cosine"
                                                                                                    : "constant";
    t->v.seed = c->optim.seed, t->v.data_seed = c->data.seed, t->v.wd = c->optim.wd;
    t->no_fuse = !c->optim.fuse, t->no_share = !c->data.share_prompts;
}

/* --config FILE: its settings over c (dz_train_config_load_file, run.json's field table),
 * then its keys for the command line's own options (--out, --threads, --log-every...)
 * through the option parser, as if given first on the command line. *doc keeps the
 * strings those point into. */
static int load_config(const dz_cmd_spec *cmd, const dz_opt *opts, train_opts *t, dz_train_config *c, char **strings,
                       cJSON **doc) {
    const char *own[80];
    const dz_opt *own_opt[80];
    char names[80][32]; /* the long names ("quiet" of "quiet|q") */
    int n_own = 0;
    for (const dz_opt *o = opts; o->name && n_own < 79; o++) {
        snprintf(names[n_own], sizeof names[0], "%.*s", (int)strcspn(o->name, "|"), o->name);
        if (!dz_train_config_has_key(names[n_own])) own_opt[n_own] = o, own[n_own] = names[n_own], n_own++;
    }
    own[n_own] = NULL;
    dz_error err = {0};
    const char *path = t->config;
    if (dz_train_config_load_file(path, c, own, strings, &err) != DZ_OK) return dz_cli_fail(&err);
    options_from_settings(t, c);
    t->data = c->data.train, t->test = c->data.test;
    char *text = NULL;
    if (dz_read_file(path, &text, NULL, &err) != DZ_OK) return dz_cli_fail(&err);
    *doc = cJSON_Parse(text); /* parsed and checked once already */
    free(text);
    char *toks[130], nums[64][32];
    int n = 0, n_nums = 0;
    toks[n++] = "train";
    for (const cJSON *v = *doc ? (*doc)->child : NULL; v && n < 128 && n_nums < 64; v = v->next) {
        const dz_opt *o = NULL;
        const char *name = NULL;
        for (int k = 0; k < n_own && !o; k++)
            if (!strcmp(own[k], v->string)) o = own_opt[k], name = own[k];
        if (!o) continue; /* a setting, applied above */
        if (!strcmp(name, "config") || !strcmp(name, "resume") || !strcmp(name, "resume-from"))
            return dz_cli_failf("%s: key '%s': which run to start from is the command line's (--%s), not a config's",
                                path, name, name);
        const char *want = NULL;
        if (o->type == DZ_OPT_FLAG && !cJSON_IsBool(v)) want = "true or false";
        else if (o->type == DZ_OPT_STR && !cJSON_IsString(v)) want = "a string";
        else if (o->type == DZ_OPT_INT && !(cJSON_IsNumber(v) && v->valuedouble == floor(v->valuedouble) &&
                                            fabs(v->valuedouble) <= INT_MAX))
            want = "an integer";
        else if (o->type == DZ_OPT_FLOAT && !cJSON_IsNumber(v)) want = "a number";
        if (want) return dz_cli_failf("%s: field '%s' must be %s", path, v->string, want);
        if (o->type == DZ_OPT_FLAG && !cJSON_IsTrue(v)) continue;
        snprintf(nums[n_nums], sizeof nums[0], "--%s", name);
        toks[n++] = nums[n_nums++];
        if (o->type == DZ_OPT_STR) toks[n++] = v->valuestring;
        else if (o->type != DZ_OPT_FLAG) {
            snprintf(nums[n_nums], sizeof nums[0], o->type == DZ_OPT_INT ? "%.0f" : "%.9g", v->valuedouble);
            toks[n++] = nums[n_nums++];
        }
    }
    const int rc = dz_cli_parse(cmd, opts, n, toks, NULL);
    return rc < 0 ? 0 : rc;
}

/* --resume-from OLD_RUN:STEP: OLD_RUN's run.json is the --config of the new run. */
static int resume_from(train_opts *t) {
    const char *colon = strrchr(t->resume_from, ':');
    char *end = NULL;
    const long step = colon ? strtol(colon + 1, &end, 10) : -1;
    if (!colon || colon == t->resume_from || !end || end == colon + 1 || *end || step < 0 || step > INT_MAX)
        return dz_cli_failf("option --resume-from: '%s' is not OLD_RUN:STEP (a run folder and a step of its log, "
                            "e.g. runs/a:500)", t->resume_from);
    if (t->resume || t->config)
        return dz_cli_failf("--resume-from starts a new run from another's settings: not with --%s",
                            t->resume ? "resume" : "config");
    snprintf(t->from_run, sizeof t->from_run, "%.*s", (int)(colon - t->resume_from), t->resume_from);
    snprintf(t->from_config, sizeof t->from_config, "%s/run.json", t->from_run);
    t->from_step = (int)step;
    t->config = t->from_config;
    return 0;
}

/* train's own options (those serve does not share) into out, then the shared ones; out
 * holds TRAIN_OPTS_CAP entries, the last left {0}. */
enum { TRAIN_OPTS_CAP = 76 };
static void train_option_table(dz_opt *out, dz_train_config *c, train_opts *t) {
    const dz_opt own[] = {
        {"config", DZ_OPT_STR, &t->config, "JSON file of options: keys are their long names ({\"lr\": 1e-5, \"steps\": 100, "
                                          "\"no-fuse\": true}), or a run's run.json to restart it; the command line overrides it"},
        {"model", DZ_OPT_STR, &t->model, "model (default: stories260K from the assets)"},
        {"objective", DZ_OPT_STR, &c->data.objective, "what a step minimises: ce (default), accuracy (minus the batch's "
         "accuracy; classification) or f1 (minus the greedy answers' F1; squad, drop): non-differentiable"},
        {"demos", DZ_OPT_INT, &c->data.demos, "demonstrations from the training examples before each prompt (MeZO's ICL; default 0)"},
        {"gen-tokens", DZ_OPT_INT, &c->data.gen_tokens, "squad, drop: most tokens of a greedy answer (default 50)"},
        {"data", DZ_OPT_STR, &t->data, "training file, or a folder with train.tsv and dev.tsv (default: the assets' SST-2)"},
        {"test", DZ_OPT_STR, &t->test, "file to report accuracy on (default: the dev file of a --data folder, or of the default data; none beside a --data file)"},
        {"tokenizer", DZ_OPT_STR, &c->tokenizer, "tokenizer (default: the model's own)"},
        {"estimator", DZ_OPT_STR, &t->estimator, "mezo (default), sparse (Sparse-MeZO: the smallest-|w| part of each row), lozo (low-rank z = U V^T), fzoo (FZOO: N one-sided Rademacher directions, normalized) or "
         "hizoo (HiZOO: z and update over sqrt of a diagonal Hessian estimate; 3 forwards a step, 4 bytes a parameter)"},
        {"fzoo-directions", DZ_OPT_INT, &c->optim.fzoo_directions, "fzoo: directions per step, N + 1 forwards (default 8)"},
        {"sparse-density", DZ_OPT_FLOAT, &c->optim.sparse_density, "sparse: fraction of each weight row perturbed (default 0.25)"},
        {"lozo-rank", DZ_OPT_INT, &c->optim.lozo_rank, "lozo: rank of U V^T (default 2)"},
        {"lozo-nu", DZ_OPT_INT, &c->optim.lozo_nu, "lozo: steps between fresh V (default 50)"},
        DZ_CLI_PEFT_OPTIONS(c),
        {"hizoo-smooth", DZ_OPT_FLOAT, &c->optim.hizoo_smooth, "hizoo: EMA weight alpha of the Hessian estimate (default 1e-6)"},
        {"hizoo-rank", DZ_OPT_INT, &c->optim.hizoo_rank, "hizoo: 0 (default) diagonal Hessian; 1 HiZOO-L, a weight "
         "matrix's Hessian in rank-1 row x column factors: 4 (rows + cols + 1) bytes a matrix; SmolLM2-135M about 0.02 "
         "bytes a parameter"},
        {"adapter", DZ_OPT_STR, &c->peft.lora_init, "lora, prefix: start from this PEFT folder (its r, alpha and "
         "targets, or its num_virtual_tokens, must be the run's) instead of the init; run.json keeps the path, as it "
         "keeps --model's"},
        {"dev-examples", DZ_OPT_INT, &c->data.dev_examples, "model-selection examples drawn (default 500)"},
        {"eval-every", DZ_OPT_INT, &c->schedule.eval_every, "steps between evaluations (default 500; 0 = at the end); "
                                                            "one more before training (step 0) and after the last step"},
        {"checkpoint-every", DZ_OPT_INT, &c->schedule.checkpoint_every, "steps between checkpoints (default 1000; 0: none, not even at the end: the seed log alone keeps the run, which export and --resume replay)"},
        {"keep-checkpoints", DZ_OPT_INT, &c->schedule.keep_checkpoints, "numbered checkpoints to keep, newest first (default 1; only those this run wrote are ever removed)"},
        {"log-sync-every", DZ_OPT_INT, &c->schedule.log_sync_every, "fsync the seed log and metrics every N steps (default 64; 0: only when a checkpoint is written and when the run ends)"},
        {"log-every", DZ_OPT_INT, &t->log_every, "a progress line every N steps (default: on a terminal a live bar, "
                                                "piped every steps/20)"},
        {"quiet|q", DZ_OPT_FLAG, &t->quiet, "no progress or evaluation lines, only warnings, errors and the summary"},
        {"json", DZ_OPT_FLAG, &t->json, "print the summary as JSON on stdout (progress then goes to stderr)"},
        {"max-bad-steps", DZ_OPT_INT, &c->optim.max_bad_steps, "stop after N non-finite losses in a row (default 5)"},
        {"no-fuse", DZ_OPT_FLAG, &t->no_fuse, "apply each update at once instead of fusing it into the next step"},
        {"no-share-prompt", DZ_OPT_FLAG, &t->no_share, "run every candidate as a full sequence (MeZO's way)"},
        {"store", DZ_OPT_STR, &c->store.spec,
         "ram (default), disk:PATH or disk-nocache:PATH: master weights in a file, streamed (nocache: the file's pages "
         "are dropped from the page cache as they are used)"},
        {"max-resident", DZ_OPT_INT, &c->store.max_resident_mb,
         "with a disk store: keep what training allocates (resident weights, activations, buffers, the estimator's "
         "state) under this many MB, streaming the global block if needed, or refuse to start; the process itself "
         "adds 10-20 MB"},
        {"stream-globals", DZ_OPT_FLAG, &c->store.stream_globals,
         "with a disk store: keep the embeddings and head in it too (read by rows as used)"},
        {"keep-quantized", DZ_OPT_FLAG, &t->keep_quantized,
         "with --peft lora or prefix: a GGUF base's blocks stay quantized, read-only (the same bits as dequantized at load); "
         "refused without an adapter: training every parameter updates the base"},
        {"out", DZ_OPT_STR, &t->out, "run folder (default runs/default)"},
        {"resume-from", DZ_OPT_STR, &t->resume_from, "OLD_RUN:STEP: a new run in --out that continues OLD_RUN from "
         "STEP of its seed log with its settings, where --lr, --schedule, --warmup, --steps, --max-bad-steps and "
         "--eval-every may change (after a divergence: a lower --lr)"},
        {"resume", DZ_OPT_FLAG, &t->resume, "continue the run in --out, bitwise as if never stopped: its run.json settings apply, --steps "
                                          "may raise them, any other setting given must equal the run's"},
        dz_cli_threads_option(&t->threads, "threads per process (default: $OMP_NUM_THREADS, else the cores / processes on the machine)"),
        dz_cli_backend_option(&c->layout.backend),
        dz_cli_gpu_math_option(&t->gpu_math),
        {"max-device-memory", DZ_OPT_INT, &c->layout.max_device_mb,
         "with a device backend: use at most this many MB of its memory; above it the layer masters stay in host "
         "memory and stream through the device block by block (refused where even that does not fit)"},
        dz_cli_gpus_option(&t->gpus),
        dz_cli_share_gpus_option(&t->gpus),
        {"pertp", DZ_OPT_INT, &c->layout.pertp, "mpirun: perturbation parallelism, 1 or 2 ranks per +/- pair (default 1)"},
        {"dp", DZ_OPT_INT, &c->layout.dp, "mpirun: data-parallel groups (default: ranks / pertp)"},
        {"verify-every", DZ_OPT_INT, &c->layout.verify_every, "compare weight checksums across nodes every N steps (default 0)"},
        {"node-size", DZ_OPT_INT, &t->node_size, "mpirun: ranks per node sharing one copy of the weights (default: a machine)"},
        {"rank-timeout", DZ_OPT_FLOAT, &t->rank_timeout, "mpirun: end the job, naming the rank, when one gives no sign of life for this many seconds (default 300; 0 = wait forever)"},
    };
    _Static_assert(sizeof own / sizeof own[0] + DZ_CLI_TRAIN_OPTS < TRAIN_OPTS_CAP, "raise TRAIN_OPTS_CAP");
    memcpy(out, own, sizeof own);
    dz_cli_train_options(out + sizeof own / sizeof own[0], c, &t->v, DZ_CLI_TRAIN);
}

/* The estimators' own options on a new run (a resumed run's run.json has them): FZOO's
 * directions are the step's samples (q), Rademacher; an estimator's own option typed for
 * another estimator would be ignored (a --config's values are the file's: not refused). */
static int estimator_settings(dz_train_config *c, int resumed, int argc, char **argv) {
    dz_train_optim *o = &c->optim;
    static const struct { const char *option, *estimator; dz_zo_estimator owner; } knobs[] = {
        {"sparse-density", "sparse", DZ_ZO_SPARSE}, {"lozo-rank", "lozo", DZ_ZO_LOZO},
        {"lozo-nu", "lozo", DZ_ZO_LOZO}, {"hizoo-smooth", "hizoo", DZ_ZO_HIZOO},
        {"hizoo-rank", "hizoo", DZ_ZO_HIZOO}};
    int q_given = 0, gaussian = 0;
    const int directions_given = dz_cli_option_given(argc, argv, "fzoo-directions");
    for (int i = 1; i < argc; i++) {
        q_given |= !strncmp(argv[i], "--spsa-samples", 14);
        gaussian |= !strncmp(argv[i], "--perturbation", 14) && !o->rademacher;
    }
    if (resumed) return 0;
    for (size_t k = 0; k < sizeof knobs / sizeof knobs[0]; k++)
        if (o->estimator != knobs[k].owner && dz_cli_option_given(argc, argv, knobs[k].option))
            return dz_cli_failf("option --%s: without --estimator %s it would be ignored", knobs[k].option,
                                knobs[k].estimator);
    if (o->estimator != DZ_ZO_FZOO) return 0;
    /* a config may say its directions again, or a FZOO run.json its old ones under new --fzoo-directions */
    if (q_given || (!directions_given && o->q != 1 && o->q != o->fzoo_directions))
        return dz_cli_failf("option --spsa-samples: --estimator fzoo takes its samples per step from --fzoo-directions");
    if (gaussian) return dz_cli_failf("option --perturbation: --estimator fzoo perturbs with Rademacher directions only");
    o->q = o->fzoo_directions, o->rademacher = 1;
    return 0;
}

/* A --config file (a run.json, to branch a run) with another --estimator or --peft on the
 * command line: the settings that belonged to the file's estimator or adapter return to
 * their defaults, unless the command line gives them, so that they are not refused as
 * another method's (said on stderr). */
static void config_method_switched(dz_train_config *c, const dz_train_config *file, int argc, char **argv) {
    dz_train_config d;
    dz_train_config_default(&d);
#define RESET(option, field) \
    if (!dz_cli_option_given(argc, argv, option)) c->field = d.field
    const dz_zo_estimator was = file->optim.estimator;
    if (c->optim.estimator != was) {
        if (was == DZ_ZO_SPARSE) RESET("sparse-density", optim.sparse_density);
        if (was == DZ_ZO_LOZO) { RESET("lozo-rank", optim.lozo_rank); RESET("lozo-nu", optim.lozo_nu); }
        if (was == DZ_ZO_HIZOO) { RESET("hizoo-smooth", optim.hizoo_smooth); RESET("hizoo-rank", optim.hizoo_rank); }
        if (was == DZ_ZO_FZOO) { /* its directions were the samples, and Rademacher */
            RESET("fzoo-directions", optim.fzoo_directions);
            RESET("spsa-samples", optim.q);
            RESET("perturbation", optim.rademacher);
        }
        fprintf(stderr, "distzo: --estimator %s over the config's %s: %s's settings are left at their defaults\n",
                dz_zo_estimator_name(c->optim.estimator), dz_zo_estimator_name(was), dz_zo_estimator_name(was));
    }
    const char *had = file->peft.method && strcmp(file->peft.method, "none") ? file->peft.method : "none";
    const char *has = c->peft.method && strcmp(c->peft.method, "none") ? c->peft.method : "none";
    if (strcmp(had, has)) {
        if (!strcmp(had, "lora")) {
            RESET("lora-rank", peft.lora_rank);
            RESET("lora-alpha", peft.lora_alpha);
            RESET("lora-targets", peft.lora_targets);
        }
        if (!strcmp(had, "prefix")) RESET("prefix-tokens", peft.prefix_tokens);
        if (strcmp(had, "none"))
            fprintf(stderr, "distzo: --peft %s over the config's %s: the %s's settings are left at their defaults\n",
                    has, had, had);
    }
#undef RESET
}

static const dz_cmd_spec train_cmd = {
    .name = "train", .usage = "[--config FILE] [--model M] [--data D] [--out RUN_DIR] [--resume] [options]",
    .summary = "Fine-tunes with MeZO (two-sided SPSA): two forward passes per step, no gradients.\n"
               "RUN_DIR gets run.json (the settings, resolved), seeds.log, metrics.jsonl, metrics.csv,\n"
               "events.out.tfevents.* (TensorBoard: tensorboard --logdir RUN_DIR), checkpoint-N/ and best/\n"
               "(HF layout). Steps count from 1 as checkpoint-N does; step 0 is the evaluation before training."};

int dz_cmd_train(int argc, char **argv) {
    dz_train_config c;
    dz_train_config_default(&c);
    /* Settings found to work for stories260K on SST-2 (see README): MeZO's. */
    c.optim.lr = 3e-5f;
    /* c.optim.steps: 4000 (the default) unless given; on --resume, run.json's unless given */
    c.schedule.eval_every = 500;
    c.schedule.checkpoint_every = 1000;
    train_opts t = {.v = dz_cli_train_values_default(), .out = "runs/default", .estimator = "mezo",
                    .rank_timeout = DZ_COMM_DEFAULT_TIMEOUT_S, .gpus = DZ_CLI_GPUS_UNSET};
    dz_opt opts[TRAIN_OPTS_CAP] = {{0}};
    train_option_table(opts, &c, &t);
    c.data.gen_tokens = DZ_OPT_UNSET; /* 0 (run.json's "50") unless given */
    c.layout.pertp = c.layout.dp = DZ_OPT_UNSET; /* 0 is the layout's "follow the ranks", not a count to type */
    int rc = dz_cli_parse(&train_cmd, opts, argc, argv, NULL);
    if (rc >= 0) return rc;
    if (c.layout.pertp != DZ_OPT_UNSET && c.layout.pertp < 1)
        return dz_cli_failf("option --pertp: %d; 1 or 2 ranks per +/- pair (leave it out to follow the ranks)", c.layout.pertp);
    if (c.layout.dp != DZ_OPT_UNSET && c.layout.dp < 1)
        return dz_cli_failf("option --dp: %d; give a positive count of groups (leave it out: ranks / pertp)", c.layout.dp);
    if (c.layout.pertp == DZ_OPT_UNSET) c.layout.pertp = 0;
    if (c.layout.dp == DZ_OPT_UNSET) c.layout.dp = 0;
    const dz_cli_train_cmdline cmdline = {.data = c.data, .no_share = t.no_share, .task_file = t.v.task_file};
    if (c.data.gen_tokens != DZ_OPT_UNSET && c.data.gen_tokens < 1) /* given, before a config or run.json sets it */
        return dz_cli_failf("option --gen-tokens: %d tokens; give at least 1", c.data.gen_tokens);
    if (c.data.gen_tokens == DZ_OPT_UNSET) c.data.gen_tokens = 0; /* run.json's "the default, 50" */
    if ((rc = dz_cli_train_given(&c))) return rc;
    if (t.out && !t.out[0]) return dz_cli_failf("option --out: an empty path (the run folder)");
    char *run_strings = NULL, *config_strings = NULL; /* run.json's / the config's settings are the defaults */
    cJSON *config_doc = NULL;
    dz_error err = {0};
    if (t.resume && t.config)
        return dz_cli_failf("--config with --resume: a resumed run keeps its run.json settings (to start a new run "
                            "from them: --config %s/run.json --out NEW)", t.out);
    if (t.resume_from && (rc = resume_from(&t))) return rc;
    if (t.resume) {
        if (dz_train_config_load(t.out, &c, &run_strings, &err) != DZ_OK) return dz_cli_fail(&err);
        options_from_settings(&t, &c);
        t.data = NULL, t.test = NULL, t.v.task_file = NULL;
    } else if (t.config) {
        rc = load_config(&train_cmd, opts, &t, &c, &config_strings, &config_doc);
    }
    const dz_train_config from_file = c; /* a --config's settings, before the command line's */
    if (!rc && (t.resume || t.config)) dz_cli_parse(&train_cmd, opts, argc, argv, NULL); /* parsed once already: cannot fail */
    if (!rc && (t.resume || t.resume_from) && t.v.task_file) /* fills only what is unset: the run's prompt is set */
        rc = dz_cli_task_file_matches_run(t.v.task_file, &c.data, &cmdline.data, t.resume ? t.out : t.from_run);
    c.peft.keep_quantized = t.keep_quantized && c.peft.method && /* the base read-only under an adapter */
                            (!strcmp(c.peft.method, "lora") || !strcmp(c.peft.method, "prefix"));
    if (!rc && t.keep_quantized && !c.peft.keep_quantized)
        rc = dz_cli_failf("option --keep-quantized: full-parameter training updates every weight of the base, which "
                          "a quantized base held as loaded cannot take: add --peft lora to train an adapter over it, "
                          "or leave the option out (the GGUF is then dequantized at load)");
    if (!rc) rc = train_settings(&c, &t);
    if (!rc && dz_zo_estimator_parse(t.estimator, &c.optim.estimator) != 0)
        rc = dz_cli_failf("option --estimator: '%s' is not mezo, sparse, lozo, fzoo or hizoo", t.estimator);
    if (!rc && t.config && !t.resume_from) config_method_switched(&c, &from_file, argc, argv);
    if (!rc) rc = estimator_settings(&c, t.resume || t.resume_from, argc, argv);
    if (!rc) rc = store_options_need_disk(&c, argc, argv);
    if (!rc) {
        c.optim.fuse = !t.no_fuse;
        c.data.share_prompts = !t.no_share;
        c.out_dir = t.out;
        /* --resume-from: the old run's run.json is the config, its values the run's own */
        rc = dz_cli_train_refuse_unused(&c, &cmdline, t.v.task_file, t.config, t.resume || t.resume_from);
        if (!rc) rc = dz_cli_refuse_adapter_alone(&c, argc, argv);
    }
    if (!rc && c.peft.lora_dropout != 0.0f) /* not in run.json: a resume is checked here too */
        rc = dz_cli_failf("option --lora-dropout: %g; a ZO step has no dropout (both perturbed forwards must see the "
                          "same network): use 0", (double)c.peft.lora_dropout);
    dz_cli_gpu_math_join(&c.layout.backend, t.gpu_math);
    if (!rc) rc = train_run(&c, &t);
    free(run_strings);
    free(config_strings);
    cJSON_Delete(config_doc);
    return rc;
}

/* --max-resident and --stream-globals shape a disk store: without one they would be ignored
 * (the command line's own; a resumed run.json may keep them under --store ram). */
static int store_options_need_disk(const dz_train_config *c, int argc, char **argv) {
    if (c->store.spec && !strncmp(c->store.spec, "disk", 4)) return 0;
    static const char *const options[] = {"max-resident", "stream-globals"};
    for (size_t k = 0; k < 2; k++)
        if (dz_cli_option_given(argc, argv, options[k]))
            return dz_cli_failf("option --%s: without --store disk:PATH it would be ignored", options[k]);
    return 0;
}

/* The settings from the options: names to enums, the defaults' paths, absolute paths
 * (run.json keeps them, so --resume works from any directory). */
static int train_settings(dz_train_config *c, const train_opts *t) {
    const int resume = t->resume;
    const char *data = t->data, *test = t->test;
    static char data_buf[4096], train_buf[4200], test_buf[4200]; /* the same size: dz_train_data_folder */
    static char abs_train[PATH_MAX], abs_test[PATH_MAX], abs_adapter[PATH_MAX];
    dz_train_data *d = &c->data;
    int rc = dz_cli_train_apply(c, &t->v, DZ_CLI_TRAIN, t->model);
    if (rc) return rc;
    if (!data && !resume) data = dz_cli_asset("sst2", data_buf, sizeof data_buf);
    if (data && dz_is_dir(data)) { /* a preset's release file names, or train/dev */
        dz_error err = {0};
        if (dz_train_data_folder(d->task, data, train_buf, test_buf, sizeof train_buf, &err) != DZ_OK)
            return dz_cli_fail(&err);
        d->train = train_buf;
        d->test = test ? test : test_buf[0] ? test_buf : NULL;
    } else if (data) {
        d->train = data;
        d->test = test || !resume ? test : d->test; /* a resume given only --data FILE keeps the run's test file */
    } else if (test) {
        d->test = test;
    }
    if (d->train && realpath(d->train, abs_train)) d->train = abs_train;
    if (d->test && realpath(d->test, abs_test)) d->test = abs_test;
    /* a new run's --adapter (a resume or a branch keeps run.json's as written; run_json.c compares the
     * folders a path names, so a relative --adapter given again still matches) */
    if (!resume && !t->resume_from && c->peft.lora_init && realpath(c->peft.lora_init, abs_adapter))
        c->peft.lora_init = abs_adapter;
    return 0;
}

/* A score as the user reads it (accuracy, or the loss for LM: the trainer's scores are
 * minus the loss), null or n/a when there is none. */
static double shown(const dz_train_result *r, double score) { return r->lm ? -score : score; }

static void json_number(double v) {
    if (isfinite(v)) printf("%.6g", v);
    else printf("null");
}

/* train --json: one object on stdout. */
static void summary_json(const train_opts *t, const dz_train_result *r, const uint64_t *rss, int ranks) {
    printf("{\"run\": ");
    dz_cli_json_string(stdout, t->out);
    printf(", \"already_finished\": %s, \"steps\": %d, \"steps_run\": %d, \"seconds\": %.3f, \"steps_per_s\": ",
           r->was_finished ? "true" : "false", r->steps_done, r->steps_run, r->seconds);
    json_number(r->step_seconds > 0 ? r->steps_run / r->step_seconds : NAN);
    printf(", \"metric\": \"%s\"", r->lm ? "loss" : "accuracy");
    const struct { const char *name; double dev, test; } at[] = {
        {"before", r->zero_shot_dev, r->zero_shot_test}, {"final", r->final_dev, r->final_test},
        {"best", r->best_dev, r->best_test}};
    for (int i = 0; i < 3; i++) {
        printf(", \"%s\": {", at[i].name);
        if (i == 2) printf("\"step\": %d, ", r->best_step);
        printf("\"dev\": ");
        json_number(shown(r, at[i].dev));
        printf(", \"test\": ");
        json_number(shown(r, at[i].test));
        printf("}");
    }
    printf(", \"peak_rss_bytes\": [");
    for (int k = 0; k < ranks; k++) printf("%s%llu", k ? ", " : "", (unsigned long long)rss[k]);
    printf("], \"bytes_per_step\": %.0f}\n", r->step_bytes);
    fflush(stdout);
}

static void summary_text(const train_opts *t, const dz_train_result *r, const uint64_t *rss, int ranks,
                         unsigned long long sent) {
    if (ranks > 0) {
        printf("memory: peak RSS");
        for (int k = 0; k < ranks && k < 16; k++) printf("%s %.1f MB", k ? "," : "", rss[k] / 1048576.0);
        printf(ranks > 1 ? " (ranks 0..%d; shared weights count in each)\n" : "\n", ranks - 1);
        if (ranks > 1)
            printf("network: rank 0 exchanged %.0f bytes per step (%llu in all, setup and evaluations included)\n",
                   r->step_bytes, sent);
    }
    if (r->was_finished) {
        printf("nothing to do: the run in %s already finished its %d steps (pass a larger --steps to extend it)\n",
               t->out, r->steps_done);
        return;
    }
    /* no test set (a small file split into train + dev): the dev scores are the run's */
    const int dev = !isfinite(r->zero_shot_test) && !isfinite(r->final_test) && isfinite(r->final_dev);
    const double v[3] = {shown(r, dev ? r->zero_shot_dev : r->zero_shot_test),
                         shown(r, dev ? r->final_dev : r->final_test), shown(r, dev ? r->best_dev : r->best_test)};
    char txt[3][32];
    for (int i = 0; i < 3; i++) snprintf(txt[i], sizeof txt[i], isfinite(v[i]) ? "%.4f" : "n/a", v[i]);
    printf("done: %d steps in %.1f s; %s %s before %s, final %s, %s (step %d) %s; run in %s\n", r->steps_done,
           r->seconds, dev ? "dev" : "test", r->lm ? "loss" : "accuracy", txt[0], txt[1],
           dev ? "best" : "at best dev", r->best_step, txt[2], t->out);
}

/* Ctrl-C: the run stops before its next step (a second Ctrl-C: at once, the default). */
static void on_interrupt(int sig) {
    (void)sig;
    dz_train_request_stop();
    static const char msg[] = "\ndistzo: stopping after this step (Ctrl-C again to stop at once)\n";
    const ssize_t n = write(2, msg, sizeof msg - 1);
    (void)n;
}

/* One process only: ranks could see the signal at different steps and wait on each other
 * (mpirun's Ctrl-C ends the job). An ignored SIGINT (nohup, a script's & job) stays ignored. */
static int catch_interrupt(int ranks) {
    struct sigaction old, sa = {.sa_handler = on_interrupt, .sa_flags = SA_RESTART | SA_RESETHAND};
    sigemptyset(&sa.sa_mask);
    return ranks == 1 && sigaction(SIGINT, NULL, &old) == 0 && old.sa_handler != SIG_IGN &&
           sigaction(SIGINT, &sa, NULL) == 0;
}

/* The job: the communicator, threads, the run, its summary. */
static int train_run(dz_train_config *c, const train_opts *t) {
    const int resume = t->resume, node_size = t->node_size;
    int threads = t->threads;
    const float rank_timeout = t->rank_timeout;
    int rc;
    dz_error err = {0};
    dz_comm *comm = NULL;
    if (!(rank_timeout >= 0.0f)) return dz_cli_failf("option --rank-timeout: %g is negative", (double)rank_timeout);
    if (dz_comm_init(NULL, NULL, node_size, 0, &comm, &err) != DZ_OK) return dz_cli_fail(&err);
    dz_comm_set_timeout(comm, rank_timeout);
    const int rank = dz_comm_rank(comm), ranks = dz_comm_size(comm);
    const char *omp_threads = getenv("OMP_NUM_THREADS"); /* else the pool's default, like OpenMP's */
    if (threads == 0 && ranks > 1 && !(omp_threads && *omp_threads)) { /* the cores split between the ranks */
        const long cores = sysconf(_SC_NPROCESSORS_ONLN);
        threads = cores / dz_comm_machine_ranks(comm) > 1 ? (int)(cores / dz_comm_machine_ranks(comm)) : 1;
    }
    if (rank != 0 || t->quiet) dz_log_set_level(DZ_LOG_WARN);
    const int machine_rank = dz_comm_machine_rank(comm), machine_ranks = dz_comm_machine_ranks(comm);
    if ((rc = dz_cli_gpus_join(&c->layout.backend, &t->gpus, machine_rank, machine_ranks)) ||
        (rc = dz_cli_start(&(dz_cli_preamble){.threads = threads, .backend = c->layout.backend}, NULL, NULL))) {
        dz_comm_finalize(comm);
        return rc;
    }
    if (rank == 0 && ranks > 1)
        dz_log(DZ_LOG_INFO, "%d ranks on %d node(s), %d threads each; %s", ranks, dz_comm_n_nodes(comm),
               dz_runtime_threads(), dz_comm_backend(comm));
    if (ranks == 1) { /* options of a job of several processes (mpirun): nothing for them to do in one */
        const struct { const char *option; int set; } multi[] = {
            {"node-size", node_size > 0}, {"verify-every", c->layout.verify_every > 0},
            {"rank-timeout", rank_timeout != DZ_COMM_DEFAULT_TIMEOUT_S}};
        for (size_t k = 0; k < sizeof multi / sizeof multi[0]; k++)
            if (multi[k].set)
                dz_log(DZ_LOG_WARN, "--%s: this run is one process (not under mpirun): it has no effect", multi[k].option);
    }
    progress pr = {.tty = rank == 0 && !t->quiet && isatty(2), .rank = rank, .kill_signal = SIGKILL,
                   .log_every = t->log_every, .quiet = t->quiet, .out = t->json ? stderr : stdout};
    if (t->log_every < 0) {
        dz_comm_finalize(comm);
        return dz_cli_failf("option --log-every: %d is negative", t->log_every);
    }
    const char *kill = getenv("DISTZO_TEST_KILL");
    int kill_rank = -1;
    char how[8] = "";
    if (kill && sscanf(kill, "%d:%d:%7s", &kill_rank, &pr.kill_step, how) >= 2 && kill_rank != rank) pr.kill_step = 0;
    if (!strcmp(how, "stop")) pr.kill_signal = SIGSTOP;
    if (!strcmp(how, "int")) pr.kill_signal = SIGINT; /* a Ctrl-C at that step */
    c->layout.comm = comm;
    dz_train_result res;
    const int caught = catch_interrupt(ranks);
    dz_status st = t->resume_from ? dz_train_branch(t->from_run, t->from_step, c, on_progress, &pr, &res, &err)
                                  : dz_train(c, resume, on_progress, &pr, &res, &err);
    if (caught) signal(SIGINT, SIG_DFL);
    if (pr.tty) fprintf(stderr, "\n");
    if (st == DZ_OK && res.interrupted) { /* 130: as a shell reports a Ctrl-C */
        fprintf(stderr, "distzo: interrupted after step %d of %d; the run in %s continues with: distzo train --out %s "
                "--resume\n", res.steps_done, c->optim.steps, t->out, t->out);
        dz_comm_finalize(comm);
        return 130;
    }
    if (st != DZ_OK) {
        rc = dz_cli_fail(&err);
        if (ranks > 1) { /* a rank may be waiting for this one: end the whole job rather than hang */
            fflush(NULL);
            dz_comm_abort(comm, rc);
        }
        dz_comm_finalize(comm);
        return rc;
    }
    uint64_t *rss = calloc((size_t)ranks, sizeof *rss); /* each rank's peak, gathered by a sum with zeros */
    int have_rss = 0;
    if (rss) {
        rss[rank] = dz_cli_peak_rss();
        have_rss = dz_comm_sum_u64(comm, rss, (size_t)ranks, &err) == DZ_OK;
    }
    const unsigned long long sent = (unsigned long long)dz_comm_bytes_sent(comm);
    dz_comm_finalize(comm);
    if (rank == 0 && t->json) summary_json(t, &res, rss, have_rss ? ranks : 0);
    else if (rank == 0) summary_text(t, &res, rss, have_rss ? ranks : 0, sent);
    free(rss);
    return 0;
}
