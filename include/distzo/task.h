/* Tasks: turn examples into token sequences, run the forward pass, and score them.
 * Prompt classification (MeZO): a candidate's score is the mean log-prob of its label
 * tokens; causal LM: mean next-token log-prob; generation with a KV cache. */
#ifndef DISTZO_TASK_H
#define DISTZO_TASK_H

#include <stdint.h>

#include "distzo/data.h"
#include "distzo/model.h"
#include "distzo/tokenizer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One candidate sequence: tokens[0..len), of which the last cand_len are the candidate's. */
typedef struct dz_cand_seq {
    int *tokens;
    int len;
    int cand_len;
    int gold; /* a correct candidate: the label's, or one of the example's other correct answers */
} dz_cand_seq;

/* Every example x every candidate, tokenized once. Example e's candidates are
 * seqs[dz_class_first(cs, e) + k], k < dz_class_count(cs, e): the spec's label words, or
 * the example's own candidates (their number varies by example). */
typedef struct dz_class_set {
    int n_examples, n_labels; /* n_labels: the most candidates of any example */
    dz_cand_seq *seqs;
    int n_seqs;               /* entries of seqs this set owns */
    int *cand_first;          /* [n_examples + 1] indexes into seqs; NULL: n_labels per example, seqs[e * n_labels + k] */
    int *labels;
    int max_len;
    int truncated;      /* sequences whose context was cut from the left to fit */
    int truncated_line; /* the source line of the first of them (0: none) */
} dz_class_set;

/* Tokenizes: context = encode(prompt, bos); full = encode(prompt + label word, bos); the
 * candidate's tokens are those of full after the longest common prefix with the context
 * (normally all of the context). Sequences longer than max_len lose context tokens from
 * the left, keeping the first (BOS). spec->special_tokens is refused as
 * dz_special_tokens_check refuses it. */
dz_status dz_class_set_build(const dz_dataset *ds, const dz_prompt_spec *spec, const dz_tokenizer *tok,
                             int max_len, dz_class_set *out, dz_error *err);
void dz_class_set_free(dz_class_set *cs);
/* --special-tokens needs a tokenizer that marks its special tokens: tokenizer.json's or a
 * GGUF's BPE. llama2.c's, SentencePiece's and GPT-2's vocab.json + merges.txt encoders read
 * a prompt as text only: DZ_ERR_UNSUPPORTED naming the kind. */
dz_status dz_special_tokens_check(const dz_tokenizer *tok, dz_error *err);
/* Whether spec's template writes a special token of tok ("<|im_start|>") that, without
 * spec->special_tokens, is encoded as plain text: 1 and its text in name (cap bytes), so
 * the caller can say --special-tokens would read it as the token; 0 where there is none,
 * or special tokens are read. */
int dz_prompt_spec_text_special(const dz_prompt_spec *spec, const dz_tokenizer *tok, char *name, int cap);
/* Logs a warning naming it where dz_prompt_spec_text_special finds one. */
void dz_prompt_spec_warn_text_special(const dz_prompt_spec *spec, const dz_tokenizer *tok);
static inline int dz_class_first(const dz_class_set *cs, int e) {
    return cs->cand_first ? cs->cand_first[e] : e * cs->n_labels;
}
static inline int dz_class_count(const dz_class_set *cs, int e) {
    return dz_class_first(cs, e + 1) - dz_class_first(cs, e);
}
/* Whether prediction pred (an index of example e's candidates, -1: none) is correct. */
static inline int dz_class_correct(const dz_class_set *cs, int e, int pred) {
    return pred >= 0 && pred < dz_class_count(cs, e) && cs->seqs[dz_class_first(cs, e) + pred].gold;
}
/* Examples [lo, hi) of cs, sharing its sequences (not to be freed). */
dz_class_set dz_class_set_view(const dz_class_set *cs, int lo, int hi);

/* One batch of candidate sequences laid out for the forward pass: tokens [n_seqs, T]
 * right-padded, and the rows/targets whose log-probs score the candidates. Buffers are
 * allocated once by init (no allocation per batch).
 *
 * Shared prompts (tree layout, when init asked for it): each example's prompt (the
 * common prefix of its candidates) is a sequence of its own, computed once, and
 * each candidate continues it: tokens then hold only the continuations ([n_seqs, T],
 * starting at position start[i] of prompt parent[i]). A candidate's first token is then
 * scored by its prompt's last row (p_rows), the rest by its own rows. */
typedef struct dz_class_batch {
    int max_seqs, max_len, share_prompts;
    int n_seqs, T, n_rows;
    int *tokens, *lengths, *rows, *targets;
    int *seq_first_row; /* rows of sequence i: [seq_first_row[i], seq_first_row[i+1]) */
    int tree;           /* this batch uses the tree layout */
    int n_prompts, PT, n_p_rows;
    int *p_tokens, *p_lengths, *p_rows, *p_targets;
    int *start, *parent;
    int *p_row_of;      /* per continuation: its entry in p_rows, or -1 */
    int n_examples;     /* examples in the batch; example e's sequences are [ex_first[e], ex_first[e+1]) */
    int *ex_first;
} dz_class_batch;

/* max_len: the positions a sequence may take in the forward (its max_seq). A tree batch
 * whose prompts padded to PT plus continuations padded to T would not fit them (a long
 * example beside one with a longer continuation) is laid out plainly instead. */
dz_status dz_class_batch_init(dz_class_batch *bb, int max_seqs, int max_len, int share_prompts, dz_error *err);
void dz_class_batch_free(dz_class_batch *bb);
/* The candidate sequences of examples[0..n) (every candidate of each, example-major;
 * parent[i] is sequence i's example in the batch). */
dz_status dz_class_batch_fill(dz_class_batch *bb, const dz_class_set *cs, const int *examples, int n, dz_error *err);
/* scores[i] = mean log-prob of sequence i's candidate tokens, from logprobs[n_rows] (and,
 * in the tree layout, p_logprobs[n_p_rows] of the prompts' rows; else NULL). */
void dz_class_batch_scores(const dz_class_batch *bb, const float *logprobs, const float *p_logprobs, float *scores);
/* Runs the forward for the batch on stream 0 (and, in the tree layout, the continuations
 * on stream 1) and fills logprobs / p_logprobs. */
dz_status dz_class_batch_forward(dz_forward *f, const dz_weight_source *w, const dz_class_batch *bb, float *logprobs,
                                 float *p_logprobs, dz_error *err);
/* MeZO's loss: mean over examples of the cross-entropy of softmax(candidate scores)
 * against the label; scores [n, K], summed in example order in double. */
double dz_class_loss(const float *scores, const int *labels, int n, int K);
/* The cross-entropy of each example: out[n]; dz_class_loss is their sum in order / n. */
void dz_class_example_losses(const float *scores, const int *labels, int n, int K, double *out);

/* The prediction for one example's scores[K]: the argmax (ties to the lower label), or -1
 * (no prediction, never correct) when a score is not finite. */
int dz_class_predict(const float *scores, int K);
/* Scores every candidate, batch sequences at a time (whole examples per batch), and the
 * classification accuracy over the labelled examples: predictions (dz_class_predict)
 * written to preds if non-NULL, scores to scores if non-NULL (example e's at
 * dz_class_first(cs, e) - dz_class_first(cs, 0): n_examples * n_labels with label words). */
dz_status dz_class_evaluate(dz_forward *f, const dz_weight_source *w, const dz_class_set *cs, int batch,
                            int *preds, float *scores, double *accuracy, dz_error *err);

/* Mean next-token negative log-likelihood of tokens[0..n) scored in windows of seq tokens
 * (each token after the first is scored once). token_logprobs, if non-NULL, gets [n-1]:
 * entry i = log p(tokens[i+1] | the tokens before it in its window). */
dz_status dz_lm_nll(dz_forward *f, const dz_weight_source *w, const int *tokens, int n, int seq,
                    double *nll_sum, int64_t *n_scored, float *token_logprobs, dz_error *err);

/* Causal-LM training sets, as one-candidate class sets: tokens = encode(text, bos), or
 * encode(prompt + completion, bos) scoring only the completion's tokens; a text longer
 * than max_len becomes consecutive windows sharing one token. labels are -1. */
dz_status dz_lm_set_build(const dz_dataset *ds, const dz_tokenizer *tok, int max_len, dz_class_set *out,
                          dz_error *err);
/* Per sequence of a batch: (summed NLL of its scored rows, number of rows) into out[2i],
 * out[2i+1]: the pairs a training step and a split evaluation combine in example order. */
void dz_lm_example_losses(const dz_class_batch *bb, const float *logprobs, double *out);
/* Mean NLL over every scored token of set, batch sequences at a time: the sum of the
 * per-sequence pairs in order; the pairs go to ex[2 * n_examples] if non-NULL. */
dz_status dz_lm_evaluate(dz_forward *f, const dz_weight_source *w, const dz_class_set *set, int batch, double *ex,
                         double *nll, dz_error *err);

/* Generation tasks (SQuAD, DROP), scored as the SQuAD v1.1 evaluation script does:
 * normalize_answer = ASCII lowercase, ASCII punctuation removed, the words a/an/the
 * removed, whitespace collapsed (non-ASCII letters are not lowercased); out holds at most
 * cap - 1 bytes. */
size_t dz_qa_normalize(const char *s, char *out, size_t cap);
/* Token F1 of the normalized strings (0 when they share no token, also when both are
 * empty) and exact match; dz_qa_best: the maxima over golds[n]. */
double dz_qa_f1(const char *pred, const char *gold);
int dz_qa_exact(const char *pred, const char *gold);
void dz_qa_best(const char *pred, char *const *golds, int n, double *f1, double *em);

/* A generation set: each example's prompt tokens (encode(text, bos), cut from the left
 * to leave max_new positions) and a copy of the examples (their answers). */
typedef struct dz_qa_set {
    int n_examples;
    int **prompts, *prompt_len;
    dz_dataset data;
    int truncated, truncated_line;
} dz_qa_set;
dz_status dz_qa_set_build(const dz_dataset *ds, const dz_tokenizer *tok, int max_len, int max_new, dz_qa_set *out,
                          dz_error *err);
void dz_qa_set_free(dz_qa_set *s);
/* The greedy answer after prompt[n_prompt]: up to max_new tokens, stopped before EOS,
 * at the first newline (cut there) or at the forward's length; decoded, whitespace
 * stripped, into out[cap]. work: max_seq ints; logits: vocab floats. Each token reruns
 * the whole sequence (no KV cache: any forward will do). */
dz_status dz_qa_answer(dz_forward *f, const dz_weight_source *w, const dz_tokenizer *tok, const int *prompt,
                       int n_prompt, int max_new, int *work, float *logits, char *out, int cap, dz_error *err);
/* One greedy answer being decoded (dz_qa_answer's rule, shared with training's decoding
 * under each perturbation): text into buf[cap]. step takes the argmax of logits[vocab] as
 * the token after prev and returns it (the caller appends it), or -1 when the answer
 * ended before it (EOS, or a newline: the text is cut there); done is set once it has
 * ended or max_new tokens are taken. answer: the text, whitespace stripped. */
typedef struct dz_qa_decoder {
    char *text;
    int len, cap, n_new, max_new, done;
} dz_qa_decoder;
void dz_qa_decoder_start(dz_qa_decoder *d, char *buf, int cap, int max_new);
int dz_qa_decoder_step(dz_qa_decoder *d, const dz_tokenizer *tok, int prev, const float *logits, int vocab);
const char *dz_qa_decoder_answer(dz_qa_decoder *d);
/* Examples [lo, hi) of s: f1[e - lo] and em[e - lo], the best over each one's answers. */
dz_status dz_qa_evaluate(dz_forward *f, const dz_weight_source *w, const dz_tokenizer *tok, const dz_qa_set *s, int lo,
                         int hi, int max_new, double *f1, double *em, dz_error *err);
/* The same, with each greedy answer too: answers[e - lo] (malloc'd, the caller frees them;
 * on an error those made so far are set, the others left as they were). */
dz_status dz_qa_evaluate_answers(dz_forward *f, const dz_weight_source *w, const dz_tokenizer *tok, const dz_qa_set *s,
                                 int lo, int hi, int max_new, double *f1, double *em, char **answers, dz_error *err);

/* Sampling: temperature 0 is greedy; otherwise nucleus sampling with top_p. */
typedef struct dz_sampler {
    float temperature;
    float top_p;
    uint64_t state; /* seeded from --seed */
} dz_sampler;

void dz_sampler_init(dz_sampler *s, float temperature, float top_p, uint64_t seed);
/* Picks a token from logits[vocab]; work must hold 2*vocab floats (probabilities, order). */
int dz_sampler_pick(dz_sampler *s, const float *logits, int vocab, float *work);

/* Generates up to n tokens after prompt[0..n_prompt) with a KV cache forward (batch 1),
 * stopping at eos (if eos >= 0) or at the forward's sequence length. Calls on_token for
 * each new token (may be NULL). Returns the count in *n_out (out must hold n). */
typedef void (*dz_token_cb)(int prev, int token, void *user);
dz_status dz_generate(dz_forward *f, const dz_weight_source *w, const int *prompt, int n_prompt, int n,
                      int eos, dz_sampler *s, int *out, int *n_out, dz_token_cb on_token, void *user,
                      dz_error *err);

#ifdef __cplusplus
}
#endif

#endif
