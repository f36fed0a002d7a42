/* distzo generate MODEL --prompt TEXT -n N: greedy (temperature 0) or nucleus sampling;
 * --chat lays the prompt out with the model's chat template. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/common.h"

typedef struct printer {
    const dz_tokenizer *tok;
    int quiet;
    char *text;   /* the decoded continuation, for --json */
    size_t len, cap;
} printer;

static void on_token(int prev, int token, void *user) {
    printer *p = user;
    char buf[256];
    const char *piece = dz_tokenizer_decode(p->tok, prev, token, buf, sizeof buf);
    size_t n = strlen(piece);
    if (p->len + n + 1 > p->cap) {
        size_t cap = (p->cap + n + 1) * 2;
        char *t = realloc(p->text, cap);
        if (!t) return;
        p->text = t;
        p->cap = cap;
    }
    memcpy(p->text + p->len, piece, n + 1);
    p->len += n;
    if (!p->quiet) {
        fputs(piece, stdout);
        fflush(stdout);
    }
}

/* The prompt's ids: the text as it is, or (--chat) a user turn in the model's chat template. */
static int encode_prompt(const dz_tokenizer *tok, const char *source, const char *prompt, int chat, const char *system,
                         int *ids, int cap, dz_error *err) {
    if (!chat) return dz_tokenizer_encode(tok, prompt, 1, ids, cap, err);
    const int n = dz_tokenizer_encode_chat(tok, system, prompt, ids, cap, err);
    if (n < 0) {
        char msg[sizeof err->msg];
        snprintf(msg, sizeof msg, "%s", err->msg);
        dz_fail(err, err->code, "%s: --chat: %s", source, msg);
    } else {
        dz_log(DZ_LOG_INFO, "--chat: the prompt in %s's %s chat template%s", source,
               dz_chat_style_name(dz_chat_detect(dz_tokenizer_chat_template(tok))),
               system ? "" : " (its own system message, where it has one)");
    }
    return n;
}

/* The command's options. */
typedef struct gen_opts {
    const char *prompt, *dtype, *tokenizer, *system, *backend;
    const char *adapter; /* --adapter: a PEFT LoRA folder */
    int n, threads, json, chat, keep_quantized;
    uint64_t seed;
    float temperature, top_p;
} gen_opts;

/* 0, or the exit status after naming the option out of range. */
static int check_options(const gen_opts *o) {
    if (o->n < 1) return dz_cli_failf("option -n: %d tokens requested; give at least 1", o->n);
    if (o->system && !o->chat) return dz_cli_failf("option --system: a system message needs --chat");
    if (!(o->temperature >= 0.0f))
        return dz_cli_failf("option --temperature: %g is negative (0: greedy)", (double)o->temperature);
    if (!(o->top_p > 0.0f && o->top_p <= 1.0f))
        return dz_cli_failf("option --top-p: %g is outside (0, 1] (the probability mass kept)", (double)o->top_p);
    return 0;
}

/* A forward for the n_prompt ids (n_prompt < 0: encoding failed, err says why) and n more
 * tokens, within the model's cap positions; 0, or the exit status. */
static int open_forward(dz_model *m, dz_backend *be, int n_prompt, int n, int cap, dz_forward **f, dz_error *err) {
    if (n_prompt < 0) return dz_cli_fail(err);
    if (n_prompt >= cap)
        return dz_cli_failf("option --prompt: %d tokens do not fit %s's %d positions (leave room for -n)", n_prompt,
                            dz_model_path(m), cap);
    if (n_prompt == 0)
        return dz_cli_failf("%s: the tokenizer has no BOS token, so an empty prompt cannot start generation",
                            dz_model_path(m));
    const int seq = n_prompt + n < cap ? n_prompt + n : cap;
    return dz_forward_create_backend(m, be, 1, seq, 1, 1, f, err) == DZ_OK ? 0 : dz_cli_fail(err);
}

/* The prompt as text before its continuation streams (BOS is a marker, not text). */
static void echo_prompt(const dz_tokenizer *tok, const int *ids, int n_prompt) {
    for (int i = 0; i < n_prompt; i++) {
        char buf[256];
        if (ids[i] == dz_tokenizer_bos(tok)) continue;
        fputs(dz_tokenizer_decode(tok, i ? ids[i - 1] : -1, ids[i], buf, sizeof buf), stdout);
    }
}

/* --json: the prompt, the continuation's text, both as ids, and the speed. */
static void print_json(const char *prompt, const char *text, const int *ids, int n_prompt, int n_out, double secs) {
    printf("{\"prompt\": ");
    dz_cli_json_string(stdout, prompt);
    printf(", \"text\": ");
    dz_cli_json_string(stdout, text ? text : "");
    printf(", \"prompt_tokens\": [");
    for (int i = 0; i < n_prompt; i++) printf("%s%d", i ? ", " : "", ids[i]);
    printf("], \"tokens\": [");
    for (int i = 0; i < n_out; i++) printf("%s%d", i ? ", " : "", ids[n_prompt + i]);
    printf("], \"tokens_per_second\": %.1f}\n", n_out / (secs > 0 ? secs : 1e-9));
}

/* Up to n tokens after the n_prompt ids (ids has room for them), streamed or as JSON. */
static int sample(const gen_opts *o, dz_model *m, const dz_tokenizer *tok, dz_forward *f, int *ids, int n_prompt,
                  int n) {
    dz_error err = {0};
    dz_sampler s;
    dz_sampler_init(&s, o->temperature, o->top_p, o->seed);
    printer p = {.tok = tok, .quiet = o->json};
    dz_weight_source w = dz_model_weights(m);
    if (!o->json) echo_prompt(tok, ids, n_prompt);
    int n_out = 0;
    const double t0 = dz_now();
    const dz_status st = dz_generate(f, &w, ids, n_prompt, n, dz_tokenizer_eos(tok), &s, ids + n_prompt, &n_out,
                                     on_token, &p, &err);
    const double secs = dz_now() - t0;
    const int rc = st == DZ_OK ? 0 : dz_cli_fail(&err);
    if (!rc && o->json) {
        print_json(o->prompt, p.text, ids, n_prompt, n_out, secs);
    } else if (!rc) {
        printf("\n");
        fprintf(stderr, "distzo: %d tokens in %.2f s (%.1f tokens/s)\n", n_out, secs, n_out / (secs > 0 ? secs : 1e-9));
    }
    free(p.text);
    return rc;
}

/* The prompt encoded, then its continuation. */
static int generate(const gen_opts *o, const char *model, dz_model *m, const dz_tokenizer *tok) {
    dz_error err = {0};
    const int cap = dz_model_config(m)->max_seq_len;
    const int n = o->n < cap ? o->n : cap; /* generation stops at the model's last position anyway */
    int *ids = malloc(sizeof(int) * ((size_t)cap + (size_t)n));
    if (!ids) dz_fail(&err, DZ_ERR_NOMEM, "out of memory for %d token ids", cap + n);
    const char *tok_source = o->tokenizer ? o->tokenizer : model; /* where the chat template comes from */
    const int n_prompt = ids ? encode_prompt(tok, tok_source, o->prompt, o->chat, o->system, ids, cap, &err) : -1;
    dz_forward *f = NULL;
    dz_backend *be = NULL;
    dz_model *lora = NULL;
    int rc = n_prompt < 0 || dz_backend_create(o->backend, &be, &err) == DZ_OK ? 0 : dz_cli_fail(&err);
    /* the last token is sampled from the last position's logits, never fed back: one more than the free positions */
    if (!rc && n_prompt > 0 && n_prompt < cap && o->n > cap - n_prompt + 1) /* said, not silently cut */
        dz_log(DZ_LOG_WARN, "-n %d: the prompt's %d tokens and the model's %d positions leave room for %d; generating "
               "at most that many", o->n, n_prompt, cap, cap - n_prompt + 1);
    if (!rc) rc = open_forward(m, be, n_prompt, n, cap, &f, &err);
    if (!rc && o->adapter && (dz_lora_load(o->adapter, dz_model_config(m), &lora, &err) != DZ_OK ||
                              dz_forward_set_adapter(f, lora, NULL, &err) != DZ_OK))
        rc = dz_cli_fail(&err);
    if (!rc) rc = sample(o, m, tok, f, ids, n_prompt, n);
    dz_forward_free(f);
    dz_model_free(lora);
    dz_backend_free(be);
    free(ids);
    return rc;
}

static const dz_cmd_spec generate_cmd = {
    .name = "generate", .usage = "MODEL [--prompt TEXT] [-n N] [options]", .min_positional = 1, .max_positional = 1,
    .summary = "Continues a prompt with MODEL. Temperature 0 decodes greedily."};

int dz_cmd_generate(int argc, char **argv) {
    gen_opts o = {.prompt = "", .dtype = "f32", .n = 256, .temperature = 1.0f, .top_p = 0.9f};
    const char *gpu_math = NULL;
    const dz_opt opts[] = {
        {"prompt", DZ_OPT_STR, &o.prompt, "text to continue (default: empty, start from BOS); with --chat, the user's message"},
        {"chat", DZ_OPT_FLAG, &o.chat, "lay the prompt out with the model's chat template (GGUF tokenizer.chat_template or "
         "tokenizer_config.json chat_template: ChatML, Llama-2, Llama-3, Zephyr) and open the assistant's turn"},
        {"system", DZ_OPT_STR, &o.system, "with --chat: the system message (default: the template's own, if any)"},
        {"n|n", DZ_OPT_INT, &o.n, "tokens to generate (default 256)"},
        {"temperature", DZ_OPT_FLOAT, &o.temperature, "0 = greedy (default 1.0)"},
        {"top-p", DZ_OPT_FLOAT, &o.top_p, "nucleus sampling mass (default 0.9)"},
        {"seed", DZ_OPT_SEED, &o.seed, "sampling seed (default 0)"},
        dz_cli_dtype_option(&o.dtype, NULL),
        dz_cli_keep_quantized_option(&o.keep_quantized),
        dz_cli_tokenizer_option(&o.tokenizer, NULL),
        dz_cli_threads_option(&o.threads, NULL),
        dz_cli_backend_option(&o.backend),
        dz_cli_gpu_math_option(&gpu_math),
        {"json", DZ_OPT_FLAG, &o.json, "print JSON instead of streaming text"},
        {"adapter", DZ_OPT_STR, &o.adapter, "a PEFT adapter folder (LoRA or PREFIX_TUNING) run beside MODEL, its base"},
        {0},
    };
    /* accept the short -n N form too */
    const char *pos[1];
    int rc = dz_cli_parse(&generate_cmd, opts, argc, argv, pos);
    if (rc >= 0) return rc;
    if ((rc = check_options(&o))) return rc;
    if (o.temperature == 0.0f && (dz_cli_option_given(argc, argv, "top-p") || dz_cli_option_given(argc, argv, "seed")))
        dz_log(DZ_LOG_WARN, "--temperature 0 is greedy: --top-p and --seed have no effect");
    dz_cli_gpu_math_join(&o.backend, gpu_math);
    dz_model *m;
    dz_tokenizer *tok;
    const dz_cli_preamble pre = {.threads = o.threads, .model = pos[0], .dtype = o.dtype, .tokenizer = o.tokenizer,
                                 .backend = o.backend, .keep_quantized = o.keep_quantized};
    if ((rc = dz_cli_start(&pre, &m, &tok))) return rc;
    rc = generate(&o, pos[0], m, tok);
    dz_tokenizer_free(tok);
    dz_model_free(m);
    return rc;
}
