/* Datasets and prompts: SST-2 tsv, jsonl classification, plain text / jsonl for LM.
 * A dz_dataset owns its strings; free it with dz_dataset_free. Every loader leaves *out
 * zeroed on failure and names path:line and the fault in err. Input must be UTF-8
 * (a leading BOM is skipped); CRLF line ends are accepted. */
#ifndef DISTZO_DATA_H
#define DISTZO_DATA_H

#include <stdint.h>

#include "distzo/error.h"

/* Longest line the tsv/jsonl loaders accept; longer ones are rejected as malformed
 * (far above any real row, low enough to stop a binary file being read as text). */
enum { DZ_DATA_MAX_LINE = 1 << 20 };

typedef struct dz_example {
    char *text;
    int label;      /* class index; -1 for unlabelled text (LM, GLUE test split) */
    char *completion; /* LM prompt/completion pairs: text is the prompt; else NULL */
    int line;       /* line of the source file it came from (messages) */
} dz_example;

typedef struct dz_dataset {
    int count;
    dz_example *items;
    char *path;     /* source, for messages */
} dz_dataset;

/* GLUE SST-2 tsv: header "sentence<TAB>label" and rows with exactly 2 columns, label 0/1,
 * a non-blank sentence (kept verbatim, including GLUE's trailing space). The GLUE test
 * layout, header "index<TAB>sentence", loads with label -1. At least one row. */
dz_status dz_dataset_load_sst2(const char *path, dz_dataset *out, dz_error *err);
/* jsonl: one JSON object per line with a non-blank string under text_key and, if
 * label_key is non-NULL, a non-negative integer label under label_key (a JSON integer,
 * or a string holding a decimal integer); label -1 when label_key is NULL. Blank lines
 * are skipped; at least one object. */
dz_status dz_dataset_load_jsonl(const char *path, const char *text_key, const char *label_key,
                                dz_dataset *out, dz_error *err);
/* Plain text: the whole file (verbatim, minus a BOM) is one example with label -1. A file
 * whose name ends in ".jsonl" is read as jsonl with text key "text" and no labels. */
/* Causal-LM jsonl: each line {"text": ...}, or {"prompt": ..., "completion": ...} (the
 * loss then covers the completion only). Errors name path:line and the key. */
dz_status dz_dataset_load_lm_jsonl(const char *path, dz_dataset *out, dz_error *err);
dz_status dz_dataset_load_text(const char *path, dz_dataset *out, dz_error *err);
/* DZ_ERR_FORMAT naming path:line of the first example without a label (label -1): a set
 * that trains or selects a model needs one on every row. */
dz_status dz_dataset_require_labels(const dz_dataset *ds, dz_error *err);
/* Frees the strings and zeroes *ds; safe on a zeroed or already freed dataset. */
void dz_dataset_free(dz_dataset *ds);

/* MeZO-style subsample: min(n, src->count) examples drawn without replacement (a partial
 * Fisher-Yates shuffle driven by splitmix64 seeded with seed), copied into *out in drawn
 * order. The same (src, n, seed) always gives the same sample. n <= 0 is DZ_ERR_INVALID. */
dz_status dz_dataset_sample(const dz_dataset *src, int n, uint64_t seed, dz_dataset *out,
                            dz_error *err);

/* A classification prompt: template with "{text}" replaced by the example's text, and
 * candidate i's full text = prompt + label_words[i] (label words carry their own
 * leading space, e.g. " terrible"). */
enum { DZ_MAX_LABELS = 16 };
typedef struct dz_prompt_spec {
    char template_[512];              /* default "{text} It was" */
    int n_labels;
    char label_words[DZ_MAX_LABELS][64]; /* default " terrible", " great" */
} dz_prompt_spec;

void dz_prompt_spec_default_sst2(dz_prompt_spec *spec);
/* Parses "w1,w2,..." (2..DZ_MAX_LABELS words, none empty, each under 64 bytes once its
 * leading space is added, which happens unless it already starts with one). On error the
 * spec is unchanged and err (DZ_ERR_INVALID) quotes the value. */
dz_status dz_prompt_spec_set_labels(dz_prompt_spec *spec, const char *csv, dz_error *err);
/* The template must contain "{text}" exactly once and fit in template_. */
dz_status dz_prompt_spec_set_template(dz_prompt_spec *spec, const char *tmpl, dz_error *err);
/* Renders the prompt for text into out (cap bytes, NUL-terminated). The text's leading and
 * trailing whitespace is dropped first, as MeZO's templates strip() the sentence.
 * Returns the length, or -1 (out = "") if it does not fit. */
int dz_prompt_render(const dz_prompt_spec *spec, const char *text, char *out, int cap);

#endif
