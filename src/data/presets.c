/* Over 500 lines, one file: the ten presets' readers share its static helpers (field, push, sb_clear).
 * MeZO's task presets: the public releases' files (SuperGLUE jsonl, SQuAD v1.1 json, DROP
 * json) read into examples whose text is the whole prompt of MeZO's template
 * (large_models/templates.py) and whose candidates are its verbalizer's words, or, for
 * generation, whose answers are the gold strings. Field layouts: docs/TASKS.md. */
#include "data/internal.h"
#include "core/json.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/bytes.h"
#include "core/util.h"

/* ---- the prompt, built in a dz_bytes (core/bytes.h) -------------------------------- */

static void sb_clear(dz_bytes *b) {
    b->len = 0;
    if (b->p) b->p[0] = '\0';
}

/* ---- reading fields ------------------------------------------------------------------- */

typedef struct reader {
    const char *path;
    int line;        /* jsonl line, or the question's ordinal in a json file */
    dz_error *err;
    dz_status st;
} reader;

static const cJSON *field(reader *r, const cJSON *o, const char *key, int (*is)(const cJSON *), const char *what) {
    if (r->st != DZ_OK) return NULL;
    const cJSON *v = cJSON_IsObject(o) ? cJSON_GetObjectItemCaseSensitive(o, key) : NULL;
    if (!v || !is(v)) {
        r->st = dz_fail(r->err, DZ_ERR_FORMAT, "%s:%d: field \"%s\" %s %s", r->path, r->line, key,
                        v ? "must be" : "is missing: expected", what);
        return NULL;
    }
    return v;
}
static int is_str(const cJSON *v) { return cJSON_IsString(v); }
static int is_obj(const cJSON *v) { return cJSON_IsObject(v); }
static int is_arr(const cJSON *v) { return cJSON_IsArray(v); }
static int is_int(const cJSON *v) { return cJSON_IsNumber(v) && v->valuedouble == (double)(int)v->valuedouble; }

static const char *str(reader *r, const cJSON *o, const char *key) {
    const cJSON *v = field(r, o, key, is_str, "a string");
    return v ? v->valuestring : "";
}
/* A label given as one of names[n] (strings), a bool (false 0, true 1), or an integer < n. */
static int label_of(reader *r, const cJSON *o, const char *const *names, int n) {
    if (r->st != DZ_OK) return -1;
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "label");
    if (v && names && cJSON_IsString(v))
        for (int k = 0; k < n; k++)
            if (!strcmp(v->valuestring, names[k])) return k;
    if (v && !names && cJSON_IsBool(v)) return cJSON_IsTrue(v);
    if (v && !names && is_int(v) && v->valuedouble >= 0 && v->valuedouble < n) return (int)v->valuedouble;
    char want[160] = "";
    for (int k = 0; names && k < n; k++)
        snprintf(want + strlen(want), sizeof want - strlen(want), "%s\"%s\"", k ? ", " : "one of ", names[k]);
    r->st = dz_fail(r->err, DZ_ERR_FORMAT, "%s:%d: field \"label\" %s %s", r->path, r->line,
                    v ? "must be" : "is missing: expected", names ? want : "true/false or 0/1");
    return -1;
}

/* ASCII case changes, as Python's str.lower()/upper() do on ASCII text. */
static void ascii_lower(char *s, size_t n) {
    for (size_t i = 0; i < n && s[i]; i++)
        if (s[i] >= 'A' && s[i] <= 'Z') s[i] = (char)(s[i] - 'A' + 'a');
}

/* ---- one example ---------------------------------------------------------------------- */

static dz_status push(dz_dataset *out, int *cap, reader *r, const dz_bytes *prompt, int label, const char *const *cands,
                      int n_cands, const char *const *answers, int n_answers) {
    if (r->st != DZ_OK) return r->st;
    if (prompt->oom) return r->st = dz_fail(r->err, DZ_ERR_NOMEM, "%s: out of memory", r->path);
    dz_status st = dz_dataset_push(out, cap, prompt->p, prompt->len, label, r->line, r->err);
    dz_example *ex = st == DZ_OK ? &out->items[out->count - 1] : NULL;
    if (st == DZ_OK && cands) st = dz_example_set_list(ex, DZ_EXAMPLE_CANDS, cands, n_cands, r->err);
    if (st == DZ_OK && answers) {
        st = dz_example_set_list(ex, DZ_EXAMPLE_ANSWERS, answers, n_answers, r->err);
        /* the training target: MeZO's verbalize(), " answer\n" after "Answer:" */
        size_t n = strlen(answers[0]) + 3;
        if (st == DZ_OK && !(ex->completion = malloc(n))) st = dz_fail(r->err, DZ_ERR_NOMEM, "out of memory");
        if (st == DZ_OK) snprintf(ex->completion, n, " %s\n", answers[0]);
    }
    return r->st = st;
}

static const char *const YES_NO[2] = {"Yes", "No"}, *const NO_YES[2] = {"No", "Yes"};

/* ---- SuperGLUE jsonl: one object per line --------------------------------------------- */

typedef dz_status (*row_fn)(reader *r, const cJSON *o, dz_bytes *b, dz_dataset *out, int *cap);

static dz_status rte_row(reader *r, const cJSON *o, dz_bytes *b, dz_dataset *out, int *cap) {
    static const char *const names[2] = {"entailment", "not_entailment"};
    const char *premise = str(r, o, "premise"), *hyp = str(r, o, "hypothesis");
    const int label = label_of(r, o, names, 2);
    dz_bytes_str(b, premise), dz_bytes_str(b, "\nDoes this mean that \"");
    dz_bytes_str(b, hyp), dz_bytes_str(b, "\" is true? Yes or No?\n");
    return push(out, cap, r, b, label, YES_NO, 2, NULL, 0);
}

static dz_status cb_row(reader *r, const cJSON *o, dz_bytes *b, dz_dataset *out, int *cap) {
    static const char *const names[3] = {"entailment", "contradiction", "neutral"};
    static const char *const words[3] = {"Yes", "No", "Maybe"};
    const char *premise = str(r, o, "premise"), *hyp = str(r, o, "hypothesis");
    const int label = label_of(r, o, names, 3);
    dz_bytes_str(b, "Suppose "), dz_bytes_str(b, premise);
    dz_bytes_str(b, " Can we infer that \""), dz_bytes_str(b, hyp);
    dz_bytes_str(b, "\"? Yes, No, or Maybe?\n");
    return push(out, cap, r, b, label, words, 3, NULL, 0);
}

static dz_status boolq_row(reader *r, const cJSON *o, dz_bytes *b, dz_dataset *out, int *cap) {
    const char *passage = str(r, o, "passage"), *q = str(r, o, "question");
    const int label = label_of(r, o, NULL, 2);
    dz_bytes_str(b, passage), dz_bytes_str(b, " ");
    const size_t at = b->len;
    dz_bytes_str(b, q);
    if (!b->oom && b->len > at && b->p[at] >= 'a' && b->p[at] <= 'z') b->p[at] = (char)(b->p[at] - 'a' + 'A');
    if (b->len == at || b->p[b->len - 1] != '?') dz_bytes_str(b, "?");
    dz_bytes_str(b, "\n");
    return push(out, cap, r, b, label < 0 ? -1 : 1 - label, YES_NO, 2, NULL, 0); /* true: "Yes" */
}

static dz_status wic_row(reader *r, const cJSON *o, dz_bytes *b, dz_dataset *out, int *cap) {
    const char *word = str(r, o, "word"), *s1 = str(r, o, "sentence1"), *s2 = str(r, o, "sentence2");
    const int label = label_of(r, o, NULL, 2);
    dz_bytes_str(b, "Does the word \""), dz_bytes_str(b, word);
    dz_bytes_str(b, "\" have the same meaning in these two sentences? Yes, No?\n");
    dz_bytes_str(b, s1), dz_bytes_str(b, "\n"), dz_bytes_str(b, s2), dz_bytes_str(b, "\n");
    return push(out, cap, r, b, label, NO_YES, 2, NULL, 0);
}

static dz_status wsc_row(reader *r, const cJSON *o, dz_bytes *b, dz_dataset *out, int *cap) {
    const char *text = str(r, o, "text");
    const cJSON *target = field(r, o, "target", is_obj, "an object");
    const char *span1 = str(r, target, "span1_text"), *span2 = str(r, target, "span2_text");
    const int label = label_of(r, o, NULL, 2);
    dz_bytes_str(b, text), dz_bytes_str(b, "\nIn the previous sentence, does the pronoun \"");
    const size_t at = b->len;
    dz_bytes_str(b, span2);
    if (!b->oom) ascii_lower(b->p + at, b->len - at);
    dz_bytes_str(b, "\" refer to "), dz_bytes_str(b, span1), dz_bytes_str(b, "? Yes or No?\n");
    return push(out, cap, r, b, label, NO_YES, 2, NULL, 0);
}

/* COPA: the premise without its final period, " so " (effect) or " because " (cause), and
 * each alternative with its first word lowercased unless it is "I". */
static dz_status copa_row(reader *r, const cJSON *o, dz_bytes *b, dz_dataset *out, int *cap) {
    const char *premise = str(r, o, "premise"), *q = str(r, o, "question");
    const char *choice[2] = {str(r, o, "choice1"), str(r, o, "choice2")};
    const int label = label_of(r, o, NULL, 2);
    if (r->st == DZ_OK && strcmp(q, "effect") && strcmp(q, "cause"))
        return r->st = dz_fail(r->err, DZ_ERR_FORMAT, "%s:%d: field \"question\" must be \"cause\" or \"effect\", not "
                               "\"%.40s\"", r->path, r->line, q);
    size_t n = strlen(premise);
    while (n > 0 && (premise[n - 1] == ' ' || (premise[n - 1] >= '\t' && premise[n - 1] <= '\r'))) n--;
    if (n > 0 && premise[n - 1] == '.') n--;
    dz_bytes_put(b, premise, n), dz_bytes_str(b, strcmp(q, "effect") ? " because " : " so ");
    char *alt[2] = {strdup(choice[0]), strdup(choice[1])};
    if (!alt[0] || !alt[1]) b->oom = 1;
    for (int k = 0; k < 2 && alt[k]; k++) {
        const size_t w = strcspn(alt[k], " ");
        if (!(w == 1 && alt[k][0] == 'I')) ascii_lower(alt[k], w);
    }
    dz_status st = push(out, cap, r, b, label, (const char *const *)alt, 2, NULL, 0);
    free(alt[0]), free(alt[1]);
    return st;
}

/* MultiRC: one yes/no example per (question, answer) pair of each passage. */
static dz_status multirc_row(reader *r, const cJSON *o, dz_bytes *b, dz_dataset *out, int *cap) {
    const cJSON *passage = field(r, o, "passage", is_obj, "an object");
    const char *text = str(r, passage, "text");
    const cJSON *qs = field(r, passage, "questions", is_arr, "a list"), *q;
    cJSON_ArrayForEach(q, qs) {
        const char *question = str(r, q, "question");
        const cJSON *as = field(r, q, "answers", is_arr, "a list"), *a;
        cJSON_ArrayForEach(a, as) {
            const char *answer = str(r, a, "text");
            const int label = label_of(r, a, NULL, 2);
            sb_clear(b);
            dz_bytes_str(b, text), dz_bytes_str(b, "\nQuestion: ");
            dz_bytes_str(b, question), dz_bytes_str(b, "\nI found this answer \"");
            dz_bytes_str(b, answer), dz_bytes_str(b, "\". Is that correct? Yes or No?\n");
            if (push(out, cap, r, b, label, NO_YES, 2, NULL, 0) != DZ_OK) return r->st;
        }
    }
    return r->st;
}

/* Byte offset of code point cp in s (Python indexes ReCoRD's spans by code point). */
static size_t byte_at(const char *s, size_t len, long cp) {
    size_t i = 0;
    for (long c = 0; c < cp && i < len; c++) {
        i++;
        while (i < len && ((unsigned char)s[i] & 0xc0) == 0x80) i++;
    }
    return i;
}

static int by_strcmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Sorted, without repeats: Hugging Face's super_glue record (sorted(set(...))). */
static int sort_unique(char **v, int n) {
    qsort(v, (size_t)n, sizeof *v, by_strcmp);
    int m = 0;
    for (int i = 0; i < n; i++) {
        if (m > 0 && !strcmp(v[m - 1], v[i])) free(v[i]);
        else v[m++] = v[i];
    }
    return m;
}

/* ReCoRD's prompt: the passage with each "@highlight\n" as "- ", then "\n-". */
static void record_prompt(dz_bytes *prompt, const char *text, size_t len) {
    for (size_t i = 0; i < len;) {
        const char *h = strstr(text + i, "@highlight\n");
        const size_t stop = h ? (size_t)(h - text) : len;
        dz_bytes_put(prompt, text + i, stop - i);
        if (!h) break;
        dz_bytes_str(prompt, "- ");
        i = stop + strlen("@highlight\n");
    }
    dz_bytes_str(prompt, "\n-");
}

/* A ReCoRD candidate: " " + the query with each @placeholder replaced by the entity. */
static void record_candidate(dz_bytes *cand, const char *query, const char *entity) {
    sb_clear(cand);
    dz_bytes_str(cand, " ");
    for (const char *p = query;;) {
        const char *at = strstr(p, "@placeholder");
        dz_bytes_put(cand, p, at ? (size_t)(at - p) : strlen(p));
        if (!at) break;
        dz_bytes_str(cand, entity);
        p = at + strlen("@placeholder");
    }
}

/* ReCoRD: one example per query; the candidates are " " + the query with @placeholder
 * replaced by each entity of the passage (MeZO's ReCoRDTemplateGPT3); the label (the
 * training target) is the first entity (in sorted order) that is an answer, and every
 * entity that is an answer counts as correct (the example's answers). */
static dz_status record_row(reader *r, const cJSON *o, dz_bytes *b, dz_dataset *out, int *cap) {
    const cJSON *passage = field(r, o, "passage", is_obj, "an object");
    const char *text = str(r, passage, "text");
    const cJSON *ents = field(r, passage, "entities", is_arr, "a list"), *qas = field(r, o, "qas", is_arr, "a list");
    if (r->st != DZ_OK) return r->st;
    const size_t len = strlen(text);
    int n = 0;
    char **ent = calloc((size_t)cJSON_GetArraySize(ents) + 1, sizeof *ent);
    const cJSON *e;
    cJSON_ArrayForEach(e, ents) {
        const cJSON *s = field(r, e, "start", is_int, "an integer"), *t = field(r, e, "end", is_int, "an integer");
        if (!s || !t || !ent) break;
        const size_t a = byte_at(text, len, (long)s->valuedouble), z = byte_at(text, len, (long)t->valuedouble + 1);
        if (z <= a) {
            r->st = dz_fail(r->err, DZ_ERR_FORMAT, "%s:%d: entity [%d, %d] is empty or outside the passage", r->path,
                            r->line, s->valueint, t->valueint);
            break;
        }
        if (!(ent[n] = malloc(z - a + 1))) break;
        memcpy(ent[n], text + a, z - a), ent[n++][z - a] = '\0';
    }
    if (r->st == DZ_OK && (!ent || n < cJSON_GetArraySize(ents))) b->oom = 1;
    n = ent ? sort_unique(ent, n) : 0;
    if (r->st == DZ_OK && (n < 1 || n > DZ_MAX_CANDS))
        r->st = dz_fail(r->err, DZ_ERR_FORMAT, "%s:%d: the passage names %d entities (1 to %d are supported)", r->path,
                        r->line, n, DZ_MAX_CANDS);
    dz_bytes prompt = {0}, cand = {0};
    record_prompt(&prompt, text, len);
    char **cands = calloc((size_t)n + 1, sizeof *cands);
    const char **gold = calloc((size_t)n + 1, sizeof *gold); /* the candidates that answer a query */
    if (!cands || !gold) b->oom = 1;
    const cJSON *qa;
    cJSON_ArrayForEach(qa, qas) {
        if (r->st != DZ_OK || !cands || !gold) break;
        const char *query = str(r, qa, "query");
        const cJSON *answers = field(r, qa, "answers", is_arr, "a list");
        int label = -1, n_gold = 0;
        for (int k = 0; k < n && r->st == DZ_OK; k++) {
            record_candidate(&cand, query, ent[k]);
            free(cands[k]);
            if (!(cands[k] = strdup(cand.p ? cand.p : ""))) b->oom = 1;
            const cJSON *a;
            int answer = 0;
            cJSON_ArrayForEach(a, answers) {
                const cJSON *t = cJSON_GetObjectItemCaseSensitive(a, "text");
                answer |= cJSON_IsString(t) && !strcmp(t->valuestring, ent[k]);
            }
            if (answer && label < 0) label = k;
            if (answer) gold[n_gold++] = cands[k];
        }
        if (r->st == DZ_OK && cJSON_GetArraySize(answers) > 0 && label < 0)
            r->st = dz_fail(r->err, DZ_ERR_FORMAT, "%s:%d: no answer of the query is one of the passage's entities",
                            r->path, r->line);
        if (cand.oom) b->oom = 1;
        sb_clear(b);
        dz_bytes_put(b, prompt.p ? prompt.p : "", prompt.len);
        if (prompt.oom) b->oom = 1;
        if (push(out, cap, r, b, label, (const char *const *)cands, n, NULL, 0) != DZ_OK) break;
        /* every entity that answers the query counts as correct (MeZO's evaluation) */
        if ((r->st = dz_example_set_list(&out->items[out->count - 1], DZ_EXAMPLE_ANSWERS, (const char *const *)gold,
                                         n_gold, r->err)) != DZ_OK)
            break;
    }
    for (int k = 0; k < n; k++) free(ent[k]), free(cands ? cands[k] : NULL);
    free(ent), free(cands), free(gold), free(prompt.p), free(cand.p);
    return r->st;
}

static dz_status load_jsonl(const char *path, row_fn row, dz_dataset *out, dz_error *err) {
    dz_line_reader lr;
    dz_status st = dz_lines_open(&lr, path, err);
    if (st != DZ_OK) return st;
    int cap = 0;
    dz_bytes b = {0};
    st = dz_dataset_init(out, path, err);
    while (st == DZ_OK) {
        char *line;
        size_t n;
        if ((st = dz_lines_next(&lr, &line, &n, err)) != DZ_OK || !line) break;
        if (dz_is_blank(line, n)) continue;
        cJSON *o = cJSON_ParseWithOpts(line, NULL, 1);
        reader r = {.path = path, .line = lr.lineno, .err = err, .st = DZ_OK};
        if (!cJSON_IsObject(o)) st = dz_fail(err, DZ_ERR_FORMAT, "%s:%d: expected a JSON object", path, lr.lineno);
        else if (dz_json_repeated_key(o))
            st = dz_fail(err, DZ_ERR_FORMAT, "%s:%d: key \"%s\" is given twice", path, lr.lineno, dz_json_repeated_key(o));
        sb_clear(&b);
        if (st == DZ_OK) st = row(&r, o, &b, out, &cap);
        cJSON_Delete(o);
    }
    free(b.p);
    dz_lines_close(&lr);
    return st;
}

/* ---- SQuAD v1.1 and DROP: one json document ------------------------------------------- */

static dz_status squad_doc(reader *r, const cJSON *doc, dz_dataset *out, int *cap) {
    dz_bytes b = {0};
    const cJSON *data = field(r, doc, "data", is_arr, "a list"), *art;
    cJSON_ArrayForEach(art, data) {
        const char *title = str(r, art, "title");
        const cJSON *paras = field(r, art, "paragraphs", is_arr, "a list"), *p;
        cJSON_ArrayForEach(p, paras) {
            const char *context = str(r, p, "context");
            const cJSON *qas = field(r, p, "qas", is_arr, "a list"), *qa;
            cJSON_ArrayForEach(qa, qas) {
                r->line++;
                const char *q = str(r, qa, "question");
                const cJSON *as = field(r, qa, "answers", is_arr, "a list"), *a;
                const int na = cJSON_GetArraySize(as);
                if (r->st == DZ_OK && na < 1)
                    r->st = dz_fail(r->err, DZ_ERR_FORMAT, "%s: question %d (\"%.40s\") has no answers", r->path,
                                    r->line, q);
                const char **answers = calloc((size_t)na + 1, sizeof *answers);
                int k = 0;
                cJSON_ArrayForEach(a, as) if (answers) answers[k++] = str(r, a, "text");
                while (*q == ' ' || (*q >= '\t' && *q <= '\r')) q++;
                size_t qn = strlen(q);
                while (qn > 0 && (q[qn - 1] == ' ' || (q[qn - 1] >= '\t' && q[qn - 1] <= '\r'))) qn--;
                sb_clear(&b);
                dz_bytes_str(&b, "Title: "), dz_bytes_str(&b, title);
                dz_bytes_str(&b, "\nContext: "), dz_bytes_str(&b, context);
                dz_bytes_str(&b, "\nQuestion: "), dz_bytes_put(&b, q, qn), dz_bytes_str(&b, "\nAnswer:");
                if (!answers) b.oom = 1;
                push(out, cap, r, &b, -1, NULL, 0, answers, na);
                free(answers);
                if (r->st != DZ_OK) break;
            }
        }
    }
    free(b.p);
    return r->st;
}

/* DROP's gold strings of one answer object: its number, else its spans, else its date
 * ("day month year" of the parts given). */
static int drop_answer(reader *r, const cJSON *a, const char **dst, char *date, size_t date_cap) {
    const cJSON *num = cJSON_GetObjectItemCaseSensitive(a, "number");
    if (cJSON_IsString(num) && num->valuestring[0]) return dst[0] = num->valuestring, 1;
    const cJSON *spans = cJSON_GetObjectItemCaseSensitive(a, "spans"), *s;
    int n = 0;
    cJSON_ArrayForEach(s, spans) if (cJSON_IsString(s) && s->valuestring[0] && n < 16) dst[n++] = s->valuestring;
    if (n > 0) return n;
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(a, "date");
    date[0] = '\0';
    static const char *const parts[3] = {"day", "month", "year"};
    for (int k = 0; k < 3; k++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(d, parts[k]);
        if (cJSON_IsString(v) && v->valuestring[0])
            snprintf(date + strlen(date), date_cap - strlen(date), "%s%s", date[0] ? " " : "", v->valuestring);
    }
    (void)r;
    return date[0] ? (dst[0] = date, 1) : 0;
}

static dz_status drop_doc(reader *r, const cJSON *doc, dz_dataset *out, int *cap) {
    dz_bytes b = {0};
    const cJSON *sec;
    if (!cJSON_IsObject(doc))
        return r->st = dz_fail(r->err, DZ_ERR_FORMAT, "%s: expected an object of passages", r->path);
    cJSON_ArrayForEach(sec, doc) {
        const char *passage = str(r, sec, "passage");
        const cJSON *qas = field(r, sec, "qa_pairs", is_arr, "a list"), *qa;
        cJSON_ArrayForEach(qa, qas) {
            r->line++;
            const char *q = str(r, qa, "question");
            const char *answers[64];
            char dates[4][64];
            int na = 0;
            /* dev: the validated answers and the first; train: the one answer */
            const cJSON *first = cJSON_GetObjectItemCaseSensitive(qa, "answer");
            const cJSON *valid = cJSON_GetObjectItemCaseSensitive(qa, "validated_answers"), *a;
            if (cJSON_IsObject(first)) na += drop_answer(r, first, answers + na, dates[0], sizeof dates[0]);
            int vi = 1;
            cJSON_ArrayForEach(a, valid) if (na <= 64 - 16 && vi < 4) na += drop_answer(r, a, answers + na,
                                                                                           dates[vi++], sizeof dates[0]);
            if (r->st != DZ_OK) break;
            if (na == 0) continue; /* nothing to score against */
            while (*q == ' ' || (*q >= '\t' && *q <= '\r')) q++;
            size_t qn = strlen(q);
            while (qn > 0 && (q[qn - 1] == ' ' || (q[qn - 1] >= '\t' && q[qn - 1] <= '\r'))) qn--;
            sb_clear(&b);
            dz_bytes_str(&b, "Passage: "), dz_bytes_str(&b, passage);
            dz_bytes_str(&b, "\nQuestion: "), dz_bytes_put(&b, q, qn);
            dz_bytes_str(&b, "\nAnswer:");
            if (push(out, cap, r, &b, -1, NULL, 0, answers, na) != DZ_OK) break;
        }
        if (r->st != DZ_OK) break;
    }
    free(b.p);
    return r->st;
}

typedef dz_status (*doc_fn)(reader *r, const cJSON *doc, dz_dataset *out, int *cap);

static dz_status load_json(const char *path, doc_fn fn, dz_dataset *out, dz_error *err) {
    char *text;
    dz_status st = dz_read_file(path, &text, NULL, err);
    if (st != DZ_OK) return st;
    cJSON *doc = cJSON_Parse(text);
    free(text);
    if (!doc) return dz_fail(err, DZ_ERR_FORMAT, "%s: not valid JSON", path);
    int cap = 0;
    reader r = {.path = path, .line = 0, .err = err, .st = DZ_OK};
    st = dz_dataset_init(out, path, err);
    if (st == DZ_OK) st = fn(&r, doc, out, &cap);
    cJSON_Delete(doc);
    return st;
}

/* ---- the table ------------------------------------------------------------------------ */

typedef struct preset_impl {
    dz_task_preset p;
    row_fn row; /* SuperGLUE jsonl */
    doc_fn doc; /* one json file */
} preset_impl;

static const preset_impl PRESETS[] = {
    {{"rte", "train.jsonl", "val.jsonl", 0}, rte_row, NULL},
    {{"cb", "train.jsonl", "val.jsonl", 0}, cb_row, NULL},
    {{"boolq", "train.jsonl", "val.jsonl", 0}, boolq_row, NULL},
    {{"wsc", "train.jsonl", "val.jsonl", 0}, wsc_row, NULL},
    {{"wic", "train.jsonl", "val.jsonl", 0}, wic_row, NULL},
    {{"multirc", "train.jsonl", "val.jsonl", 0}, multirc_row, NULL},
    {{"copa", "train.jsonl", "val.jsonl", 0}, copa_row, NULL},
    {{"record", "train.jsonl", "val.jsonl", 0}, record_row, NULL},
    {{"squad", "train-v1.1.json", "dev-v1.1.json", 1}, NULL, squad_doc},
    {{"drop", "drop_dataset_train.json", "drop_dataset_dev.json", 1}, NULL, drop_doc},
};

const dz_task_preset *dz_task_preset_find(const char *name) {
    for (size_t i = 0; name && i < sizeof PRESETS / sizeof PRESETS[0]; i++)
        if (!strcmp(PRESETS[i].p.name, name)) return &PRESETS[i].p;
    return NULL;
}

dz_status dz_dataset_load_preset(const dz_task_preset *p, const char *path, dz_dataset *out, dz_error *err) {
    memset(out, 0, sizeof *out);
    const preset_impl *impl = (const preset_impl *)p; /* p points at an entry's first member */
    dz_status st = impl->row ? load_jsonl(path, impl->row, out, err) : load_json(path, impl->doc, out, err);
    if (st == DZ_OK && out->count == 0) st = dz_fail(err, DZ_ERR_FORMAT, "%s: no examples", path);
    if (st != DZ_OK) dz_dataset_free(out);
    return st;
}

dz_status dz_dataset_append_preset_row(const dz_task_preset *p, const char *json, int line, dz_dataset *out, int *cap,
                                       dz_error *err) {
    const preset_impl *impl = (const preset_impl *)p;
    const char *name = out->path ? out->path : "data";
    if (!impl->row)
        return dz_fail(err, DZ_ERR_UNSUPPORTED, "%s: %s examples are the questions of one json document, not rows",
                       name, p->name);
    cJSON *o = cJSON_Parse(json);
    reader r = {.path = name, .line = line, .err = err, .st = DZ_OK};
    dz_bytes b = {0};
    dz_status st = cJSON_IsObject(o) ? impl->row(&r, o, &b, out, cap)
                                     : dz_fail(err, DZ_ERR_FORMAT, "%s:%d: expected a JSON object", name, line);
    cJSON_Delete(o);
    free(b.p);
    return st;
}

void dz_prompt_spec_preset(dz_prompt_spec *spec) {
    dz_prompt_spec_default_sst2(spec);
    snprintf(spec->template_, sizeof spec->template_, "%s", "{text}");
    spec->verbatim = 1;
}
