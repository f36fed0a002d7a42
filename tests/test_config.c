/* config.json parsing for OPT and the LLaMA family, checked field by field against the
 * values in configs modelled on the published ones (facebook/opt-125m, opt-350m,
 * TinyLlama, Qwen2.5-0.5B, Mistral-7B-v0.3), plus write -> read and malformed inputs. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <sys/stat.h>
#include <cmocka.h>

#include "temp_dir.h"

#include "distzo/dtype.h"
#include "distzo/model.h"

/* Writes text to g_dir/name and returns the path (static storage, one at a time). */
static const char *cfg_file(const char *name, const char *text) {
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", g_dir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    return path;
}

static dz_config parse_ok(const char *name, const char *text) {
    dz_config cfg;
    dz_error err = {0};
    const char *path = cfg_file(name, text);
    if (dz_config_from_hf_json(path, &cfg, &err) != DZ_OK) fail_msg("%s", err.msg);
    return cfg;
}

static void parse_bad(const char *name, const char *text, dz_status want, const char *culprit) {
    dz_config cfg;
    dz_error err = {0};
    const char *path = cfg_file(name, text);
    dz_status s = dz_config_from_hf_json(path, &cfg, &err);
    if (s != want) fail_msg("%s: got %s (%s), want %s", name, dz_status_name(s), err.msg, dz_status_name(want));
    if (!strstr(err.msg, path)) fail_msg("message does not name the file: %s", err.msg);
    if (!strstr(err.msg, culprit)) fail_msg("message lacks \"%s\": %s", culprit, err.msg);
}

#define OPT_125M                                                                                    \
    "{\"_name_or_path\": \"facebook/opt-125m\", \"activation_dropout\": 0.0,"                      \
    " \"activation_function\": \"relu\", \"architectures\": [\"OPTForCausalLM\"],"                 \
    " \"attention_dropout\": 0.0, \"bos_token_id\": 2, \"do_layer_norm_before\": true,"            \
    " \"dropout\": 0.1, \"eos_token_id\": 2, \"ffn_dim\": 3072, \"hidden_size\": 768,"            \
    " \"init_std\": 0.02, \"layerdrop\": 0.0, \"max_position_embeddings\": 2048,"                  \
    " \"model_type\": \"opt\", \"num_attention_heads\": 12, \"num_hidden_layers\": 12,"            \
    " \"pad_token_id\": 1, \"prefix\": \"</s>\", \"torch_dtype\": \"float16\","                    \
    " \"transformers_version\": \"4.21.0.dev0\", \"use_cache\": true, \"vocab_size\": 50272,"      \
    " \"word_embed_proj_dim\": 768}"

static void opt_125m(void **state) {
    (void)state;
    dz_config c = parse_ok("opt125m.json", OPT_125M);
    assert_int_equal(c.arch, DZ_ARCH_OPT);
    assert_int_equal(c.vocab_size, 50272);
    assert_int_equal(c.dim, 768);
    assert_int_equal(c.hidden_dim, 3072);
    assert_int_equal(c.n_layers, 12);
    assert_int_equal(c.n_heads, 12);
    assert_int_equal(c.n_kv_heads, 12);
    assert_int_equal(c.head_dim, 64);
    assert_int_equal(c.max_seq_len, 2048);
    assert_int_equal(c.embed_dim, 768);
    assert_int_equal(c.pre_norm, 1);
    assert_int_equal(c.final_norm, 1);
    assert_true(c.norm_eps == 1e-5f);
    assert_int_equal(c.tied_head, 1);
    assert_int_equal(c.qkv_bias, 1);
    assert_int_equal(c.out_bias, 1);
    assert_int_equal(c.pos_offset, 2);
    assert_int_equal(c.bos_id, 2);
    assert_int_equal(c.eos_id, 2);
    assert_int_equal(c.pad_id, 1);
}

static void opt_350m_post_ln(void **state) {
    (void)state;
    /* Also leaves out the fields that have defaults (tie, biases, ids). */
    dz_config c = parse_ok("opt350m.json",
                           "{\"architectures\": [\"OPTForCausalLM\"], \"activation_function\": \"relu\","
                           " \"do_layer_norm_before\": false, \"ffn_dim\": 4096, \"hidden_size\": 1024,"
                           " \"max_position_embeddings\": 2048, \"num_attention_heads\": 16,"
                           " \"num_hidden_layers\": 24, \"vocab_size\": 50272, \"word_embed_proj_dim\": 512}");
    assert_int_equal(c.arch, DZ_ARCH_OPT);
    assert_int_equal(c.dim, 1024);
    assert_int_equal(c.hidden_dim, 4096);
    assert_int_equal(c.n_layers, 24);
    assert_int_equal(c.head_dim, 64);
    assert_int_equal(c.embed_dim, 512);
    assert_int_equal(c.pre_norm, 0);
    assert_int_equal(c.final_norm, 0);
    assert_int_equal(c.tied_head, 1);
    assert_int_equal(c.qkv_bias, 1);
    assert_int_equal(c.bos_id, 2);
    assert_int_equal(c.eos_id, 2);
    assert_int_equal(c.pad_id, 1);

    c = parse_ok("opt_nofinal.json",
                 "{\"model_type\": \"opt\", \"ffn_dim\": 64, \"hidden_size\": 16, \"max_position_embeddings\": 32,"
                 " \"num_attention_heads\": 4, \"num_hidden_layers\": 2, \"vocab_size\": 100,"
                 " \"_remove_final_layer_norm\": true, \"enable_bias\": false, \"tie_word_embeddings\": false,"
                 " \"pad_token_id\": null}");
    assert_int_equal(c.pre_norm, 1);
    assert_int_equal(c.final_norm, 0);
    assert_int_equal(c.qkv_bias, 0);
    assert_int_equal(c.out_bias, 0);
    assert_int_equal(c.tied_head, 0);
    assert_int_equal(c.embed_dim, 16);
    assert_int_equal(c.pad_id, -1);
}

#define TINYLLAMA                                                                                   \
    "{\"architectures\": [\"LlamaForCausalLM\"], \"attention_bias\": false, \"bos_token_id\": 1,"  \
    " \"eos_token_id\": [2, 32000], \"hidden_act\": \"silu\", \"hidden_size\": 2048,"              \
    " \"intermediate_size\": 5632, \"max_position_embeddings\": 2048, \"model_type\": \"llama\","   \
    " \"num_attention_heads\": 32, \"num_hidden_layers\": 22, \"num_key_value_heads\": 4,"        \
    " \"rms_norm_eps\": 1e-05, \"rope_scaling\": null, \"rope_theta\": 10000.0,"                   \
    " \"tie_word_embeddings\": true, \"torch_dtype\": \"bfloat16\", \"vocab_size\": 32001}"

static void llama_gqa_tied(void **state) {
    (void)state;
    dz_config c = parse_ok("tinyllama.json", TINYLLAMA);
    assert_int_equal(c.arch, DZ_ARCH_LLAMA);
    assert_int_equal(c.vocab_size, 32001);
    assert_int_equal(c.dim, 2048);
    assert_int_equal(c.hidden_dim, 5632);
    assert_int_equal(c.n_layers, 22);
    assert_int_equal(c.n_heads, 32);
    assert_int_equal(c.n_kv_heads, 4);
    assert_int_equal(c.head_dim, 64);
    assert_int_equal(c.max_seq_len, 2048);
    assert_int_equal(c.embed_dim, 2048);
    assert_true(c.norm_eps == 1e-5f);
    assert_true(c.rope_theta == 10000.0f);
    assert_int_equal(c.tied_head, 1);
    assert_int_equal(c.pre_norm, 1);
    assert_int_equal(c.final_norm, 1);
    assert_int_equal(c.qkv_bias, 0);
    assert_int_equal(c.out_bias, 0);
    assert_int_equal(c.pos_offset, 0);
    assert_int_equal(c.bos_id, 1);
    assert_int_equal(c.eos_id, 2); /* first of the list */
    assert_int_equal(c.pad_id, -1);

    /* transformers 5 layout: rope_parameters, no top-level rope_theta; defaults elsewhere. */
    c = parse_ok("llama_v5.json",
                 "{\"model_type\": \"llama\", \"hidden_size\": 64, \"intermediate_size\": 128,"
                 " \"max_position_embeddings\": 256, \"num_attention_heads\": 4, \"num_hidden_layers\": 2,"
                 " \"vocab_size\": 512, \"head_dim\": 16, \"pad_token_id\": null, \"eos_token_id\": null,"
                 " \"rope_parameters\": {\"rope_theta\": 500000.0, \"rope_type\": \"default\"}}");
    assert_int_equal(c.n_kv_heads, 4);
    assert_int_equal(c.head_dim, 16);
    assert_true(c.rope_theta == 500000.0f);
    assert_true(c.norm_eps == 1e-6f);
    assert_int_equal(c.tied_head, 0);
    assert_int_equal(c.bos_id, 1);
    assert_int_equal(c.eos_id, -1);
    assert_int_equal(c.pad_id, -1);
}

#define QWEN25_05B                                                                                  \
    "{\"architectures\": [\"Qwen2ForCausalLM\"], \"attention_dropout\": 0.0,"                      \
    " \"bos_token_id\": 151643, \"eos_token_id\": 151643, \"hidden_act\": \"silu\","               \
    " \"hidden_size\": 896, \"initializer_range\": 0.02, \"intermediate_size\": 4864,"             \
    " \"max_position_embeddings\": 32768, \"max_window_layers\": 24, \"model_type\": \"qwen2\","    \
    " \"num_attention_heads\": 14, \"num_hidden_layers\": 24, \"num_key_value_heads\": 2,"         \
    " \"rms_norm_eps\": 1e-06, \"rope_theta\": 1000000.0, \"sliding_window\": 32768,"              \
    " \"tie_word_embeddings\": true, \"torch_dtype\": \"bfloat16\", \"use_cache\": true,"          \
    " \"use_sliding_window\": false, \"vocab_size\": 151936}"

static void qwen2(void **state) {
    (void)state;
    dz_config c = parse_ok("qwen.json", QWEN25_05B);
    assert_int_equal(c.arch, DZ_ARCH_LLAMA);
    assert_int_equal(c.vocab_size, 151936);
    assert_int_equal(c.dim, 896);
    assert_int_equal(c.hidden_dim, 4864);
    assert_int_equal(c.n_layers, 24);
    assert_int_equal(c.n_heads, 14);
    assert_int_equal(c.n_kv_heads, 2);
    assert_int_equal(c.head_dim, 64);
    assert_int_equal(c.max_seq_len, 32768);
    assert_true(c.norm_eps == 1e-6f);
    assert_true(c.rope_theta == 1e6f);
    assert_int_equal(c.tied_head, 1);
    assert_int_equal(c.qkv_bias, 1);
    assert_int_equal(c.out_bias, 0);
    assert_int_equal(c.bos_id, 151643);
    assert_int_equal(c.eos_id, 151643);
    assert_int_equal(c.pad_id, -1);
}

#define MISTRAL                                                                                     \
    "{\"architectures\": [\"MistralForCausalLM\"], \"bos_token_id\": 1, \"eos_token_id\": 2,"     \
    " \"head_dim\": 128, \"hidden_act\": \"silu\", \"hidden_size\": 4096,"                         \
    " \"intermediate_size\": 14336, \"max_position_embeddings\": 32768, \"model_type\": \"mistral\"," \
    " \"num_attention_heads\": 32, \"num_hidden_layers\": 32, \"num_key_value_heads\": 8,"         \
    " \"rms_norm_eps\": 1e-05, \"rope_theta\": 1000000.0, \"sliding_window\": null,"               \
    " \"tie_word_embeddings\": false, \"torch_dtype\": \"bfloat16\", \"vocab_size\": 32768}"

static void mistral(void **state) {
    (void)state;
    dz_config c = parse_ok("mistral.json", MISTRAL);
    assert_int_equal(c.arch, DZ_ARCH_LLAMA);
    assert_int_equal(c.vocab_size, 32768);
    assert_int_equal(c.dim, 4096);
    assert_int_equal(c.hidden_dim, 14336);
    assert_int_equal(c.n_kv_heads, 8);
    assert_int_equal(c.head_dim, 128);
    assert_true(c.rope_theta == 1e6f);
    assert_true(c.norm_eps == 1e-5f);
    assert_int_equal(c.tied_head, 0);
    assert_int_equal(c.qkv_bias, 0);
    assert_int_equal(c.eos_id, 2);
}

/* write -> read gives back the same struct, for each architecture variant. */
static void round_trip(void **state) {
    (void)state;
    const char *texts[] = {OPT_125M, TINYLLAMA, QWEN25_05B, MISTRAL};
    char path[512];
    snprintf(path, sizeof path, "%s/written.json", g_dir);
    for (size_t i = 0; i < sizeof texts / sizeof *texts; i++) {
        dz_config a = parse_ok("src.json", texts[i]), b;
        dz_error err = {0};
        if (dz_config_write_hf_json(&a, path, DZ_BF16, &err) != DZ_OK) fail_msg("%s", err.msg);
        if (dz_config_from_hf_json(path, &b, &err) != DZ_OK) fail_msg("%s", err.msg);
        assert_memory_equal(&a, &b, sizeof a);
    }
    /* The post-LN OPT with a projection, and what the file says about dtype. */
    dz_config a = parse_ok("src.json",
                           "{\"model_type\": \"opt\", \"do_layer_norm_before\": false, \"ffn_dim\": 64,"
                           " \"hidden_size\": 32, \"max_position_embeddings\": 64, \"num_attention_heads\": 4,"
                           " \"num_hidden_layers\": 2, \"vocab_size\": 100, \"word_embed_proj_dim\": 16}"), b;
    dz_error err = {0};
    if (dz_config_write_hf_json(&a, path, DZ_F16, &err) != DZ_OK) fail_msg("%s", err.msg);
    if (dz_config_from_hf_json(path, &b, &err) != DZ_OK) fail_msg("%s", err.msg);
    assert_memory_equal(&a, &b, sizeof a);
    FILE *f = fopen(path, "r");
    char text[4096] = {0};
    assert_true(fread(text, 1, sizeof text - 1, f) > 0);
    fclose(f);
    assert_non_null(strstr(text, "\"torch_dtype\":\t\"float16\""));
    assert_non_null(strstr(text, "\"OPTForCausalLM\""));
}

#define SMALL_LLAMA(extra)                                                                          \
    "{\"model_type\": \"llama\", \"hidden_size\": 64, \"intermediate_size\": 128,"                 \
    " \"max_position_embeddings\": 256, \"num_attention_heads\": 4, \"num_hidden_layers\": 2,"    \
    " \"vocab_size\": 512" extra "}"

static void malformed(void **state) {
    (void)state;
    parse_bad("bad.json", "{\"model_type\": \"opt\", \"hidden_size\": ", DZ_ERR_FORMAT, "malformed JSON");
    parse_bad("trailing.json", SMALL_LLAMA("") " }", DZ_ERR_FORMAT, "malformed JSON");
    parse_bad("array.json", "[1, 2]", DZ_ERR_FORMAT, "not a JSON object");
    /* cJSON reads a repeated key's first value, transformers its last: refused, named */
    parse_bad("twice.json", SMALL_LLAMA(", \"num_hidden_layers\": 4"), DZ_ERR_FORMAT,
              "key 'num_hidden_layers' is given twice");
    /* named by the file's own key (hidden_size was blamed on head_dim; 1e300 read as inf
     * was "norm_eps must be positive") */
    parse_bad("neg_hidden.json",
              "{\"model_type\": \"llama\", \"hidden_size\": -64, \"intermediate_size\": 128,"
              " \"max_position_embeddings\": 256, \"num_attention_heads\": 4, \"num_hidden_layers\": 2,"
              " \"vocab_size\": 512}",
              DZ_ERR_FORMAT, "field 'hidden_size' is -64; a size must be positive");
    parse_bad("huge_eps.json", SMALL_LLAMA(", \"rms_norm_eps\": 1e300"), DZ_ERR_FORMAT,
              "field 'rms_norm_eps': 1e+300 is past a float's range");
    parse_bad("no_hidden.json",
              "{\"model_type\": \"llama\", \"intermediate_size\": 128, \"max_position_embeddings\": 256,"
              " \"num_attention_heads\": 4, \"num_hidden_layers\": 2, \"vocab_size\": 512}",
              DZ_ERR_FORMAT, "field 'hidden_size' is missing");
    parse_bad("no_type.json", "{\"hidden_size\": 64}", DZ_ERR_FORMAT, "'model_type'");
    parse_bad("str_hidden.json",
              "{\"model_type\": \"llama\", \"hidden_size\": \"64\", \"intermediate_size\": 128,"
              " \"max_position_embeddings\": 256, \"num_attention_heads\": 4, \"num_hidden_layers\": 2,"
              " \"vocab_size\": 512}",
              DZ_ERR_FORMAT, "field 'hidden_size' is not an integer");
    parse_bad("frac_layers.json", SMALL_LLAMA(", \"num_key_value_heads\": 2.5"), DZ_ERR_FORMAT,
              "'num_key_value_heads'");
    parse_bad("bool_str.json", SMALL_LLAMA(", \"tie_word_embeddings\": \"yes\""), DZ_ERR_FORMAT,
              "'tie_word_embeddings'");
    parse_bad("gelu.json",
              "{\"model_type\": \"opt\", \"activation_function\": \"gelu\", \"ffn_dim\": 64, \"hidden_size\": 16,"
              " \"max_position_embeddings\": 32, \"num_attention_heads\": 4, \"num_hidden_layers\": 2,"
              " \"vocab_size\": 100}",
              DZ_ERR_UNSUPPORTED, "'activation_function'");
    parse_bad("gelu_llama.json", SMALL_LLAMA(", \"hidden_act\": \"gelu\""), DZ_ERR_UNSUPPORTED, "'hidden_act'");
    parse_bad("rope_scaling.json", SMALL_LLAMA(", \"rope_scaling\": {\"type\": \"linear\", \"factor\": 2.0}"),
              DZ_ERR_UNSUPPORTED, "'rope_scaling'");
    parse_bad("llama3_rope.json",
              SMALL_LLAMA(", \"rope_parameters\": {\"rope_type\": \"llama3\", \"rope_theta\": 500000.0}"),
              DZ_ERR_UNSUPPORTED, "rope_type");
    parse_bad("head_dim.json", SMALL_LLAMA(", \"head_dim\": 32"), DZ_ERR_UNSUPPORTED, "'head_dim'");
    parse_bad("attn_bias.json", SMALL_LLAMA(", \"attention_bias\": true"), DZ_ERR_UNSUPPORTED, "'attention_bias'");
    parse_bad("mlp_bias.json", SMALL_LLAMA(", \"mlp_bias\": true"), DZ_ERR_UNSUPPORTED, "'mlp_bias'");
    parse_bad("window.json",
              "{\"model_type\": \"mistral\", \"hidden_size\": 64, \"intermediate_size\": 128,"
              " \"max_position_embeddings\": 8192, \"num_attention_heads\": 4, \"num_hidden_layers\": 2,"
              " \"vocab_size\": 512, \"sliding_window\": 4096}",
              DZ_ERR_UNSUPPORTED, "'sliding_window'");
    parse_bad("gpt2.json", "{\"model_type\": \"gpt2\", \"n_embd\": 768}", DZ_ERR_UNSUPPORTED, "gpt2");
    /* Well-typed but inconsistent: dz_config_validate names the file too. */
    parse_bad("kv.json", SMALL_LLAMA(", \"num_key_value_heads\": 3"), DZ_ERR_INVALID, "n_kv_heads");
    parse_bad("ids.json", SMALL_LLAMA(", \"eos_token_id\": 512"), DZ_ERR_INVALID, "eos_id");
    parse_bad("zero.json", SMALL_LLAMA(", \"num_key_value_heads\": 0"), DZ_ERR_INVALID, "n_kv_heads");
    /* Sizes that would overflow the parameter table's arithmetic (positions + OPT's offset). */
    parse_bad("huge_pos.json",
              "{\"model_type\": \"opt\", \"ffn_dim\": 64, \"hidden_size\": 16,"
              " \"max_position_embeddings\": 2147483647, \"num_attention_heads\": 4, \"num_hidden_layers\": 2,"
              " \"vocab_size\": 100}",
              DZ_ERR_INVALID, "max_seq_len = 2147483647 exceeds the limit");
    parse_bad("huge_vocab.json", "{\"model_type\": \"llama\", \"hidden_size\": 64, \"intermediate_size\": 128,"
              " \"max_position_embeddings\": 256, \"num_attention_heads\": 4, \"num_hidden_layers\": 2,"
              " \"vocab_size\": 1000000000}", DZ_ERR_INVALID, "vocab_size");
    /* Whole numbers past int: out of range (issue 27.10), not "not an integer". */
    parse_bad("vocab_2p40.json", "{\"model_type\": \"llama\", \"hidden_size\": 64, \"intermediate_size\": 128,"
              " \"max_position_embeddings\": 256, \"num_attention_heads\": 4, \"num_hidden_layers\": 2,"
              " \"vocab_size\": 1099511627776}", DZ_ERR_FORMAT,
              "field 'vocab_size' is out of range: 1099511627776 is not in -2147483648..2147483647");
    parse_bad("head_dim_2p31.json", SMALL_LLAMA(", \"head_dim\": 2147483648"), DZ_ERR_FORMAT,
              "field 'head_dim' is out of range: 2147483648 is not in -2147483648..2147483647");
    parse_bad("frac_head_dim.json", SMALL_LLAMA(", \"head_dim\": 16.5"), DZ_ERR_FORMAT, "field 'head_dim' is not an integer");
}

/* Files that are not regular are refused at once (a FIFO would block, /dev/zero never end). */
static void special_files(void **state) {
    (void)state;
    dz_config cfg;
    dz_error err = {0};
    assert_int_equal(dz_config_from_hf_json("/dev/zero", &cfg, &err), DZ_ERR_IO);
    assert_non_null(strstr(err.msg, "/dev/zero: not a regular file (a device)"));
    char fifo[512], dir[512];
    snprintf(fifo, sizeof fifo, "%s/fifo.json", g_dir);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    assert_int_equal(dz_config_from_hf_json(fifo, &cfg, &err), DZ_ERR_IO);
    assert_non_null(strstr(err.msg, "not a regular file (a FIFO)"));
    snprintf(fifo, sizeof fifo, "%s/fifo.bin", g_dir);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    dz_model *m = NULL;
    assert_int_equal(dz_model_load(fifo, DZ_F32, &m, &err), DZ_ERR_IO);
    assert_non_null(strstr(err.msg, "fifo.bin: not a regular file (a FIFO)"));
    snprintf(dir, sizeof dir, "%s/config_dir.json", g_dir);
    assert_int_equal(mkdir(dir, 0755), 0);
    assert_int_equal(dz_config_from_hf_json(dir, &cfg, &err), DZ_ERR_IO);
    assert_non_null(strstr(err.msg, "not a regular file (a directory)"));
}

/* A checkpoint with an Inf or NaN weight is refused at load, naming the tensor. */
static void non_finite_weights(void **state) {
    (void)state;
    static const float bad[] = {NAN, INFINITY, -INFINITY};
    for (int k = 0; k < 3; k++)
        for (int dt = 0; dt < 2; dt++) {
            dz_config cfg = parse_ok("nf.json", SMALL_LLAMA(""));
            dz_model *m = NULL;
            dz_error err = {0};
            const dz_dtype dtype = dt ? DZ_BF16 : DZ_F32;
            if (dz_model_init_random(&cfg, dtype, 7, 0.02f, &m, &err) != DZ_OK) fail_msg("%s", err.msg);
            const dz_param_table *t = dz_model_params(m);
            const int id = t->count / 2;
            const int64_t at = dz_param_numel(&t->params[id]) - 1;
            if (dtype == DZ_F32) ((float *)dz_model_tensor(m, id))[at] = bad[k];
            else ((uint16_t *)dz_model_tensor(m, id))[at] = dz_f32_to_bf16(bad[k]);
            char dir[512], name[96];
            snprintf(dir, sizeof dir, "%s/nonfinite_%d_%d", g_dir, k, dt);
            snprintf(name, sizeof name, "%s", t->params[id].hf_name);
            if (dz_model_save_hf(m, dir, &err) != DZ_OK) fail_msg("%s", err.msg);
            dz_model_free(m);
            m = NULL;
            assert_int_equal(dz_model_load(dir, DZ_F32, &m, &err), DZ_ERR_FORMAT);
            assert_null(m);
            if (!strstr(err.msg, name) || !strstr(err.msg, "non-finite")) fail_msg("message: %s", err.msg);
        }
}

static void validate_rules(void **state) {
    (void)state;
    dz_config good = parse_ok("v.json", TINYLLAMA), c;
    dz_error err = {0};
    assert_int_equal(dz_config_validate(&good, "v.json", &err), DZ_OK);
    c = good;
    c.n_layers = DZ_MAX_LAYERS + 1;
    assert_int_equal(dz_config_validate(&c, "v.json", &err), DZ_ERR_INVALID);
    assert_non_null(strstr(err.msg, "n_layers"));
    assert_non_null(strstr(err.msg, "v.json"));
    c = good;
    c.dim = 2050; /* not divisible by 32 heads */
    assert_int_equal(dz_config_validate(&c, "v.json", &err), DZ_ERR_INVALID);
    c = good;
    c.vocab_size = 0;
    assert_int_equal(dz_config_validate(&c, "v.json", &err), DZ_ERR_INVALID);
    c = good;
    c.bos_id = -2;
    assert_int_equal(dz_config_validate(&c, "v.json", &err), DZ_ERR_INVALID);
    c = good;
    c.pad_id = -1;
    assert_int_equal(dz_config_validate(&c, "v.json", &err), DZ_OK);
    assert_string_equal(dz_arch_name(DZ_ARCH_OPT), "opt");
    assert_string_equal(dz_arch_name(DZ_ARCH_LLAMA), "llama");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(opt_125m),   cmocka_unit_test(opt_350m_post_ln), cmocka_unit_test(llama_gqa_tied),
        cmocka_unit_test(qwen2),      cmocka_unit_test(mistral),          cmocka_unit_test(round_trip),
        cmocka_unit_test(malformed),  cmocka_unit_test(validate_rules),
        cmocka_unit_test(special_files), cmocka_unit_test(non_finite_weights),
    };
    return cmocka_run_group_tests(tests, dz_temp_dir_setup, dz_temp_dir_teardown);
}
