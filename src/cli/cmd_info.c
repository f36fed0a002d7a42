/* distzo info MODEL: architecture, shapes, parameter count, bytes per dtype, GEMM kernel. */
#include <stdio.h>

#include "cli/common.h"

static const dz_cmd_spec info_cmd = {
    .name = "info", .usage = "MODEL [options]", .min_positional = 1, .max_positional = 1,
    .summary = "Describes MODEL (a Hugging Face folder, a .gguf file or a llama2.c .bin)."};

int dz_cmd_info(int argc, char **argv) {
    const char *dtype = "f32";
    int json = 0;
    const dz_opt opts[] = {
        dz_cli_dtype_option(&dtype, NULL),
        {"json", DZ_OPT_FLAG, &json, "print JSON"},
        {0},
    };
    const char *pos[1];
    int rc = dz_cli_parse(&info_cmd, opts, argc, argv, pos);
    if (rc >= 0) return rc;
    dz_model *m;
    if ((rc = dz_cli_start(&(dz_cli_preamble){.model = pos[0], .dtype = dtype}, &m, NULL))) return rc;
    const dz_config *c = dz_model_config(m);
    const dz_param_table *t = dz_model_params(m);
    const long long n = (long long)dz_param_table_numel(t);
    char cpu_desc[256];
    dz_runtime_cpu(cpu_desc, sizeof cpu_desc);
    const char *tok = dz_model_tokenizer_path(m);
    if (json) {
        printf("{\"path\": ");
        dz_cli_json_string(stdout, dz_model_path(m));
        printf(", \"format\": \"%s\", \"arch\": \"%s\", \"vocab_size\": %d, \"dim\": %d, \"hidden_dim\": %d, "
               "\"n_layers\": %d, \"n_heads\": %d, \"n_kv_heads\": %d, \"head_dim\": %d, \"max_seq_len\": %d, "
               "\"embed_dim\": %d, \"pre_norm\": %s, \"tied_head\": %s, \"params\": %lld, \"tensors\": %d, "
               "\"bytes_f32\": %lld, \"bytes_bf16\": %lld, \"dtype\": \"%s\", \"bytes_mapped\": %zu, "
               "\"bytes_owned\": %zu, \"tokenizer\": ",
               dz_model_format(m), dz_arch_name(c->arch), c->vocab_size, c->dim, c->hidden_dim, c->n_layers,
               c->n_heads, c->n_kv_heads, c->head_dim, c->max_seq_len, c->embed_dim, c->pre_norm ? "true" : "false",
               c->tied_head ? "true" : "false", n, t->count, 4 * n, 2 * n, dz_dtype_name(dz_model_dtype(m)),
               dz_model_bytes_mapped(m), dz_model_bytes_owned(m));
        if (tok) dz_cli_json_string(stdout, tok);
        else printf("null");
        printf(", \"isa\": \"%s\", \"gemm\": ", dz_runtime_kernels());
        dz_cli_json_string(stdout, dz_runtime_gemm());
        printf(", \"cpu\": ");
        dz_cli_json_string(stdout, cpu_desc);
        printf("}\n");
    } else {
        printf("model        %s (%s)\n", dz_model_path(m), dz_model_format(m));
        printf("architecture %s%s\n", dz_arch_name(c->arch),
               c->arch == DZ_ARCH_OPT ? (c->pre_norm ? ", pre-LayerNorm" : ", post-LayerNorm") : "");
        printf("layers       %d x (dim %d, ffn %d, heads %d, kv heads %d, head dim %d)\n", c->n_layers, c->dim,
               c->hidden_dim, c->n_heads, c->n_kv_heads, c->head_dim);
        printf("vocabulary   %d, %s head%s\n", c->vocab_size, c->tied_head ? "tied" : "untied",
               c->embed_dim != c->dim ? ", embeddings projected in/out" : "");
        printf("positions    %d (%s)\n", c->max_seq_len,
               c->arch == DZ_ARCH_OPT ? "learned, offset 2" : "rotary");
        printf("parameters   %lld in %d tensors\n", n, t->count);
        printf("bytes        %.1f MB as f32, %.1f MB as bf16; held as %s: %.1f MB mapped, %.1f MB copied\n",
               4e-6 * n, 2e-6 * n, dz_dtype_name(dz_model_dtype(m)), 1e-6 * dz_model_bytes_mapped(m),
               1e-6 * dz_model_bytes_owned(m));
        printf("tokenizer    %s\n", tok ? tok : "(none found)");
        printf("gemm         %s\n", dz_runtime_gemm());
        printf("kernels      %s (best on this CPU: %s; DISTZO_ISA=baseline|avx2|avx512 forces one, same bits)\n",
               dz_runtime_kernels(), dz_runtime_best_kernels());
        printf("cpu          %s\n", cpu_desc);
    }
    dz_model_free(m);
    return 0;
}
