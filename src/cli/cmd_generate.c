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
static int encode_prompt(const dz_tokenizer *tok, const char *model, const char *prompt, int chat, const char *system,
                         int *ids, int cap, dz_error *err) {
    if (!chat) return dz_tokenizer_encode(tok, prompt, 1, ids, cap, err);
    const int n = dz_tokenizer_encode_chat(tok, system, prompt, ids, cap, err);
    if (n < 0) {
        char msg[sizeof err->msg];
        snprintf(msg, sizeof msg, "%s", err->msg);
        dz_fail(err, err->code, "%s: --chat: %s", model, msg);
    } else {
        dz_log(DZ_LOG_INFO, "--chat: the prompt in %s's %s chat template%s", model,
               dz_chat_style_name(dz_chat_detect(dz_tokenizer_chat_template(tok))),
               system ? "" : " (its own system message, where it has one)");
    }
    return n;
}

int dz_cmd_generate(int argc, char **argv) {
    const char *prompt = "", *dtype = "f32", *tokenizer = NULL, *system = NULL, *backend = NULL;
    int n = 256, threads = 0, json = 0, chat = 0;
    uint64_t seed = 0;
    float temperature = 1.0f, top_p = 0.9f;
    const dz_opt opts[] = {
        {"prompt", DZ_OPT_STR, &prompt, "text to continue (default: empty, start from BOS); with --chat, the user's message"},
        {"chat", DZ_OPT_FLAG, &chat, "lay the prompt out with the model's chat template (GGUF tokenizer.chat_template or "
         "tokenizer_config.json chat_template: ChatML, Llama-2, Llama-3, Zephyr) and open the assistant's turn"},
        {"system", DZ_OPT_STR, &system, "with --chat: the system message (default: the template's own, if any)"},
        {"n|n", DZ_OPT_INT, &n, "tokens to generate (default 256)"},
        {"temperature", DZ_OPT_FLOAT, &temperature, "0 = greedy (default 1.0)"},
        {"top-p", DZ_OPT_FLOAT, &top_p, "nucleus sampling mass (default 0.9)"},
        {"seed", DZ_OPT_SEED, &seed, "sampling seed (default 0)"},
        {"dtype", DZ_OPT_STR, &dtype, "weights in memory: f32 or bf16"},
        {"tokenizer", DZ_OPT_STR, &tokenizer, "tokenizer file or folder (default: the model's own)"},
        dz_cli_threads_option(&threads, NULL),
        dz_cli_backend_option(&backend),
        {"json", DZ_OPT_FLAG, &json, "print JSON instead of streaming text"},
        {0},
    };
    const dz_cmd_spec spec = {
        .name = "generate",
        .usage = "MODEL [--prompt TEXT] [-n N] [options]",
        .summary = "Continues a prompt with MODEL. Temperature 0 decodes greedily.",
        .min_positional = 1,
        .max_positional = 1,
        .opts = opts,
    };
    /* accept the short -n N form too */
    const char *pos[1];
    int npos, rc = dz_cli_parse(&spec, argc, argv, pos, &npos);
    if (rc >= 0) return rc;
    if (n < 1) return dz_cli_failf("option -n: %d tokens requested; give at least 1", n);
    if (system && !chat) return dz_cli_failf("option --system: a system message needs --chat");
    if (!(temperature >= 0.0f))
        return dz_cli_failf("option --temperature: %g is negative (0: greedy)", (double)temperature);
    if (!(top_p > 0.0f && top_p <= 1.0f))
        return dz_cli_failf("option --top-p: %g is outside (0, 1] (the probability mass kept)", (double)top_p);
    dz_model *m;
    dz_tokenizer *tok;
    const dz_cli_preamble pre = {.threads = threads, .model = pos[0], .dtype = dtype, .tokenizer = tokenizer,
                                 .backend = backend};
    if ((rc = dz_cli_start(&pre, &m, &tok))) return rc;
    const dz_config *c = dz_model_config(m);
    dz_error err = {0};
    int cap = c->max_seq_len;
    if (n > cap) n = cap; /* generation stops at the model's last position anyway */
    int *ids = malloc(sizeof(int) * ((size_t)cap + (size_t)n));
    if (!ids) dz_fail(&err, DZ_ERR_NOMEM, "out of memory for %d token ids", cap + n);
    int n_prompt = ids ? encode_prompt(tok, pos[0], prompt, chat, system, ids, cap, &err) : -1;
    dz_forward *f = NULL;
    dz_backend *be = NULL;
    if (n_prompt < 0 || n_prompt >= cap) {
        rc = n_prompt < 0 ? dz_cli_fail(&err)
                          : dz_cli_failf("option --prompt: %d tokens do not fit %s's %d positions (leave room for -n)",
                                         n_prompt, dz_model_path(m), cap);
    } else if (n_prompt == 0) {
        rc = dz_cli_failf("%s: the tokenizer has no BOS token, so an empty prompt cannot start generation",
                          dz_model_path(m));
    } else {
        int seq = n_prompt + n < cap ? n_prompt + n : cap;
        rc = dz_backend_create(backend, &be, &err) == DZ_OK && dz_forward_create_backend(m, be, 1, seq, 1, 1, &f, &err) == DZ_OK
                 ? 0
                 : dz_cli_fail(&err);
    }
    if (rc == 0) {
        dz_sampler s;
        dz_sampler_init(&s, temperature, top_p, seed);
        printer p = {.tok = tok, .quiet = json};
        dz_weight_source w = dz_model_weights(m);
        if (!json) {
            for (int i = 0; i < n_prompt; i++) {
                char buf[256];
                if (ids[i] == dz_tokenizer_bos(tok)) continue; /* BOS is a marker, not text */
                fputs(dz_tokenizer_decode(tok, i ? ids[i - 1] : -1, ids[i], buf, sizeof buf), stdout);
            }
        }
        int n_out = 0;
        double t0 = dz_now();
        dz_status st = dz_generate(f, &w, ids, n_prompt, n, dz_tokenizer_eos(tok), &s, ids + n_prompt, &n_out,
                                   on_token, &p, &err);
        double secs = dz_now() - t0;
        if (st != DZ_OK) {
            rc = dz_cli_fail(&err);
        } else if (json) {
            printf("{\"prompt\": ");
            dz_cli_json_string(stdout, prompt);
            printf(", \"text\": ");
            dz_cli_json_string(stdout, p.text ? p.text : "");
            printf(", \"prompt_tokens\": [");
            for (int i = 0; i < n_prompt; i++) printf("%s%d", i ? ", " : "", ids[i]);
            printf("], \"tokens\": [");
            for (int i = 0; i < n_out; i++) printf("%s%d", i ? ", " : "", ids[n_prompt + i]);
            printf("], \"tokens_per_second\": %.1f}\n", n_out / (secs > 0 ? secs : 1e-9));
        } else {
            printf("\n");
            fprintf(stderr, "distzo: %d tokens in %.2f s (%.1f tokens/s)\n", n_out, secs, n_out / (secs > 0 ? secs : 1e-9));
        }
        free(p.text);
    }
    dz_forward_free(f);
    dz_backend_free(be);
    free(ids);
    dz_tokenizer_free(tok);
    dz_model_free(m);
    return rc;
}
