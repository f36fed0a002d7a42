/* Chat templates (generate --chat, issue 27.20): SmolLM2's GGUF template is ChatML and a
 * system + user turn encode to the ids of the ChatML text written out here; the common
 * templates are recognised by their markers and laid out as their Jinja would render one
 * system and one user turn (the expected texts are written out by hand from the
 * templates); tokenizer_config.json's chat_template (a string, a list's "default" entry)
 * and chat_template.jinja are read; anything else is refused with a message. */
#include "tokenizer_test_util.h"

#include <sys/stat.h>

static char g_dir[64];

static int setup(void **state) {
    (void)state;
    snprintf(g_dir, sizeof g_dir, "/tmp/dz_test_chat_XXXXXX");
    return mkdtemp(g_dir) ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
    return system(cmd) == 0 ? 0 : -1;
}

static dz_tokenizer *load(const char *path) {
    dz_tokenizer *tok = NULL;
    dz_error err = {0};
    if (dz_tokenizer_load(path, 0, &tok, &err) != DZ_OK) fail_msg("%s: %s", path, err.msg);
    return tok;
}

/* ids of text with special tokens parsed (what the template's text is to HF's tokenizer) */
static int encode_special(const dz_tokenizer *tok, const char *text, int *ids, int cap) {
    dz_error err = {0};
    const int n = dz_tokenizer_encode_flags(tok, text, DZ_ENCODE_SPECIAL, ids, cap, &err);
    if (n < 0 || n > cap) fail_msg("encode: %d (%s)", n, err.msg);
    return n;
}

static void expect_chat_ids(const dz_tokenizer *tok, const char *system, const char *user, const char *chatml) {
    int got[256], want[256];
    dz_error err = {0};
    const int n = dz_tokenizer_encode_chat(tok, system, user, got, 256, &err);
    if (n < 0) fail_msg("encode_chat: %s", err.msg);
    const int m = encode_special(tok, chatml, want, 256);
    assert_int_equal(n, m);
    assert_memory_equal(got, want, sizeof(int) * (size_t)n);
    int starts = 0, ends = 0; /* <|im_start|> = 1 and <|im_end|> = 2 in SmolLM2's vocabulary */
    for (int i = 0; i < n; i++) starts += got[i] == 1, ends += got[i] == 2;
    assert_int_equal(got[0], 1);
    assert_int_equal(starts, 3);
    assert_int_equal(ends, 2);
}

static void smollm2_gguf_is_chatml(void **state) {
    (void)state;
    char path[4096];
    test_asset_path(path, sizeof path, "smollm2-135m/SmolLM2-135M-Instruct.Q4_1.gguf");
    dz_tokenizer *tok = load(path);
    const char *t = dz_tokenizer_chat_template(tok);
    assert_non_null(t);
    assert_int_equal(dz_chat_detect(t), DZ_CHAT_CHATML);
    expect_chat_ids(tok, "Answer in one word.", "What is the capital of France?",
                    "<|im_start|>system\nAnswer in one word.<|im_end|>\n<|im_start|>user\nWhat is the capital of "
                    "France?<|im_end|>\n<|im_start|>assistant\n");
    /* no system message: the template writes its own (transformers renders it so) */
    expect_chat_ids(tok, NULL, "Hi",
                    "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
                    "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
    /* a checkpoint's tokenizer files (tokenizer_config.json) keep the template */
    char dir[256];
    snprintf(dir, sizeof dir, "%s/saved", g_dir);
    dz_error err = {0};
    if (dz_tokenizer_save_hf(tok, dir, &err) != DZ_OK) fail_msg("save: %s", err.msg);
    dz_tokenizer *back = load(dir);
    assert_non_null(dz_tokenizer_chat_template(back));
    assert_string_equal(dz_tokenizer_chat_template(back), t);
    dz_tokenizer_free(back);
    dz_tokenizer_free(tok);
}

/* A tokenizer folder: the small Llama-3-style tokenizer.json and a tokenizer_config.json
 * with chat_template = value (a JSON value), or chat_template.jinja = jinja. */
static dz_tokenizer *with_template(const char *name, const char *value, const char *jinja) {
    char dir[256], src[4096], dst[512], cfg[8192];
    snprintf(dir, sizeof dir, "%s/%s", g_dir, name);
    assert_int_equal(mkdir(dir, 0755), 0);
    snprintf(src, sizeof src, "%s/tokenizer/hf_small/llama3/tokenizer.json", DZ_TEST_DATA);
    snprintf(dst, sizeof dst, "%s/tokenizer.json", dir);
    dz_error err = {0};
    if (dz_copy_file(src, dst, &err) != DZ_OK) fail_msg("%s", err.msg);
    snprintf(cfg, sizeof cfg, "{\"bos_token\": \"<|begin_of_text|>\", \"eos_token\": \"<|eot_id|>\"%s%s}",
             value ? ", \"chat_template\": " : "", value ? value : "");
    snprintf(dst, sizeof dst, "%s/tokenizer_config.json", dir);
    if (dz_write_file_atomic(dst, cfg, strlen(cfg), &err) != DZ_OK) fail_msg("%s", err.msg);
    snprintf(dst, sizeof dst, "%s/chat_template.jinja", dir);
    if (jinja && dz_write_file_atomic(dst, jinja, strlen(jinja), &err) != DZ_OK) fail_msg("%s", err.msg);
    return load(dir);
}

static void expect_render(const dz_tokenizer *tok, const char *system, const char *user, const char *want, int want_bos) {
    char *text = NULL;
    int bos = -1;
    dz_error err = {0};
    if (dz_chat_render(tok, system, user, &text, &bos, &err) != DZ_OK) fail_msg("render: %s", err.msg);
    assert_string_equal(text, want);
    assert_int_equal(bos, want_bos);
    free(text);
}

/* Templates as their models publish them (JSON strings), shortened where the rest does not
 * change one system + one user turn. */
#define LLAMA3 "\"{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = " \
    "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + '<|eot_id|>' %}" \
    "{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}" \
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}\""
#define LLAMA2 "\"{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = " \
    "messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif %}" \
    "{% for message in loop_messages %}{% if loop.index0 == 0 and system_message != false %}{% set content = " \
    "'<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}{% else %}{% set content = " \
    "message['content'] %}{% endif %}{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + " \
    "' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}" \
    "{% endfor %}\""
#define ZEPHYR "\"{% for message in messages %}\\n{% if message['role'] == 'user' %}\\n{{ '<|user|>\\n' + " \
    "message['content'] + eos_token }}\\n{% elif message['role'] == 'system' %}\\n{{ '<|system|>\\n' + " \
    "message['content'] + eos_token }}\\n{% elif message['role'] == 'assistant' %}\\n{{ '<|assistant|>\\n'  + " \
    "message['content'] + eos_token }}\\n{% endif %}\\n{% if loop.last and add_generation_prompt %}\\n{{ " \
    "'<|assistant|>' }}\\n{% endif %}\\n{% endfor %}\""

static void common_templates(void **state) {
    (void)state;
    dz_tokenizer *tok = with_template("llama3", LLAMA3, NULL);
    assert_int_equal(dz_chat_detect(dz_tokenizer_chat_template(tok)), DZ_CHAT_LLAMA3);
    expect_render(tok, " Be brief. ", "Hello\n",
                  "<|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|><|start_header_id|>user"
                  "<|end_header_id|>\n\nHello<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n", 1);
    int ids[64], want[64];
    dz_error err = {0};
    const int n = dz_tokenizer_encode_chat(tok, NULL, "Hi", ids, 64, &err);
    assert_int_equal(ids[0], 1205); /* <|begin_of_text|> once: the template's bos_token */
    const int m = encode_special(tok, "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
                                      "<|start_header_id|>assistant<|end_header_id|>\n\n", want, 64);
    assert_int_equal(n, m);
    assert_memory_equal(ids, want, sizeof(int) * (size_t)n);
    dz_tokenizer_free(tok);

    tok = with_template("llama2", LLAMA2, NULL);
    assert_int_equal(dz_chat_detect(dz_tokenizer_chat_template(tok)), DZ_CHAT_LLAMA2);
    expect_render(tok, "Be brief.", " Hello ", "[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nHello [/INST]", 1);
    expect_render(tok, NULL, "Hello", "[INST] Hello [/INST]", 1);
    dz_tokenizer_free(tok);

    tok = with_template("zephyr", ZEPHYR, NULL); /* eos_token: this tokenizer's <|eot_id|> */
    assert_int_equal(dz_chat_detect(dz_tokenizer_chat_template(tok)), DZ_CHAT_ZEPHYR);
    expect_render(tok, "Be brief.", "Hello", "<|system|>\nBe brief.<|eot_id|>\n<|user|>\nHello<|eot_id|>\n<|assistant|>\n", 0);
    dz_tokenizer_free(tok);

    /* the list form (its "default" entry) and chat_template.jinja beside the config */
    tok = with_template("list", "[{\"name\": \"tool_use\", \"template\": \"{{ x }}\"}, {\"name\": \"default\", "
                                "\"template\": \"{% for m in messages %}<|im_start|>{{ m['role'] }}{% endfor %}\"}]", NULL);
    expect_render(tok, "S", "U", "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n", 0);
    dz_tokenizer_free(tok);
    tok = with_template("jinja", NULL, "{{ bos_token }}{% for m in messages %}<|im_start|>{{ m['content'] }}{% endfor %}");
    expect_render(tok, NULL, "U", "<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n", 1);
    dz_tokenizer_free(tok);
}

static void expect_refused(const dz_tokenizer *tok, const char *system, dz_status want, const char *what) {
    char *text = NULL;
    int bos = 0;
    dz_error err = {0};
    const dz_status st = dz_chat_render(tok, system, "U", &text, &bos, &err);
    if (st != want || !strstr(err.msg, what)) fail_msg("got %s (%s), want %s with \"%s\"", dz_status_name(st), err.msg,
                                                      dz_status_name(want), what);
    assert_null(text);
    int ids[8];
    assert_int_equal(dz_tokenizer_encode_chat(tok, system, "U", ids, 8, &err), -1);
}

static void others_refused(void **state) {
    (void)state;
    const struct { const char *name, *value; } unknown[] = {
        {"custom", "\"{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\\n{% endfor %}\""},
        {"phi3", "\"{% for m in messages %}{{'<|' + m['role'] + '|>' + '\\n' + m['content'] + '<|end|>\\n'}}{% endfor %}"
                 "<|user|><|assistant|>\""},
        {"mistral7", "\"[SYSTEM_PROMPT]{{ s }}[/SYSTEM_PROMPT][INST]{{ u }}[/INST]\""},
        {"phi4", "\"<|im_start|>{{ r }}<|im_sep|>{{ c }}<|im_end|>\""},
    };
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
        dz_tokenizer *tok = with_template(unknown[i].name, unknown[i].value, NULL);
        assert_int_equal(dz_chat_detect(dz_tokenizer_chat_template(tok)), DZ_CHAT_UNKNOWN);
        expect_refused(tok, NULL, DZ_ERR_UNSUPPORTED, "not one distzo recognises");
        dz_tokenizer_free(tok);
    }
    dz_tokenizer *tok = with_template("none", NULL, NULL);
    assert_null(dz_tokenizer_chat_template(tok));
    expect_refused(tok, NULL, DZ_ERR_INVALID, "carries no chat template");
    dz_tokenizer_free(tok);
    tok = with_template("mistral1", "\"{{ bos_token }}{% for m in messages %}{{ '[INST] ' + m['content'] + ' [/INST]' }}"
                                    "{% endfor %}\"", NULL); /* Llama-2's layout without <<SYS>> */
    expect_render(tok, NULL, "U", "[INST] U [/INST]", 1);
    expect_refused(tok, "S", DZ_ERR_UNSUPPORTED, "has no system turn");
    dz_tokenizer_free(tok);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(smollm2_gguf_is_chatml),
        cmocka_unit_test(common_templates),
        cmocka_unit_test(others_refused),
    };
    return test_assets_exit(cmocka_run_group_tests(tests, setup, teardown));
}
