/* Classification prompts: a template around the example's text plus one label word per class. */
#include "distzo/data.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"

enum { PROMPT_BUF = 16384 }; /* as classify.c's prompt limit */

static const char TEXT_SLOT[] = "{text}";

void dz_prompt_spec_default_sst2(dz_prompt_spec *spec) {
    memset(spec, 0, sizeof *spec);
    snprintf(spec->template_, sizeof spec->template_, "%s", DZ_DEFAULT_TEMPLATE);
    dz_status st = dz_prompt_spec_set_labels(spec, DZ_DEFAULT_LABEL_WORDS, NULL);
    (void)st; /* a valid constant: cannot fail */
}

dz_status dz_prompt_spec_set_labels(dz_prompt_spec *spec, const char *csv, dz_error *err) {
    if (!csv) return dz_fail(err, DZ_ERR_INVALID, "label words: none given (NULL)");
    /* Parse into a copy so a bad value leaves spec as it was. */
    dz_prompt_spec tmp = *spec;
    tmp.n_labels = 0;
    memset(tmp.label_words, 0, sizeof tmp.label_words);
    const char *p = csv;
    for (;;) {
        size_t n = strcspn(p, ",");
        int k = tmp.n_labels + 1;
        if (n == 0)
            return dz_fail(err, DZ_ERR_INVALID, "label words \"%s\": word %d is empty", csv, k);
        if (tmp.n_labels == DZ_MAX_LABELS)
            return dz_fail(err, DZ_ERR_INVALID, "label words \"%s\": more than %d words", csv,
                           DZ_MAX_LABELS);
        const char *lead = p[0] == ' ' ? "" : " ";
        size_t total = strlen(lead) + n;
        if (total >= sizeof tmp.label_words[0])
            return dz_fail(err, DZ_ERR_INVALID, "label words \"%s\": word %d is %zu bytes (limit %zu)",
                           csv, k, total, sizeof tmp.label_words[0] - 1);
        snprintf(tmp.label_words[tmp.n_labels++], sizeof tmp.label_words[0], "%s%.*s", lead,
                 (int)n, p);
        for (int j = 0; j + 1 < tmp.n_labels; j++) /* two classes with one word cannot be told apart */
            if (!strcmp(tmp.label_words[j], tmp.label_words[tmp.n_labels - 1]))
                return dz_fail(err, DZ_ERR_INVALID, "label words \"%s\": words %d and %d are both '%s'", csv, j + 1,
                               k, tmp.label_words[j] + 1);
        if (p[n] == '\0') break;
        p += n + 1;
    }
    if (tmp.n_labels < 2)
        return dz_fail(err, DZ_ERR_INVALID, "label words \"%s\": need at least 2 comma-separated words",
                       csv);
    *spec = tmp;
    return DZ_OK;
}

dz_status dz_prompt_spec_set_template(dz_prompt_spec *spec, const char *tmpl, dz_error *err) {
    const char *first = strstr(tmpl, TEXT_SLOT);
    if (!first || strstr(first + 1, TEXT_SLOT))
        return dz_fail(err, DZ_ERR_INVALID, "template \"%s\": must contain \"{text}\" exactly once", tmpl);
    if (strlen(tmpl) >= sizeof spec->template_)
        return dz_fail(err, DZ_ERR_INVALID, "template \"%.40s...\": longer than %zu bytes", tmpl,
                       sizeof spec->template_ - 1);
    snprintf(spec->template_, sizeof spec->template_, "%s", tmpl);
    return DZ_OK;
}

static int is_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

int dz_prompt_render(const dz_prompt_spec *spec, const char *text, char *out, int cap) {
    /* Surrounding whitespace is dropped, as MeZO's templates do (sentence.strip()): GLUE
     * SST-2 sentences end in a space, which would otherwise double the one before "It". */
    size_t tlen = strlen(text);
    while (!spec->verbatim && tlen > 0 && is_space(text[0])) text++, tlen--;
    while (!spec->verbatim && tlen > 0 && is_space(text[tlen - 1])) tlen--;
    const char *slot = strstr(spec->template_, TEXT_SLOT);
    if (cap <= 0) return -1;
    out[0] = '\0';
    if (!slot) return -1;
    size_t pre = (size_t)(slot - spec->template_);
    const char *post = slot + strlen(TEXT_SLOT);
    size_t postlen = strlen(post), total = pre + tlen + postlen;
    if (total >= (size_t)cap) return -1;
    memcpy(out, spec->template_, pre);
    memcpy(out + pre, text, tlen);
    memcpy(out + pre + tlen, post, postlen);
    out[total] = '\0';
    return (int)total;
}

/* MeZO's in-context demonstrations: k examples of the pool, each as its prompt followed by
 * its gold answer, joined by blank lines (MeZO's train_sep "\n\n"), then the example's own
 * prompt. The draw of example i is a seeded partial shuffle of the pool (without the
 * example itself when exclude_self: the pool is ds). */
static const char *gold_text(const dz_example *ex, const dz_prompt_spec *spec) {
    if (ex->cands) return ex->label >= 0 && ex->label < ex->n_cands ? ex->cands[ex->label] : "";
    if (ex->completion) return ex->completion;
    return ex->label >= 0 && ex->label < spec->n_labels ? spec->label_words[ex->label] : "";
}

dz_status dz_dataset_with_demos(const dz_dataset *ds, const dz_dataset *pool, const dz_prompt_spec *spec, int k,
                                uint64_t seed, int exclude_self, dz_dataset *out, dz_error *err) {
    memset(out, 0, sizeof *out);
    const char *path = ds->path ? ds->path : "dataset";
    const int avail = pool->count - (exclude_self ? 1 : 0);
    if (k > avail)
        return dz_fail(err, DZ_ERR_INVALID, "--demos %d: the training pool has only %d examples to draw from", k, avail);
    int *order = malloc(sizeof(int) * (size_t)(pool->count > 0 ? pool->count : 1));
    char *buf = malloc(PROMPT_BUF), *one = malloc(PROMPT_BUF);
    out->path = strdup(path);
    dz_status st = order && buf && one && out->path ? DZ_OK : dz_fail(err, DZ_ERR_NOMEM, "out of memory");
    int cap = 0;
    for (int e = 0; e < ds->count && st == DZ_OK; e++) {
        uint64_t s = seed ^ (0x9e3779b97f4a7c15ULL * (uint64_t)(e + 1));
        for (int i = 0; i < pool->count; i++) order[i] = i;
        size_t len = 0;
        buf[0] = '\0';
        for (int d = 0, i = 0; d < k && st == DZ_OK; i++) {
            const int j = i + (int)dz_uniform_below(&s, (uint64_t)(pool->count - i)), x = order[i];
            order[i] = order[j], order[j] = x;
            if (exclude_self && order[i] == e) continue;
            const dz_example *demo = &pool->items[order[i]];
            const int n = dz_prompt_render(spec, demo->text, one, PROMPT_BUF);
            const char *ans = gold_text(demo, spec);
            if (n < 0 || len + (size_t)n + strlen(ans) + 3 >= PROMPT_BUF) {
                st = dz_fail(err, DZ_ERR_INVALID, "%s:%d: the demonstrations make a prompt over %d bytes", path,
                             ds->items[e].line, PROMPT_BUF);
                break;
            }
            len += (size_t)snprintf(buf + len, PROMPT_BUF - len, "%s%s\n\n", one, ans);
            d++;
        }
        const int n = st == DZ_OK ? dz_prompt_render(spec, ds->items[e].text, one, PROMPT_BUF) : 0;
        if (st == DZ_OK && (n < 0 || len + (size_t)n + 1 >= PROMPT_BUF))
            st = dz_fail(err, DZ_ERR_INVALID, "%s:%d: the demonstrations make a prompt over %d bytes", path,
                         ds->items[e].line, PROMPT_BUF);
        if (st != DZ_OK) break;
        memcpy(buf + len, one, (size_t)n + 1);
        dz_example ex = ds->items[e];
        ex.text = buf;
        st = dz_dataset_append(out, &cap, &ex, err);
    }
    free(order), free(buf), free(one);
    if (st != DZ_OK) dz_dataset_free(out);
    return st;
}
