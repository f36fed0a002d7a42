/* Datasets and prompts: SST-2 tsv, jsonl classification, plain text / jsonl for LM.
 * A dz_dataset owns its strings; free it with dz_dataset_free. Every loader leaves *out
 * zeroed on failure and names path:line and the fault in err. Input must be UTF-8
 * (a leading BOM is skipped); CRLF line ends are accepted. */
#ifndef DISTZO_DATA_H
#define DISTZO_DATA_H

#include <stdint.h>

#include "distzo/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Longest line the tsv/jsonl loaders accept; longer ones are rejected as malformed
 * (far above any real row, low enough to stop a binary file being read as text). */
enum { DZ_DATA_MAX_LINE = 1 << 20 };

typedef struct dz_example {
    char *text;
    int label;      /* class index; -1 for unlabelled text (LM, GLUE test split) */
    char *completion; /* LM prompt/completion pairs: text is the prompt; else NULL */
    int line;       /* line of the source file it came from (messages) */
    /* Classification with candidates of its own (COPA's alternatives, ReCoRD's entities):
     * cands[n_cands], each the text that follows the prompt; label indexes them. NULL:
     * the prompt spec's label words. */
    char **cands;
    int n_cands;
    /* Generation (SQuAD, DROP): the gold answers[n_answers] the output is scored
     * against (F1 / exact match). With candidates of its own: the candidates that are
     * also correct, as their texts (ReCoRD: every entity that answers the query; label is
     * the first, the training target, as in MeZO). NULL otherwise. */
    char **answers;
    int n_answers;
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
 * or a string holding a decimal integer); label -1 when label_key is NULL. An object may
 * carry its own "candidates" (a list of 2.. non-empty strings, each appended to the prompt
 * as it is): its label then indexes them. Blank lines are skipped; at least one object. */
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
/* Appends a deep copy of ex (text, completion, candidates, answers) to ds; *cap is the
 * caller's running capacity (0 for an empty dataset). */
dz_status dz_dataset_append(dz_dataset *ds, int *cap, const dz_example *ex, dz_error *err);
/* Replaces ex's list (cands or answers, by `which`) with copies of strs[n]. */
typedef enum { DZ_EXAMPLE_CANDS, DZ_EXAMPLE_ANSWERS } dz_example_list;
dz_status dz_example_set_list(dz_example *ex, dz_example_list which, const char *const *strs, int n, dz_error *err);

/* MeZO-style subsample: min(n, src->count) examples drawn without replacement (a partial
 * Fisher-Yates shuffle driven by splitmix64 seeded with seed), copied into *out in drawn
 * order. The same (src, n, seed) always gives the same sample. n <= 0 is DZ_ERR_INVALID. */
dz_status dz_dataset_sample(const dz_dataset *src, int n, uint64_t seed, dz_dataset *out,
                            dz_error *err);
/* How `available` drawn examples split into training and dev (selection) examples when
 * want_train + want_dev were asked for: as asked when there are enough; otherwise in the
 * proportion asked (the dev part rounded down, at least 1 when want_dev > 0 and there are
 * 2 or more), so a small file keeps a dev set. Returns 1 when the split is not as asked. */
int dz_split_counts(int available, int want_train, int want_dev, int *n_train, int *n_dev);

/* The one default prompt of sst2 and classify, in every command (train, serve, eval, bench):
 * MeZO's SST-2 template and verbalizer, "<sentence> It was" + " terrible" / " great". */
#define DZ_DEFAULT_TEMPLATE "{text} It was"
#define DZ_DEFAULT_LABEL_WORDS "terrible,great"

/* A classification prompt: template with "{text}" replaced by the example's text, and
 * candidate i's full text = prompt + label_words[i] (label words carry their own
 * leading space, e.g. " terrible"). */
enum { DZ_MAX_LABELS = 16 };
enum { DZ_MAX_CANDS = 256 }; /* an example's own candidates (ReCoRD passages name dozens of entities) */
typedef struct dz_prompt_spec {
    char template_[512];              /* default DZ_DEFAULT_TEMPLATE */
    int verbatim;                     /* the text is the whole prompt, used as is (task presets) */
    int special_tokens;               /* special tokens written in the prompt ("<|im_start|>") are their ids,
                                         as Hugging Face's encode reads them; 0: plain text (the default) */
    int n_labels;
    char label_words[DZ_MAX_LABELS][64]; /* default " terrible", " great" (DZ_DEFAULT_LABEL_WORDS) */
} dz_prompt_spec;

/* DZ_DEFAULT_TEMPLATE and DZ_DEFAULT_LABEL_WORDS. */
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

/* MeZO's ICL prompts (--demos): a copy of ds in which each example's text is k
 * demonstrations drawn from pool (seeded by seed and the example's index; without the
 * example itself when exclude_self, pool being ds), each its rendered prompt and gold
 * answer (its candidate, completion or label word) followed by "\n\n", then the
 * example's rendered prompt: build it with a verbatim spec. */
dz_status dz_dataset_with_demos(const dz_dataset *ds, const dz_dataset *pool, const dz_prompt_spec *spec, int k,
                                uint64_t seed, int exclude_self, dz_dataset *out, dz_error *err);

/* MeZO's task presets (docs/TASKS.md): RTE, CB, BoolQ, WSC, WiC, MultiRC, COPA, ReCoRD
 * (SuperGLUE's jsonl), SQuAD (v1.1 json), DROP (json); SST-2 is the "sst2" task. */
typedef struct dz_task_preset {
    const char *name;                   /* "rte" */
    const char *train_file, *test_file; /* in the release's folder: "train.jsonl", "val.jsonl" */
    int generation;                     /* answers generated and scored by F1 / exact match */
} dz_task_preset;
/* NULL if name is not a preset. */
const dz_task_preset *dz_task_preset_find(const char *name);
/* A preset's file as examples: text = the whole prompt of MeZO's template (use it with
 * dz_prompt_spec_preset); classification: the verbalizer's words as the example's
 * candidates and label the gold index; generation: the gold answers and completion
 * " answers[0]\n" (the training target). Errors name the file, line (the question's
 * ordinal in a json file) and field. */
dz_status dz_dataset_load_preset(const dz_task_preset *p, const char *path, dz_dataset *out, dz_error *err);
/* One row of a SuperGLUE preset (rte .. record) as its jsonl file holds it, given as JSON
 * text (rows held in memory: Python's), appended to out as the file's loader would;
 * messages name out->path and line. squad and drop (one json document) are
 * DZ_ERR_UNSUPPORTED. *cap: the caller's running capacity (0 for an empty dataset). */
dz_status dz_dataset_append_preset_row(const dz_task_preset *p, const char *json, int line, dz_dataset *out, int *cap,
                                       dz_error *err);
/* The spec of preset examples: their text is the prompt, as it is. */
void dz_prompt_spec_preset(dz_prompt_spec *spec);

#ifdef __cplusplus
}
#endif

#endif
