/* distzo train: ZO fine-tuning. With no model or data: stories260K on SST-2 from the
 * assets folder, with settings that work for it. (distzo export: cmd_export.c.) */
#include <limits.h>
#include <signal.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/common.h"

typedef struct progress {
    int tty;
    int last_line_step;
    int rank, kill_step;  /* DISTZO_TEST_KILL=RANK:STEP[:stop]: this rank dies (SIGKILL), or with
                           * ":stop" stops responding (SIGSTOP), after that step */
    int kill_signal;
} progress;

static void fmt_eta(double secs, char *buf, size_t cap) {
    if (!isfinite(secs) || secs < 0) snprintf(buf, cap, "?");
    else if (secs < 90) snprintf(buf, cap, "%.0fs", secs);
    else if (secs < 5400) snprintf(buf, cap, "%.0fm", secs / 60);
    else snprintf(buf, cap, "%.1fh", secs / 3600);
}

static void on_progress(const dz_train_progress *p, void *user) {
    progress *pr = user;
    if (pr->kill_step > 0 && p->step == pr->kill_step && !p->replayed) raise(pr->kill_signal);
    if (pr->rank != 0) return; /* rank 0 speaks for the job */
    if (p->replayed) {
        fprintf(stderr, "distzo: resuming at step %d of %d\n", p->step, p->steps);
        return;
    }
    if (p->step == 0) return;
    const double rate = p->seconds > 0 ? p->step / p->seconds : 0.0;
    char eta[32];
    fmt_eta(rate > 0 ? (p->steps - p->step) / rate : NAN, eta, sizeof eta);
    if (p->has_eval) {
        if (pr->tty) fprintf(stderr, "\r\033[K");
        if (p->lm)
            printf("step %d/%d  loss %.4f  dev loss %.4f  test loss %.4f  best dev loss %.4f  (%.1f steps/s)\n", p->step,
                   p->steps, p->loss, -p->dev_accuracy, -p->test_accuracy, -p->best_dev_accuracy, rate);
        else
            printf("step %d/%d  loss %.4f  dev acc %.4f  test acc %.4f  best dev %.4f  (%.1f steps/s)\n", p->step,
                   p->steps, p->loss, p->dev_accuracy, p->test_accuracy, p->best_dev_accuracy, rate);
        fflush(stdout);
    }
    if (pr->tty) {
        const int width = 24, filled = (int)((double)width * p->step / p->steps);
        char bar[32];
        for (int i = 0; i < width; i++) bar[i] = i < filled ? '#' : '.';
        bar[width] = '\0';
        fprintf(stderr, "\r[%s] %d/%d  %.1f steps/s  loss %.4f  g %+.3e  lr %.2e  ETA %s\033[K", bar, p->step, p->steps,
                rate, p->loss, p->g, p->lr, eta);
        fflush(stderr);
    } else if (p->step - pr->last_line_step >= (p->steps >= 20 ? p->steps / 20 : 1) || p->step == p->steps) {
        printf("step %d/%d  loss %.4f  g %+.4e  lr %.3e  %.1f steps/s  ETA %s\n", p->step, p->steps, p->loss, p->g,
               p->lr, rate, eta);
        fflush(stdout);
        pr->last_line_step = p->step;
    }
}

static int train_settings(dz_train_config *c, int resume, const char *model, const char *data, const char *test,
                          const char *task_file, const char *master, const char *perturbation, const char *schedule);
static int train_run(dz_train_config *c, int resume, int node_size, int threads, float rank_timeout,
                     const char *out);

int dz_cmd_train(int argc, char **argv) {
    dz_train_config c;
    dz_train_config_default(&c);
    /* Settings found to work for stories260K on SST-2 (see README): MeZO's. */
    c.optim.lr = 3e-5f;
    c.optim.steps = -1; /* 4000 unless given; on --resume, only a given --steps extends the run */
    c.schedule.eval_every = 500;
    c.schedule.checkpoint_every = 1000;
    const char *model = NULL, *data = NULL, *out = "runs/default", *master = "f32", *perturbation = "gaussian";
    const char *schedule = "constant", *test = NULL, *task_file = NULL;
    int seed = 0, data_seed = 42, resume = 0, no_fuse = 0, threads = 0, no_share = 0, node_size = 0;
    float wd = 0.0f, rank_timeout = DZ_COMM_DEFAULT_TIMEOUT_S;
    const dz_opt opts[] = {
        {"model", DZ_OPT_STR, &model, "model (default: stories260K from the assets)"},
        {"task", DZ_OPT_STR, &c.data.task, "sst2 (tsv), classify (jsonl), lm (text; jsonl text or prompt/completion), or "
         "a MeZO preset: rte, cb, boolq, wsc, wic, multirc, copa, record (SuperGLUE jsonl), squad, drop (docs/TASKS.md)"},
        {"objective", DZ_OPT_STR, &c.data.objective, "what a step minimises: ce (default), accuracy (minus the batch's "
         "accuracy: non-differentiable, classification)"},
        {"demos", DZ_OPT_INT, &c.data.demos, "demonstrations from the training examples before each prompt (MeZO's ICL; default 0)"},
        {"gen-tokens", DZ_OPT_INT, &c.data.gen_tokens, "squad, drop: most tokens of a greedy answer (default 50)"},
        {"seq", DZ_OPT_INT, &c.data.lm_seq, "lm: tokens per training window (default: the model's maximum)"},
        {"data", DZ_OPT_STR, &data, "training file, or a folder with train.tsv and dev.tsv (default: the assets' SST-2)"},
        {"test", DZ_OPT_STR, &test, "file to report accuracy on (default: dev.tsv beside the training file)"},
        {"template", DZ_OPT_STR, &c.data.template_, "prompt template with {text} (default \"{text} It was\")"},
        {"label-words", DZ_OPT_STR, &c.data.label_words, "comma-separated label words (default bad,good)"},
        {"task-file", DZ_OPT_STR, &task_file, "JSON with template, label_words, text_key, label_key"},
        {"text-key", DZ_OPT_STR, &c.data.text_key, "jsonl text key (default text)"},
        {"label-key", DZ_OPT_STR, &c.data.label_key, "jsonl label key (default label)"},
        {"tokenizer", DZ_OPT_STR, &c.tokenizer, "tokenizer (default: the model's own)"},
        {"lr", DZ_OPT_FLOAT, &c.optim.lr, "learning rate (default 3e-5)"},
        {"eps", DZ_OPT_FLOAT, &c.optim.eps, "perturbation scale (default 1e-3)"},
        {"weight-decay", DZ_OPT_FLOAT, &wd, "weight decay, not on biases and norms (default 0)"},
        {"batch", DZ_OPT_INT, &c.optim.batch, "examples per step (default 16)"},
        {"steps", DZ_OPT_INT, &c.optim.steps, "steps (default 4000)"},
        {"spsa-samples", DZ_OPT_INT, &c.optim.q, "perturbations averaged per step (default 1)"},
        {"perturbation", DZ_OPT_STR, &perturbation, "gaussian (default) or rademacher"},
        {"schedule", DZ_OPT_STR, &schedule, "lr schedule: constant (default), linear, cosine"},
        {"warmup", DZ_OPT_INT, &c.optim.warmup, "linear warmup steps (default 0)"},
        {"seed", DZ_OPT_INT, &seed, "run seed: the perturbations (default 0)"},
        {"data-seed", DZ_OPT_INT, &data_seed, "seed of the example draw and order (default 42)"},
        {"train-examples", DZ_OPT_INT, &c.data.train_examples, "training examples drawn (default 1000)"},
        {"dev-examples", DZ_OPT_INT, &c.data.dev_examples, "model-selection examples drawn (default 500)"},
        {"eval-every", DZ_OPT_INT, &c.schedule.eval_every, "steps between evaluations (default 500; 0 = at the end)"},
        {"checkpoint-every", DZ_OPT_INT, &c.schedule.checkpoint_every, "steps between checkpoints (default 1000)"},
        {"keep-checkpoints", DZ_OPT_INT, &c.schedule.keep_checkpoints, "numbered checkpoints to keep, newest first (default 1; only those this run wrote are ever removed)"},
        {"log-sync-every", DZ_OPT_INT, &c.schedule.log_sync_every, "fsync the seed log every N steps (default 64)"},
        {"max-bad-steps", DZ_OPT_INT, &c.optim.max_bad_steps, "stop after N non-finite losses in a row (default 5)"},
        {"master-dtype", DZ_OPT_STR, &master, "master weights: f32 (default) or bf16 (stochastic rounding)"},
        {"no-fuse", DZ_OPT_FLAG, &no_fuse, "apply each update at once instead of fusing it into the next step"},
        {"no-share-prompt", DZ_OPT_FLAG, &no_share, "run every candidate as a full sequence (MeZO's way)"},
        {"store", DZ_OPT_STR, &c.store.spec,
         "ram (default), disk:PATH or disk-nocache:PATH: master weights in a file, streamed (nocache: the file's pages "
         "are dropped from the page cache as they are used)"},
        {"max-resident", DZ_OPT_INT, &c.store.max_resident_mb,
         "with a disk store: stay under this many MB (streaming the global block if needed) or refuse to start"},
        {"stream-globals", DZ_OPT_FLAG, &c.store.stream_globals,
         "with a disk store: keep the embeddings and head in it too (read by rows as used)"},
        {"out", DZ_OPT_STR, &out, "run folder (default runs/default)"},
        {"resume", DZ_OPT_FLAG, &resume, "continue the run in --out, bitwise as if never stopped: its run.json settings apply, --steps "
                                        "may raise them, any other setting given must equal the run's"},
        {"threads", DZ_OPT_INT, &threads, "threads per process (default: $OMP_NUM_THREADS, else the cores / processes on the machine)"},
        {"pertp", DZ_OPT_INT, &c.layout.pertp, "mpirun: perturbation parallelism, 1 or 2 ranks per +/- pair (default 1)"},
        {"dp", DZ_OPT_INT, &c.layout.dp, "mpirun: data-parallel groups (default: ranks / pertp)"},
        {"verify-every", DZ_OPT_INT, &c.layout.verify_every, "compare weight checksums across nodes every N steps (default 0)"},
        {"node-size", DZ_OPT_INT, &node_size, "mpirun: ranks per node sharing one copy of the weights (default: a machine)"},
        {"rank-timeout", DZ_OPT_FLOAT, &rank_timeout, "mpirun: end the job, naming the rank, when one gives no sign of life for this many seconds (default 300; 0 = wait forever)"},
        {0},
    };
    const dz_cmd_spec spec = {
        .name = "train",
        .usage = "[--model M] [--data D] [--out RUN_DIR] [--resume] [options]",
        .summary = "Fine-tunes with MeZO (two-sided SPSA): two forward passes per step, no gradients.\n"
                   "RUN_DIR gets run.json, seeds.log, metrics.jsonl, checkpoint-N/ and best/ (HF layout).",
        .min_positional = 0,
        .max_positional = 0,
        .opts = opts,
    };
    const char *pos[1];
    int npos, rc = dz_args_parse(&spec, argc, argv, pos, &npos);
    if (rc) return rc < 0 ? 2 : 0;
    char *run_strings = NULL; /* on --resume: run.json's settings are the defaults, the command line goes over them */
    dz_error err = {0};
    if (resume) {
        if (dz_train_config_load(out, &c, &run_strings, &err) != DZ_OK) return dz_cli_fail(&err);
        model = c.model, data = NULL, test = NULL, task_file = NULL;
        master = dz_dtype_name(c.store.master_dtype);
        perturbation = c.optim.rademacher ? "rademacher" : "gaussian";
        schedule = c.optim.lr_schedule == DZ_LR_LINEAR ? "linear" : c.optim.lr_schedule == DZ_LR_COSINE ? "cosine"
                                                                                                  : "constant";
        seed = (int)c.optim.seed, data_seed = (int)c.data.seed, wd = c.optim.wd;
        no_fuse = !c.optim.fuse, no_share = !c.data.share_prompts;
        dz_args_parse(&spec, argc, argv, pos, &npos); /* parsed once already: cannot fail */
    }
    rc = train_settings(&c, resume, model, data, test, task_file, master, perturbation, schedule);
    if (!rc) {
        c.optim.wd = wd;
        c.optim.seed = (uint64_t)seed;
        c.data.seed = (uint64_t)data_seed;
        c.optim.fuse = !no_fuse;
        c.data.share_prompts = !no_share;
        c.out_dir = out;
        rc = train_run(&c, resume, node_size, threads, rank_timeout, out);
    }
    free(run_strings);
    return rc;
}

/* The settings from the options: names to enums, the defaults' paths, absolute paths
 * (run.json keeps them, so --resume works from any directory). */
static int train_settings(dz_train_config *c, int resume, const char *model, const char *data, const char *test,
                          const char *task_file, const char *master, const char *perturbation, const char *schedule) {
    static char model_buf[4096], data_buf[4096], train_buf[4200], test_buf[4200];
    static char abs_model[PATH_MAX], abs_train[PATH_MAX], abs_test[PATH_MAX], abs_tok[PATH_MAX];
    dz_train_data *d = &c->data;
    int rc;
    if (task_file && (rc = dz_cli_task_file(task_file, &d->template_, &d->label_words, &d->text_key, &d->label_key)))
        return rc;
    const dz_task_preset *preset = dz_task_preset_find(d->task);
    if (!d->label_words && strcmp(d->task, "lm") && !preset) d->label_words = "bad,good";
    if (c->optim.steps == -1) c->optim.steps = 4000;
    if (dz_dtype_parse(master, &c->store.master_dtype) != 0 || c->store.master_dtype == DZ_F16)
        return dz_cli_failf("option --master-dtype: '%s' is not f32 or bf16", master);
    if (strcmp(perturbation, "gaussian") && strcmp(perturbation, "rademacher"))
        return dz_cli_failf("option --perturbation: '%s' is not gaussian or rademacher", perturbation);
    c->optim.rademacher = !strcmp(perturbation, "rademacher");
    if (!strcmp(schedule, "constant")) c->optim.lr_schedule = DZ_LR_CONSTANT;
    else if (!strcmp(schedule, "linear")) c->optim.lr_schedule = DZ_LR_LINEAR;
    else if (!strcmp(schedule, "cosine")) c->optim.lr_schedule = DZ_LR_COSINE;
    else return dz_cli_failf("option --schedule: '%s' is not constant, linear or cosine", schedule);
    if (strcmp(d->task, "sst2") && strcmp(d->task, "classify") && strcmp(d->task, "lm") && !preset)
        return dz_cli_failf("option --task: '%s' is not sst2, classify, lm or a preset (rte, cb, boolq, wsc, wic, "
                            "multirc, copa, record, squad, drop)", d->task);
    c->model = model ? model : dz_cli_asset("stories260K/stories260K.bin", model_buf, sizeof model_buf);
    if (!data && !resume) data = dz_cli_asset("sst2", data_buf, sizeof data_buf);
    if (data && dz_is_dir(data) && preset) { /* the release's own file names */
        snprintf(test_buf, sizeof test_buf, "%s/%s", data, preset->test_file);
        snprintf(train_buf, sizeof train_buf, "%s/%s", data, preset->train_file);
        d->train = train_buf;
        d->test = test ? test : (dz_file_exists(test_buf) ? test_buf : NULL);
    } else if (data && dz_is_dir(data)) {
        snprintf(test_buf, sizeof test_buf, "%s/dev.%s", data, strcmp(d->task, "sst2") ? "jsonl" : "tsv");
        snprintf(train_buf, sizeof train_buf, "%s/train.%s", data, strcmp(d->task, "sst2") ? "jsonl" : "tsv");
        d->train = train_buf;
        d->test = test ? test : (dz_file_exists(test_buf) ? test_buf : NULL);
    } else if (data) {
        d->train = data;
        d->test = test || !resume ? test : d->test; /* a resume given only --data FILE keeps the run's test file */
    } else if (test) {
        d->test = test;
    }
    if (realpath(c->model, abs_model)) c->model = abs_model;
    if (d->train && realpath(d->train, abs_train)) d->train = abs_train;
    if (d->test && realpath(d->test, abs_test)) d->test = abs_test;
    if (c->tokenizer && realpath(c->tokenizer, abs_tok)) c->tokenizer = abs_tok;
    return 0;
}

/* The job: the communicator, threads, the run, its summary. */
static int train_run(dz_train_config *c, int resume, int node_size, int threads, float rank_timeout,
                     const char *out) {
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
    if (rank != 0) dz_log_set_level(DZ_LOG_WARN);
    if ((rc = dz_cli_runtime(threads))) {
        dz_comm_finalize(comm);
        return rc;
    }
    if (rank == 0 && ranks > 1)
        dz_log(DZ_LOG_INFO, "%d ranks on %d node(s), %d threads each; %s", ranks, dz_comm_n_nodes(comm),
               dz_runtime_threads(), dz_comm_backend(comm));
    progress pr = {.tty = rank == 0 && isatty(2), .rank = rank, .kill_signal = SIGKILL};
    const char *kill = getenv("DISTZO_TEST_KILL");
    int kill_rank = -1;
    char how[8] = "";
    if (kill && sscanf(kill, "%d:%d:%7s", &kill_rank, &pr.kill_step, how) >= 2 && kill_rank != rank) pr.kill_step = 0;
    if (!strcmp(how, "stop")) pr.kill_signal = SIGSTOP;
    c->layout.comm = comm;
    dz_train_result res;
    dz_status st = dz_train(c, resume, on_progress, &pr, &res, &err);
    if (pr.tty) fprintf(stderr, "\n");
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
    if (rss) {
        rss[rank] = dz_cli_peak_rss();
        if (dz_comm_sum_u64(comm, rss, (size_t)ranks, &err) == DZ_OK && rank == 0) {
            printf("memory: peak RSS");
            for (int r = 0; r < ranks && r < 16; r++) printf("%s %.1f MB", r ? "," : "", rss[r] / 1048576.0);
            printf(ranks > 1 ? " (ranks 0..%d; shared weights count in each)\n" : "\n", ranks - 1);
            if (ranks > 1)
                printf("network: rank 0 exchanged %.0f bytes per step (%llu in all, setup and evaluations included)\n",
                       res.step_bytes, (unsigned long long)dz_comm_bytes_sent(comm));
        }
        free(rss);
    }
    dz_comm_finalize(comm);
    if (rank != 0) return 0;
    if (res.was_finished) {
        printf("nothing to do: the run in %s already finished its %d steps (pass a larger --steps to extend it)\n", out,
               res.steps_done);
        return 0;
    }
    const double sign = res.lm ? -1.0 : 1.0;
    const double v[3] = {sign * res.zero_shot_test, sign * res.final_test, sign * res.best_test};
    char txt[3][32];
    for (int i = 0; i < 3; i++) snprintf(txt[i], sizeof txt[i], isfinite(v[i]) ? "%.4f" : "n/a", v[i]);
    printf("done: %d steps in %.1f s; test %s before %s, final %s, at best dev (step %d) %s; run in %s\n",
           res.steps_done, res.seconds, res.lm ? "loss" : "accuracy", txt[0], txt[1], res.best_step, txt[2], out);
    return 0;
}
