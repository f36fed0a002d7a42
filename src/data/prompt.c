/* Classification prompts: a template around the example's text plus one label word per class. */
#include "distzo/data.h"

#include <stdio.h>
#include <string.h>

static const char TEXT_SLOT[] = "{text}";

void dz_prompt_spec_default_sst2(dz_prompt_spec *spec) {
    memset(spec, 0, sizeof *spec);
    snprintf(spec->template_, sizeof spec->template_, "%s", "{text} It was");
    spec->n_labels = 2;
    snprintf(spec->label_words[0], sizeof spec->label_words[0], "%s", " terrible");
    snprintf(spec->label_words[1], sizeof spec->label_words[1], "%s", " great");
}

dz_status dz_prompt_spec_set_labels(dz_prompt_spec *spec, const char *csv, dz_error *err) {
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
    while (tlen > 0 && is_space(text[0])) text++, tlen--;
    while (tlen > 0 && is_space(text[tlen - 1])) tlen--;
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
