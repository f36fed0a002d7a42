/* train refuses an option its task cannot honour (issue 27.11), as eval does: a run that
 * trained without the user's --template or --gen-tokens, saying nothing, is worse than an
 * error at the start. */
#include <string.h>

#include "cli/common.h"
#include "cli/train_options.h"

/* Where a value that is not on the command line came from: a task-file field, or a
 * --config key. */
static const char *source(int task_file_field, const char *task_file, const char *config) {
    if (task_file_field && task_file && config) return " (from --task-file or --config)";
    if (task_file_field && task_file) return " (from --task-file)";
    return " (from --config)";
}

int dz_cli_train_refuse_unused(const dz_train_config *c, const dz_cli_train_cmdline *cmdline, const char *task_file,
                               const char *config, int resume) {
    const dz_train_data *d = &c->data, *cl = &cmdline->data;
    const dz_task_preset *preset = dz_task_preset_find(d->task);
    const int gen = preset && preset->generation, lm = !strcmp(d->task, "lm");
    const int prompt = !strcmp(d->task, "sst2") || !strcmp(d->task, "classify"), jsonl = !strcmp(d->task, "classify");
    const char *classifiers = "sst2, classify and the classification presets";
    /* given: on the command line; set: in the settings as resolved (for a new run, only
     * the user's sources set these; a resumed run's come from its run.json) */
    const struct { const char *name; int given, set, used, task_file_field; const char *by; } rules[] = {
        {"task-file", cmdline->task_file != NULL, task_file != NULL, prompt, 0, "sst2 and classify"},
        {"template", cl->template_ != NULL, d->template_ != NULL, prompt, 1, "sst2 and classify"},
        {"label-words", cl->label_words != NULL, d->label_words != NULL, prompt, 1, "sst2 and classify"},
        {"special-tokens", cl->special_tokens != 0, d->special_tokens != 0, prompt, 1, "sst2 and classify"},
        {"text-key", cl->text_key != NULL, d->text_key != NULL, jsonl, 1, "classify"},
        {"label-key", cl->label_key != NULL, d->label_key != NULL, jsonl, 1, "classify"},
        {"seq", cl->lm_seq != DZ_OPT_UNSET, d->lm_seq > 0, lm, 0, "lm"},
        {"gen-tokens", cl->gen_tokens != DZ_OPT_UNSET, d->gen_tokens > 0, gen, 0, "squad and drop"},
        {"no-share-prompt", cmdline->no_share, !d->share_prompts, !lm && !gen, 0, classifiers},
    };
    for (size_t i = 0; i < sizeof rules / sizeof rules[0]; i++) {
        if (rules[i].used || !(rules[i].given || (!resume && rules[i].set))) continue;
        return dz_cli_failf("option --%s%s: --task %s does not use it (only %s do%s)", rules[i].name,
                            rules[i].given ? "" : source(rules[i].task_file_field, task_file, config), d->task,
                            rules[i].by, strchr(rules[i].by, ' ') ? "" : "es");
    }
    return 0;
}
