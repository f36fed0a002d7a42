/* --task-file FILE.json: a classification task's prompt in a file instead of flags:
 *   {"template": "Review: {text} Sentiment:", "label_words": ["negative", "positive"],
 *    "text_key": "sentence", "label_key": "label", "special_tokens": true}
 * Every field is optional; flags given on the command line win (special_tokens: true sets
 * what --special-tokens sets; false leaves it as the command line has it). */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/common.h"

static char g_store[4096];

/* A field's string, kept for the run: 0, or the refusal naming the field (never dropped). */
static int keep(const char *path, const char *key, const char *s, size_t *used, const char **dst) {
    size_t n = strlen(s) + 1;
    if (*used + n > sizeof g_store)
        return dz_cli_failf("%s: field '%s' is too long (%zu bytes; the file's strings may hold %zu in all)", path, key,
                            n - 1, sizeof g_store - 1);
    *dst = memcpy(g_store + *used, s, n);
    *used += n;
    return 0;
}

/* The keys a task file may hold, each once: any other (a misspelling) would be ignored. */
static int check_keys(const char *path, const cJSON *o) {
    static const char *const known[] = {"template", "label_words", "text_key", "label_key", "special_tokens"};
    const cJSON *v;
    cJSON_ArrayForEach(v, o) {
        int found = 0;
        for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) found |= v->string && !strcmp(v->string, known[i]);
        if (!found)
            return dz_cli_failf("%s: unknown field '%s' (a task file holds template, label_words, text_key, label_key "
                                "and special_tokens)", path, v->string ? v->string : "");
        for (const cJSON *u = o->child; u != v; u = u->next)
            if (!strcmp(u->string, v->string)) return dz_cli_failf("%s: field '%s' is given twice", path, v->string);
    }
    return 0;
}

int dz_cli_task_file(const char *path, const char **template_, const char **label_words, const char **text_key,
                     const char **label_key, int *special_tokens) {
    char *text;
    dz_error err = {0};
    if (dz_read_file(path, &text, NULL, &err) != DZ_OK) return dz_cli_fail(&err);
    const char *stop = NULL;
    cJSON *o = cJSON_ParseWithOpts(text, &stop, 0);
    char where[96] = "not a JSON object"; /* or, when it is no JSON at all, where it stops being JSON */
    if (!o && stop && stop >= text && stop <= text + strlen(text))
        dz_json_error_at(text, (size_t)(stop - text), where, sizeof where);
    free(text);
    if (!cJSON_IsObject(o)) {
        cJSON_Delete(o);
        return dz_cli_failf("%s: %s", path, where);
    }
    size_t used = 0;
    int rc = check_keys(path, o);
    const struct { const char *k; const char **dst; } strs[] = {
        {"template", template_}, {"text_key", text_key}, {"label_key", label_key}};
    for (size_t i = 0; i < 3 && !rc; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, strs[i].k);
        if (!v || *strs[i].dst) continue;
        if (!cJSON_IsString(v)) rc = dz_cli_failf("%s: field '%s' must be a string", path, strs[i].k);
        else rc = keep(path, strs[i].k, v->valuestring, &used, strs[i].dst);
    }
    const cJSON *lw = cJSON_GetObjectItemCaseSensitive(o, "label_words");
    if (!rc && lw && !*label_words) {
        if (cJSON_IsString(lw)) {
            rc = keep(path, "label_words", lw->valuestring, &used, label_words);
        } else if (cJSON_IsArray(lw)) {
            char joined[1024] = "";
            const cJSON *w;
            cJSON_ArrayForEach(w, lw) {
                if (!cJSON_IsString(w) || strchr(w->valuestring, ',')) {
                    rc = dz_cli_failf("%s: field 'label_words' must hold strings without commas", path);
                    break;
                }
                if (strlen(joined) + strlen(w->valuestring) + 2 > sizeof joined) {
                    rc = dz_cli_failf("%s: field 'label_words' is too long", path);
                    break;
                }
                if (joined[0]) strcat(joined, ",");
                strcat(joined, w->valuestring);
            }
            if (!rc) rc = keep(path, "label_words", joined, &used, label_words);
        } else {
            rc = dz_cli_failf("%s: field 'label_words' must be a list of strings", path);
        }
    }
    const cJSON *sp = cJSON_GetObjectItemCaseSensitive(o, "special_tokens");
    if (!rc && sp && !cJSON_IsBool(sp)) rc = dz_cli_failf("%s: field 'special_tokens' must be true or false", path);
    else if (!rc && cJSON_IsTrue(sp)) *special_tokens = 1;
    cJSON_Delete(o);
    return rc;
}

/* One field of the file against the run's (absent from run.json: the default it stands for):
 * 0, or the refusal naming both. */
static int field_matches(const char *path, const char *key, const char *file, const char *given, const char *run,
                         const char *run_dir) {
    if (!run) run = !strcmp(key, "template") ? DZ_DEFAULT_TEMPLATE : !strcmp(key, "text_key") ? "text"
                  : !strcmp(key, "label_key") ? "label" : NULL;
    if (!file || given || (run && !strcmp(file, run))) return 0; /* absent, or the command line's (checked as a flag) */
    return dz_cli_failf("--task-file %s: \"%s\" is '%s', %s/run.json's is '%s': a resumed or branched run keeps its "
                        "prompt (start another --out for a new one)", path, key, file, run_dir, run ? run : "(none)");
}

int dz_cli_task_file_matches_run(const char *path, const dz_train_data *run, const dz_train_data *given,
                                 const char *run_dir) {
    const char *tmpl = NULL, *words = NULL, *text_key = NULL, *label_key = NULL;
    int special = 0;
    int rc = dz_cli_task_file(path, &tmpl, &words, &text_key, &label_key, &special);
    if (!rc) rc = field_matches(path, "template", tmpl, given->template_, run->template_, run_dir);
    if (!rc) rc = field_matches(path, "label_words", words, given->label_words, run->label_words, run_dir);
    if (!rc) rc = field_matches(path, "text_key", text_key, given->text_key, run->text_key, run_dir);
    if (!rc) rc = field_matches(path, "label_key", label_key, given->label_key, run->label_key, run_dir);
    if (!rc && special && !given->special_tokens && !run->special_tokens)
        rc = dz_cli_failf("--task-file %s: \"special_tokens\" is true, %s/run.json's is false: a resumed or branched "
                          "run keeps its prompt (start another --out for a new one)", path, run_dir);
    return rc;
}
