/* Chat templates without a Jinja interpreter: the common templates are recognised by
 * their markers, as llama.cpp's llm_chat_detect_template does, and one system turn and
 * one user turn are laid out as the template would lay them out, with the assistant's
 * turn opened (transformers' add_generation_prompt). Anything else is refused. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/internal.h"

static int has(const char *t, const char *s) { return strstr(t, s) != NULL; }

dz_chat_style dz_chat_detect(const char *t) {
    if (!t) return DZ_CHAT_UNKNOWN;
    if (has(t, "<|im_start|>")) /* Phi-4 and SmolVLM use the marker with other turns */
        return has(t, "<|im_sep|>") || has(t, "<end_of_utterance>") ? DZ_CHAT_UNKNOWN : DZ_CHAT_CHATML;
    if (has(t, "<|start_header_id|>") && has(t, "<|end_header_id|>")) return DZ_CHAT_LLAMA3;
    if (has(t, "[INST]")) /* Mistral's later layouts differ from Llama-2's */
        return has(t, "[SYSTEM_PROMPT]") || has(t, "[AVAILABLE_TOOLS]") || has(t, "' [INST] ' + system_message")
                   ? DZ_CHAT_UNKNOWN
                   : DZ_CHAT_LLAMA2;
    if (has(t, "<|user|>") && has(t, "<|assistant|>") && !has(t, "<|end|>")) return DZ_CHAT_ZEPHYR; /* not Phi-3 */
    return DZ_CHAT_UNKNOWN;
}

const char *dz_chat_style_name(dz_chat_style s) {
    switch (s) {
    case DZ_CHAT_CHATML: return "ChatML";
    case DZ_CHAT_LLAMA2: return "Llama-2 [INST]";
    case DZ_CHAT_LLAMA3: return "Llama-3";
    case DZ_CHAT_ZEPHYR: return "Zephyr";
    case DZ_CHAT_UNKNOWN: break;
    }
    return "unknown";
}

const char *dz_tokenizer_chat_template(const dz_tokenizer *tok) { return tok ? tok->chat_template : NULL; }

/* A ChatML template's own system message for a conversation without one (SmolLM2's "You
 * are a helpful AI assistant named SmolLM, ..."): literal text between "<|im_start|>system"
 * + a newline (or the Jinja escape \n) and "<|im_end|>" that holds no template code. */
static char *default_system(const char *t) {
    static const char *const heads[2] = {"<|im_start|>system\n", "<|im_start|>system\\n"};
    for (int h = 0; h < 2; h++)
        for (const char *p = strstr(t, heads[h]); p; p = strstr(p + 1, heads[h])) {
            const char *start = p + strlen(heads[h]), *end = strstr(start, "<|im_end|>");
            if (!end || end == start || strcspn(start, "{}'\"+") < (size_t)(end - start)) continue;
            char *out = malloc((size_t)(end - start) + 1);
            if (!out) return NULL;
            size_t n = 0;
            for (const char *c = start; c < end; c++) /* the Jinja escape \n is a newline */
                if (c[0] == '\\' && c + 1 < end && c[1] == 'n') out[n++] = '\n', c++;
                else out[n++] = *c;
            out[n] = '\0';
            return out;
        }
    return NULL;
}

/* s, or (trim) s without its surrounding whitespace, as Jinja's trim and Python's strip() */
static void put(FILE *f, const char *s, int trim) {
    size_t a = 0, b = strlen(s);
    while (trim && a < b && strchr(" \t\n\r", s[a])) a++;
    while (trim && b > a && strchr(" \t\n\r", s[b - 1])) b--;
    fwrite(s + a, 1, b - a, f);
}

/* Zephyr's end of a turn: <|endoftext|> (StableLM's), else the tokenizer's EOS where the
 * template writes eos_token (HuggingFaceH4's), else </s>. */
static const char *zephyr_end(const dz_tokenizer *tok, const char *t, char *buf, int cap) {
    if (has(t, "<|endoftext|>")) return "<|endoftext|>";
    const int eos = dz_tokenizer_special(tok, DZ_SPECIAL_EOS);
    const char *text = has(t, "eos_token") && eos >= 0 ? dz_tokenizer_decode(tok, -1, eos, buf, cap) : "";
    return *text ? text : "</s>";
}

static void layout(FILE *f, const dz_tokenizer *tok, dz_chat_style s, const char *t, const char *sys, const char *user) {
    char eos[256];
    switch (s) {
    case DZ_CHAT_CHATML:
        if (sys) fprintf(f, "<|im_start|>system\n%s<|im_end|>\n", sys);
        fprintf(f, "<|im_start|>user\n%s<|im_end|>\n<|im_start|>assistant\n", user);
        break;
    case DZ_CHAT_LLAMA2: { /* meta-llama/Llama-2-*-chat: bos + "[INST] <<SYS>>\n..\n<</SYS>>\n\n" + user + " [/INST]" */
        const int strip = has(t, ".strip()");
        fputs("[INST] ", f);
        if (sys) {
            fputs("<<SYS>>\n", f);
            put(f, sys, strip);
            fputs("\n<</SYS>>\n\n", f);
        }
        put(f, user, strip);
        fputs(" [/INST]", f);
        break;
    }
    case DZ_CHAT_LLAMA3: /* each message's content is trimmed */
        if (sys) {
            fputs("<|start_header_id|>system<|end_header_id|>\n\n", f);
            put(f, sys, 1);
            fputs("<|eot_id|>", f);
        }
        fputs("<|start_header_id|>user<|end_header_id|>\n\n", f);
        put(f, user, 1);
        fputs("<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n", f);
        break;
    case DZ_CHAT_ZEPHYR: {
        const char *end = zephyr_end(tok, t, eos, sizeof eos);
        if (sys) fprintf(f, "<|system|>\n%s%s\n", sys, end);
        fprintf(f, "<|user|>\n%s%s\n<|assistant|>\n", user, end);
        break;
    }
    case DZ_CHAT_UNKNOWN: break;
    }
}

/* Templates of these styles that have no system turn: a system message is refused. */
static int has_system_turn(dz_chat_style s, const char *t) {
    if (s == DZ_CHAT_LLAMA2) return has(t, "<<SYS>>");
    if (s == DZ_CHAT_ZEPHYR) return has(t, "<|system|>");
    return 1;
}

dz_status dz_chat_render(const dz_tokenizer *tok, const char *system, const char *user, char **text, int *add_bos,
                         dz_error *err) {
    *text = NULL, *add_bos = 0;
    const char *t = dz_tokenizer_chat_template(tok);
    if (!t)
        return dz_fail(err, DZ_ERR_INVALID, "the tokenizer carries no chat template (GGUF tokenizer.chat_template, "
                       "tokenizer_config.json chat_template or chat_template.jinja)");
    const dz_chat_style s = dz_chat_detect(t);
    if (s == DZ_CHAT_UNKNOWN)
        return dz_fail(err, DZ_ERR_UNSUPPORTED, "the chat template is not one distzo recognises (ChatML, Llama-2 [INST], "
                       "Llama-3, Zephyr, by their markers: there is no Jinja interpreter); it begins \"%.60s\"", t);
    if (system && !has_system_turn(s, t))
        return dz_fail(err, DZ_ERR_UNSUPPORTED, "the %s chat template has no system turn: leave out the system message",
                       dz_chat_style_name(s));
    char *own = !system && s == DZ_CHAT_CHATML ? default_system(t) : NULL;
    size_t len = 0;
    FILE *f = open_memstream(text, &len);
    if (!f) {
        free(own);
        return dz_fail(err, DZ_ERR_NOMEM, "out of memory for the chat prompt");
    }
    layout(f, tok, s, t, system ? system : own, user);
    free(own);
    if (fclose(f) != 0 || !*text) {
        free(*text), *text = NULL;
        return dz_fail(err, DZ_ERR_NOMEM, "out of memory for the chat prompt");
    }
    *add_bos = has(t, "bos_token"); /* the template starts with it: transformers adds no other */
    return DZ_OK;
}

int dz_tokenizer_encode_chat(const dz_tokenizer *tok, const char *system, const char *user, int *ids, int cap,
                             dz_error *err) {
    char *text = NULL;
    int bos = 0;
    if (dz_chat_render(tok, system, user, &text, &bos, err) != DZ_OK) return -1;
    const int bos_id = dz_tokenizer_special(tok, DZ_SPECIAL_BOS);
    const int k = bos && dz_tokenizer_bos(tok) < 0 && bos_id >= 0; /* declared, not added by encode: put first */
    if (k && cap > 0) ids[0] = bos_id;
    const unsigned flags = DZ_ENCODE_SPECIAL | (bos && !k ? DZ_ENCODE_BOS : 0);
    const int n = dz_tokenizer_encode_flags(tok, text, flags, k && cap > 0 ? ids + 1 : ids, cap > k ? cap - k : 0, err);
    free(text);
    return n < 0 ? -1 : n + k;
}
