/* Datasets and prompts: SST-2 tsv, jsonl classification, plain text / jsonl for LM. */
#ifndef DISTZO_DATA_H
#define DISTZO_DATA_H

#include "distzo/error.h"

typedef struct dz_example {
    char *text;
    int label;      /* class index; -1 for unlabelled text (LM) */
} dz_example;

typedef struct dz_dataset {
    int count;
    dz_example *items;
    char *path;     /* source, for messages */
} dz_dataset;

/* GLUE SST-2 tsv: header "sentence<TAB>label", label 0/1. A bad line is an error naming
 * path:line and what is wrong. */
dz_status dz_dataset_load_sst2(const char *path, dz_dataset *out, dz_error *err);
/* jsonl: one JSON object per line with a string text_key and, if label_key is non-NULL,
 * an integer label (or a string equal to one of label_names, if given). Blank lines skipped. */
dz_status dz_dataset_load_jsonl(const char *path, const char *text_key, const char *label_key,
                                dz_dataset *out, dz_error *err);
/* Plain text: the whole file is one example (label -1). A file ending in .jsonl is read
 * as jsonl with key "text". */
dz_status dz_dataset_load_text(const char *path, dz_dataset *out, dz_error *err);
void dz_dataset_free(dz_dataset *ds);

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
/* Parses "w1,w2,..." ; each word gets a leading space unless it already starts with one. */
dz_status dz_prompt_spec_set_labels(dz_prompt_spec *spec, const char *csv, dz_error *err);
dz_status dz_prompt_spec_set_template(dz_prompt_spec *spec, const char *tmpl, dz_error *err);
/* Renders the prompt for text into out (cap bytes). Returns length, or -1 if it does not fit. */
int dz_prompt_render(const dz_prompt_spec *spec, const char *text, char *out, int cap);

#endif
