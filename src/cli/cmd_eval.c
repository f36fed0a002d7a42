/* distzo eval MODEL --task sst2|classify|lm --data FILE: MeZO-style prompt classification
 * accuracy, or perplexity. With no MODEL and no data: stories260K on the SST-2 dev set
 * from the assets folder. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/common.h"
#include "distzo/progress.h"

typedef struct eval_opts {
    const char *task, *data, *template_, *labels, *text_key, *label_key, *dtype, *tokenizer, *predictions, *task_file;
    int limit, batch, threads, json, share_prompts, gen_tokens, keep_quantized, special_tokens;
    const dz_task_preset *preset;
    const char *backend; /* --backend */
    dz_backend *be;      /* its instance, which every forward runs on */
    const char *adapter; /* --adapter: a PEFT LoRA folder */
    dz_model *lora;      /* its adapter, attached to every forward */
} eval_opts;

/* A forward on the run's backend, with the adapter attached when there is one. */
static dz_status make_forward(const eval_opts *o, const dz_model *m, int B, int S, int streams, dz_forward **f,
                              dz_error *err) {
    dz_status st = dz_forward_create_backend(m, o->be, B, S, 0, streams, f, err);
    return st == DZ_OK && o->lora ? dz_forward_set_adapter(*f, o->lora, NULL, err) : st;
}

static int load_dataset(const eval_opts *o, dz_dataset *ds) {
    dz_error err = {0};
    dz_status st;
    if (o->preset) st = dz_dataset_load_preset(o->preset, o->data, ds, &err);
    else if (!strcmp(o->task, "sst2")) st = dz_dataset_load_sst2(o->data, ds, &err);
    else if (!strcmp(o->task, "classify")) st = dz_dataset_load_jsonl(o->data, o->text_key, o->label_key, ds, &err);
    else st = dz_dataset_load_text(o->data, ds, &err);
    if (st != DZ_OK) return dz_cli_fail(&err);
    if (o->limit > 0 && o->limit < ds->count) { /* the first limit examples, as a copy */
        dz_dataset first = {0};
        int cap = 0;
        first.path = strdup(ds->path);
        st = first.path ? DZ_OK : dz_fail(&err, DZ_ERR_NOMEM, "out of memory");
        for (int i = 0; i < o->limit && st == DZ_OK; i++) st = dz_dataset_append(&first, &cap, &ds->items[i], &err);
        dz_dataset_free(ds);
        *ds = first;
        if (st != DZ_OK) return dz_cli_fail(&err);
    }
    return 0;
}

/* --predictions are built in memory and written at the end atomically (tmp, flush,
 * rename): an eval that fails or is stopped leaves the old file whole, or none. */
typedef struct pred_file {
    FILE *f;
    char *text;
    size_t len;
    const char *path;
} pred_file;

static int pred_open(pred_file *p, const char *path) {
    *p = (pred_file){.path = path};
    p->f = open_memstream(&p->text, &p->len);
    return p->f ? 0 : dz_cli_failf("%s: out of memory for the predictions", path);
}

/* keep: write the file (else the rows are dropped). Returns 0, or the exit status. */
static int pred_close(pred_file *p, int keep) {
    const int bad = fclose(p->f) != 0;
    dz_error err = {0};
    int rc = 0;
    if (keep && bad) rc = dz_cli_failf("%s: out of memory for the predictions", p->path);
    else if (keep && dz_write_file_atomic(p->path, p->text, p->len, &err) != DZ_OK) rc = dz_cli_fail(&err);
    free(p->text);
    *p = (pred_file){0};
    return rc;
}

/* --predictions is checked before the evaluation, so that a wrong path fails at once. */
static int pred_writable(const char *path, const char *const *inputs, int n_inputs) {
    char dir[4200], a[PATH_MAX], b[PATH_MAX];
    if (!*path) return dz_cli_failf("option --predictions: an empty path");
    for (int i = 0; i < n_inputs; i++) /* the file written is never one the evaluation reads */
        if (inputs[i] && realpath(path, a) && realpath(inputs[i], b) && !strcmp(a, b))
            return dz_cli_failf("--predictions %s is %s, which eval reads: it would be replaced; choose another file",
                                path, inputs[i]);
    dz_path_parent(path, dir, sizeof dir);
    if (dz_is_dir(path)) return dz_cli_failf("%s: cannot write predictions: it is a folder", path);
    if (!dz_is_dir(dir) || access(dir, W_OK) != 0)
        return dz_cli_failf("%s: cannot write predictions: %s is not a folder this process can write", path, dir);
    return 0;
}

/* --predictions for classification: one row per example, its label, prediction and each
 * candidate's exact score. */
static int write_predictions(const char *path, const dz_class_set *cs, const int *preds, const float *scores) {
    pred_file p;
    const int opened = pred_open(&p, path);
    if (opened) return opened;
    FILE *f = p.f;
    fprintf(f, "index\tlabel\tprediction");
    for (int k = 0; k < cs->n_labels; k++) fprintf(f, "\tscore%d", k);
    fprintf(f, "\n");
    for (int e = 0; e < cs->n_examples; e++) {
        fprintf(f, "%d\t%d\t%d", e, cs->labels[e], preds[e]);
        for (int k = 0; k < dz_class_count(cs, e); k++) fprintf(f, "\t%.9g", scores[dz_class_first(cs, e) + k]);
        fprintf(f, "\n");
    }
    return pred_close(&p, 1);
}

static int eval_classify(const eval_opts *o, dz_model *m, dz_tokenizer *tok, const dz_dataset *ds) {
    dz_error err = {0};
    dz_prompt_spec spec;
    dz_prompt_spec_default_sst2(&spec);
    if (o->preset) dz_prompt_spec_preset(&spec);
    if (o->template_ && dz_prompt_spec_set_template(&spec, o->template_, &err) != DZ_OK) return dz_cli_fail(&err);
    if (o->labels && dz_prompt_spec_set_labels(&spec, o->labels, &err) != DZ_OK) return dz_cli_fail(&err);
    spec.special_tokens = o->special_tokens;
    if (!o->preset) dz_prompt_spec_warn_text_special(&spec, tok);
    dz_class_set cs;
    double t0 = dz_now();
    if (dz_class_set_build(ds, &spec, tok, dz_model_config(m)->max_seq_len, &cs, &err) != DZ_OK)
        return dz_cli_fail(&err);
    int per = o->batch / cs.n_labels > 0 ? o->batch / cs.n_labels : 1;
    if (per > cs.n_examples) per = cs.n_examples; /* a batch never needs more rows than the data */
    dz_forward *f = NULL;
    int *preds = malloc(sizeof(int) * (size_t)(cs.n_examples + 1));
    float *scores = malloc(sizeof(float) * (size_t)(dz_class_first(&cs, cs.n_examples) + 1));
    double acc = 0.0;
    int rc = 0;
    if (!preds || !scores) rc = dz_cli_failf("out of memory");
    /* two streams: each example's prompt runs once, its candidates continue it */
    if (!rc && make_forward(o, m, per * cs.n_labels, cs.max_len, o->share_prompts ? 2 : 1, &f, &err) != DZ_OK)
        rc = dz_cli_fail(&err);
    dz_weight_source w = dz_model_weights(m);
    dz_progress prog;
    dz_progress_begin(&prog, "evaluation", "examples", cs.n_examples);
    if (!rc && dz_class_evaluate(f, &w, &cs, per * cs.n_labels, preds, scores, &acc, &err) != DZ_OK)
        rc = dz_cli_fail(&err);
    dz_progress_end(&prog);
    double secs = dz_now() - t0;
    if (!rc && o->predictions) rc = write_predictions(o->predictions, &cs, preds, scores);
    if (!rc) {
        int counts[DZ_MAX_LABELS] = {0};
        for (int e = 0; e < cs.n_examples; e++)
            if (preds[e] >= 0) counts[preds[e]]++; /* -1: a non-finite score, no prediction */
        if (o->json) {
            printf("{\"task\": \"%s\", \"data\": ", o->task);
            dz_cli_json_string(stdout, o->data);
            printf(", \"examples\": %d, \"accuracy\": %.6f, \"predicted\": [", cs.n_examples, acc);
            for (int k = 0; k < cs.n_labels; k++) printf("%s%d", k ? ", " : "", counts[k]);
            printf("], \"truncated\": %d, \"seconds\": %.3f, \"activation_bytes\": %zu, \"weight_bytes\": %zu, "
                   "\"peak_rss_bytes\": %zu}\n",
                   cs.truncated, secs, dz_forward_bytes(f), dz_model_bytes_owned(m) + dz_model_bytes_mapped(m) + dz_model_bytes_quantized(m),
                   dz_cli_peak_rss());
        } else {
            printf("%s: %d examples, accuracy %.2f%% (%.1f s)\n", o->data, cs.n_examples, 100.0 * acc, secs);
            printf("predicted:");
            for (int k = 0; k < cs.n_labels; k++)
                if (o->preset) printf(" %d: %d", k, counts[k]); /* the examples' own candidates */
                else printf(" '%s' %d", spec.label_words[k], counts[k]);
            printf("\n");
            if (cs.truncated)
                printf("%d sequences were cut from the left to fit the model's %d positions (the first: %s:%d)\n",
                       cs.truncated, dz_model_config(m)->max_seq_len, o->data, cs.truncated_line);
        }
    }
    dz_forward_free(f);
    free(preds);
    free(scores);
    dz_class_set_free(&cs);
    return rc;
}

/* --predictions for lm: one row per scored token, its exact log-prob. */
static void write_token_logprobs(FILE *f, int example, const int *ids, int n, const float *lp) {
    for (int i = 0; i + 1 < n; i++) fprintf(f, "%d\t%d\t%d\t%.9g\n", example, i + 1, ids[i + 1], lp[i]);
}

/* The tokens an LM evaluation scores (every token of a text but its first), for its progress:
 * a single long text then reports as its windows go by. */
static int64_t lm_scored_tokens(const dz_tokenizer *tok, const dz_dataset *ds) {
    int64_t total = 0;
    for (int e = 0; e < ds->count; e++) {
        dz_error ignored = {0}; /* a text that does not encode fails again, with its message, when scored */
        const int need = dz_tokenizer_encode(tok, ds->items[e].text, 1, NULL, 0, &ignored);
        if (need > 1) total += need - 1;
    }
    return total;
}

static int eval_lm(const eval_opts *o, dz_model *m, dz_tokenizer *tok, const dz_dataset *ds) {
    dz_error err = {0};
    pred_file pred = {0};
    const int opened = o->predictions ? pred_open(&pred, o->predictions) : 0;
    if (opened) return opened;
    FILE *pf = pred.f;
    if (pf) fprintf(pf, "example\tposition\ttoken\tlogprob\n");
    const int seq = dz_model_config(m)->max_seq_len < 1024 ? dz_model_config(m)->max_seq_len : 1024;
    dz_forward *f = NULL;
    if (make_forward(o, m, 1, seq, 1, &f, &err) != DZ_OK) {
        if (pf) pred_close(&pred, 0);
        return dz_cli_fail(&err);
    }
    dz_weight_source w = dz_model_weights(m);
    double nll = 0.0, t0 = dz_now();
    int64_t scored = 0;
    int rc = 0;
    dz_progress prog;
    dz_progress_begin(&prog, "evaluation", "tokens", lm_scored_tokens(tok, ds));
    for (int e = 0; e < ds->count && !rc; e++) {
        int need = dz_tokenizer_encode(tok, ds->items[e].text, 1, NULL, 0, &err);
        int *ids = need >= 0 ? malloc(sizeof(int) * (size_t)(need + 1)) : NULL;
        float *lp = need >= 0 && pf ? malloc(sizeof(float) * (size_t)(need + 1)) : NULL;
        if (!ids || (pf && !lp)) {
            free(ids);
            free(lp);
            rc = need < 0 ? dz_cli_fail(&err) : dz_cli_failf("out of memory");
            break;
        }
        dz_tokenizer_encode(tok, ds->items[e].text, 1, ids, need, &err);
        double s = 0.0;
        int64_t k = 0;
        if (dz_lm_nll(f, &w, ids, need, seq, &s, &k, lp, &err) != DZ_OK) rc = dz_cli_fail(&err);
        else if (pf) write_token_logprobs(pf, e, ids, need, lp);
        nll += s;
        scored += k;
        free(ids);
        free(lp);
    }
    dz_progress_end(&prog);
    double secs = dz_now() - t0;
    if (!rc) {
        double mean = scored ? nll / (double)scored : 0.0;
        if (o->json)
            printf("{\"task\": \"lm\", \"tokens\": %lld, \"nll\": %.6f, \"perplexity\": %.4f, \"seconds\": %.3f}\n",
                   (long long)scored, mean, exp(mean), secs);
        else
            printf("%s: %lld tokens scored, mean NLL %.4f, perplexity %.3f (%.1f s)\n", o->data, (long long)scored,
                   mean, exp(mean), secs);
    }
    if (pf) {
        const int written = pred_close(&pred, !rc);
        if (!rc) rc = written;
    }
    dz_forward_free(f);
    return rc;
}

/* A text field of a tsv row: backslash, tab, newline and carriage return escaped. */
static void tsv_text(FILE *f, const char *s) {
    for (; *s; s++) {
        if (*s == '\\') fputs("\\\\", f);
        else if (*s == '\t') fputs("\\t", f);
        else if (*s == '\n') fputs("\\n", f);
        else if (*s == '\r') fputs("\\r", f);
        else fputc(*s, f);
    }
}

/* --predictions for squad and drop: one row per question, its greedy answer, F1, exact
 * match and gold answers (as many columns as the question has). */
static int write_answers(const char *path, const dz_qa_set *qs, char *const *answers, const double *f1, const double *em) {
    pred_file p;
    const int opened = pred_open(&p, path);
    if (opened) return opened;
    FILE *f = p.f;
    int most = 1;
    for (int e = 0; e < qs->n_examples; e++)
        if (qs->data.items[e].n_answers > most) most = qs->data.items[e].n_answers;
    fprintf(f, "index\tf1\texact_match\tprediction");
    for (int k = 0; k < most; k++) fprintf(f, "\tgold%d", k);
    fprintf(f, "\n");
    for (int e = 0; e < qs->n_examples; e++) {
        const dz_example *ex = &qs->data.items[e];
        fprintf(f, "%d\t%.9g\t%.0f\t", e, f1[e], em[e]);
        tsv_text(f, answers[e] ? answers[e] : "");
        for (int k = 0; k < ex->n_answers; k++) fputc('\t', f), tsv_text(f, ex->answers[k]);
        fprintf(f, "\n");
    }
    return pred_close(&p, 1);
}

/* Generation presets (squad, drop): F1 and exact match of the greedy answers. */
static int eval_qa(const eval_opts *o, dz_model *m, dz_tokenizer *tok, const dz_dataset *ds) {
    dz_error err = {0};
    const int max_seq = dz_model_config(m)->max_seq_len, want = o->gen_tokens > 0 ? o->gen_tokens : 50;
    const int max_new = want < max_seq / 2 ? want : max_seq / 2;
    dz_qa_set qs;
    const double t0 = dz_now();
    if (dz_qa_set_build(ds, tok, max_seq, max_new, &qs, &err) != DZ_OK) return dz_cli_fail(&err);
    double *f1 = malloc(sizeof(double) * (size_t)(qs.n_examples + 1)), *em = malloc(sizeof(double) * (size_t)(qs.n_examples + 1));
    char **answers = o->predictions ? calloc((size_t)qs.n_examples + 1, sizeof *answers) : NULL;
    dz_forward *f = NULL;
    int rc = f1 && em && (answers || !o->predictions) ? 0 : dz_cli_failf("out of memory");
    if (!rc && make_forward(o, m, 1, max_seq, 1, &f, &err) != DZ_OK) rc = dz_cli_fail(&err);
    dz_weight_source w = dz_model_weights(m);
    dz_progress prog;
    dz_progress_begin(&prog, "evaluation", "examples", qs.n_examples);
    if (!rc && dz_qa_evaluate_answers(f, &w, tok, &qs, 0, qs.n_examples, max_new, f1, em, answers, &err) != DZ_OK)
        rc = dz_cli_fail(&err);
    dz_progress_end(&prog);
    if (!rc && answers) rc = write_answers(o->predictions, &qs, answers, f1, em);
    double sf = 0.0, se = 0.0;
    for (int e = 0; !rc && e < qs.n_examples; e++) sf += f1[e], se += em[e]; /* in order */
    const int n = qs.n_examples > 0 ? qs.n_examples : 1;
    if (!rc && o->json) {
        printf("{\"task\": \"%s\", \"data\": ", o->task);
        dz_cli_json_string(stdout, o->data);
        printf(", \"examples\": %d, \"f1\": %.6f, \"exact_match\": %.6f, \"seconds\": %.3f}\n", qs.n_examples,
               sf / n, se / n, dz_now() - t0);
    } else if (!rc) {
        printf("%s: %d examples, F1 %.2f%%, exact match %.2f%% (%.1f s)\n", o->data, qs.n_examples, 100.0 * sf / n,
               100.0 * se / n, dz_now() - t0);
    }
    dz_forward_free(f);
    for (int e = 0; answers && e < qs.n_examples; e++) free(answers[e]);
    free(answers);
    free(f1);
    free(em);
    dz_qa_set_free(&qs);
    return rc;
}

/* MODEL is a checkpoint of a run (RUN/best, RUN/checkpoint-N beside RUN/run.json): the
 * run's settings, so that what the options leave out is what the run evaluated with. */
static int run_of_checkpoint(const char *model, dz_train_config *run, char **strings) {
    char dir[4200];
    dz_path_parent(model, dir, sizeof dir);
    char probe[4300];
    snprintf(probe, sizeof probe, "%s/run.json", dir);
    if (!dz_is_dir(model) || !dz_file_exists(probe)) return 0;
    dz_error err = {0};
    if (dz_train_config_load(dir, run, strings, &err) != DZ_OK) {
        dz_log(DZ_LOG_WARN, "%s: not read (%s): the options' defaults apply", probe, err.msg);
        return 0;
    }
    dz_log(DZ_LOG_INFO, "%s is a checkpoint of the run in %s: its task, prompt, label words and test data apply "
           "unless given", model, dir);
    return 1;
}

/* An option the task cannot honour is refused, never ignored. mine: the options as given
 * (command line and --task-file), before a run's checkpoint fills in the run's own. */
static int refuse_unused(const eval_opts *o, const eval_opts *mine, int argc, char **argv) {
    const int gen = o->preset && o->preset->generation, lm = !strcmp(o->task, "lm");
    const int prompt = !strcmp(o->task, "sst2") || !strcmp(o->task, "classify"), jsonl = !strcmp(o->task, "classify");
    const struct { const char *name; int given, used; const char *by; } rules[] = {
        {"gen-tokens", mine->gen_tokens != DZ_OPT_UNSET, gen, "squad and drop"},
        {"template", mine->template_ != NULL, prompt, "sst2 and classify"},
        {"label-words", mine->labels != NULL, prompt, "sst2 and classify"},
        {"special-tokens", mine->special_tokens, prompt, "sst2 and classify"},
        {"text-key", mine->text_key != NULL, jsonl, "classify"},
        {"label-key", mine->label_key != NULL, jsonl, "classify"},
        {"batch", dz_cli_option_given(argc, argv, "batch"), !gen && !lm, "sst2, classify and the classification presets"},
        {"no-share-prompt", !mine->share_prompts, !gen && !lm, "sst2, classify and the classification presets"},
    };
    for (size_t i = 0; i < sizeof rules / sizeof rules[0]; i++)
        if (rules[i].given && !rules[i].used)
            return dz_cli_failf("option --%s%s: --task %s does not use it (only %s do%s)", rules[i].name,
                                mine->task_file && strcmp(rules[i].name, "batch") ? " (or --task-file)" : "", o->task,
                                rules[i].by, strchr(rules[i].by, ' ') ? "" : "es");
    return 0;
}

/* A run's checkpoint: what the options leave out is what the run evaluated with. */
static void fill_from_run(eval_opts *o, const dz_train_config *run) {
    const char **mine[] = {&o->task, &o->template_, &o->labels, &o->text_key, &o->label_key, &o->data};
    const char *theirs[] = {run->data.task, run->data.template_, run->data.label_words, run->data.text_key,
                            run->data.label_key, run->data.test};
    for (size_t i = 0; i < sizeof mine / sizeof mine[0]; i++)
        if (!*mine[i]) *mine[i] = theirs[i];
    o->special_tokens |= run->data.special_tokens;
}

/* The task, its defaults and a preset release folder's evaluation split (into preset_buf);
 * 0, or the exit status after naming the option that cannot be. */
static int resolve_task(eval_opts *o, char *preset_buf, size_t cap) {
    if (!o->task) o->task = "sst2";
    if (!o->text_key) o->text_key = "text";
    if (!o->label_key) o->label_key = "label";
    o->preset = dz_task_preset_find(o->task);
    if (strcmp(o->task, "sst2") && strcmp(o->task, "classify") && strcmp(o->task, "lm") && !o->preset)
        return dz_cli_failf("option --task: '%s' is not one of sst2, classify, lm or a preset", o->task);
    if (o->preset && (o->template_ || o->labels))
        return dz_cli_failf("--task %s: the preset has its own template and words", o->task);
    if (o->preset && o->data && dz_is_dir(o->data)) { /* a release folder: its evaluation split */
        snprintf(preset_buf, cap, "%s/%s", o->data, o->preset->test_file);
        o->data = preset_buf;
    }
    if (o->batch < 1) return dz_cli_failf("option --batch: %d must be at least 1", o->batch);
    if (o->limit < 0) return dz_cli_failf("option --limit: %d is negative (0: all examples)", o->limit);
    if (o->gen_tokens != DZ_OPT_UNSET && o->gen_tokens < 1)
        return dz_cli_failf("option --gen-tokens: %d tokens; give at least 1", o->gen_tokens);
    return 0;
}

/* MODEL (default: the assets' stories260K) on the data (default: the assets' SST-2 dev
 * set, sst2 only), as the task scores it. */
static int evaluate(eval_opts *o, const char *model_arg) {
    char model_buf[4096], data_buf[4096];
    const char *model = model_arg ? model_arg : dz_cli_default_model(model_buf, sizeof model_buf);
    if (!o->data) {
        if (strcmp(o->task, "sst2")) return dz_cli_failf("--task %s needs --data FILE", o->task);
        o->data = dz_cli_asset("sst2/dev.tsv", data_buf, sizeof data_buf);
    }
    const char *const inputs[] = {o->data, model, o->tokenizer};
    const int unwritable = o->predictions ? pred_writable(o->predictions, inputs, 3) : 0;
    if (unwritable) return unwritable;
    dz_model *m;
    dz_tokenizer *tok;
    const dz_cli_preamble p = {.threads = o->threads, .model = model, .dtype = o->dtype, .tokenizer = o->tokenizer,
                               .backend = o->backend, .keep_quantized = o->keep_quantized};
    int rc = dz_cli_start(&p, &m, &tok);
    if (rc) return rc;
    dz_dataset ds = {0};
    dz_error err = {0};
    rc = dz_backend_create(o->backend, &o->be, &err) == DZ_OK ? 0 : dz_cli_fail(&err);
    if (!rc && o->adapter) rc = dz_lora_load(o->adapter, dz_model_config(m), &o->lora, &err) == DZ_OK ? 0 : dz_cli_fail(&err);
    if (!rc) rc = load_dataset(o, &ds);
    if (!rc && o->preset && o->preset->generation) rc = eval_qa(o, m, tok, &ds);
    else if (!rc) rc = strcmp(o->task, "lm") ? eval_classify(o, m, tok, &ds) : eval_lm(o, m, tok, &ds);
    dz_dataset_free(&ds);
    dz_backend_free(o->be);
    dz_tokenizer_free(tok);
    dz_model_free(o->lora);
    dz_model_free(m);
    return rc;
}

static const dz_cmd_spec eval_cmd = {
    .name = "eval",
    .usage = "[MODEL] [--task sst2|classify|lm] [--data FILE] [options]",
    .min_positional = 0, .max_positional = 1,
    .summary = "Evaluates MODEL (default: stories260K from the assets folder, $DISTZO_ASSETS).\n"
               "Classification: one sequence per candidate label word after the prompt; a\n"
               "candidate's score is the mean log-prob of its tokens; the prediction is the argmax."};

int dz_cmd_eval(int argc, char **argv) {
    eval_opts o = {.dtype = "f32", .batch = 16, .share_prompts = 1, .gen_tokens = DZ_OPT_UNSET}; /* unset: 50 */
    int no_share = 0;
    const char *gpu_math = NULL;
    const dz_opt opts[] = {
        {"task", DZ_OPT_STR, &o.task, "sst2 (tsv, default), classify (jsonl), lm (text or jsonl), or a MeZO preset "
         "(rte, cb, boolq, wsc, wic, multirc, copa, record, squad, drop: docs/TASKS.md)"},
        {"gen-tokens", DZ_OPT_INT, &o.gen_tokens, "squad, drop: most tokens of a greedy answer (default 50)"},
        {"data", DZ_OPT_STR, &o.data, "data file (default: the SST-2 dev set in the assets)"},
        {"limit", DZ_OPT_INT, &o.limit, "use only the first N examples (0: all)"},
        {"template", DZ_OPT_STR, &o.template_, "prompt template with {text} (default \"" DZ_DEFAULT_TEMPLATE "\")"},
        {"label-words", DZ_OPT_STR, &o.labels,
         "comma-separated label words (default " DZ_DEFAULT_LABEL_WORDS ", MeZO's; a run's checkpoint: the run's)"},
        {"special-tokens", DZ_OPT_FLAG, &o.special_tokens,
         "special tokens written in --template (<|im_start|>) are their ids, as Hugging Face reads them (default: "
         "plain text; a run's checkpoint: the run's)"},
        {"task-file", DZ_OPT_STR, &o.task_file, "JSON with template, label_words, text_key, label_key, special_tokens"},
        {"text-key", DZ_OPT_STR, &o.text_key, "jsonl text key (default text)"},
        {"label-key", DZ_OPT_STR, &o.label_key, "jsonl label key (default label)"},
        {"batch", DZ_OPT_INT, &o.batch, "sequences per forward (default 16)"},
        dz_cli_dtype_option(&o.dtype, NULL),
        dz_cli_keep_quantized_option(&o.keep_quantized),
        dz_cli_tokenizer_option(&o.tokenizer, NULL),
        dz_cli_threads_option(&o.threads, NULL),
        dz_cli_backend_option(&o.backend),
        dz_cli_gpu_math_option(&gpu_math),
        {"adapter", DZ_OPT_STR, &o.adapter, "a PEFT adapter folder, LoRA or PREFIX_TUNING (distzo export of a --peft "
         "lora or prefix run, or PEFT's own) run beside MODEL, its base"},
        {"predictions", DZ_OPT_STR, &o.predictions, "write per-example predictions and exact scores (tsv; lm: each token's log-prob)"},
        {"json", DZ_OPT_FLAG, &o.json, "print JSON"},
        {"no-share-prompt", DZ_OPT_FLAG, &no_share, "score every candidate as a full sequence (MeZO's way)"},
        {0},
    };
    const char *pos[1];
    int rc = dz_cli_parse(&eval_cmd, opts, argc, argv, pos);
    if (rc >= 0) return rc;
    dz_cli_gpu_math_join(&o.backend, gpu_math);
    if (o.task_file &&
        (rc = dz_cli_task_file(o.task_file, &o.template_, &o.labels, &o.text_key, &o.label_key, &o.special_tokens)))
        return rc;
    o.share_prompts = !no_share;
    const eval_opts as_given = o; /* before a run's checkpoint fills in the run's settings */
    char run_best[4200], preset_buf[4200];
    rc = 0;
    const char *model_arg = pos[0] ? dz_cli_model_arg(pos[0], run_best, sizeof run_best, &rc) : NULL; /* RUN: RUN/best */
    if (rc) return rc;
    dz_train_config run;
    char *run_strings = NULL; /* the run's settings that o then points into */
    if (model_arg && run_of_checkpoint(model_arg, &run, &run_strings)) {
        fill_from_run(&o, &run);
        if (dz_lora_is_folder(model_arg) && o.adapter) { /* the message first: run.model points into run_strings */
            rc = dz_cli_failf("%s is an adapter run's checkpoint, itself the adapter (eval runs it on the run's base "
                              "%s): leave out --adapter %s, or give a base model to evaluate that adapter on",
                              model_arg, run.model, o.adapter);
            free(run_strings);
            return rc;
        }
        if (dz_lora_is_folder(model_arg)) /* a LoRA run's checkpoint: its adapter on the run's base */
            o.adapter = model_arg, model_arg = run.model;
    }
    rc = resolve_task(&o, preset_buf, sizeof preset_buf);
    if (!rc) rc = refuse_unused(&o, &as_given, argc, argv);
    if (!rc) rc = evaluate(&o, model_arg);
    free(run_strings);
    return rc;
}
