#include "cli/common.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>


int dz_cli_fail(const dz_error *err) {
    fprintf(stderr, "distzo: error: %s\n", err->msg[0] ? err->msg : dz_status_name(err->code));
    return 1;
}

int dz_cli_failf(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("distzo: error: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 1;
}

int dz_cli_runtime(int threads) {
    dz_error err = {0};
    if (threads < 0 || threads > DZ_CLI_MAX_THREADS) /* 0: the default; thousands of threads only thrash */
        return dz_cli_failf("option --threads: %d is outside 0..%d (0: the default)", threads, DZ_CLI_MAX_THREADS);
    return dz_runtime_init(threads, &err) == DZ_OK ? 0 : dz_cli_fail(&err);
}

int dz_cli_blas_reference(void) {
    dz_error err = {0};
    return dz_bench_reference_load(&err) == DZ_OK ? 0 : dz_cli_fail(&err);
}

const char *dz_cli_assets(char *buf, size_t cap) {
    const char *env = getenv("DISTZO_ASSETS");
    if (env && *env) {
        snprintf(buf, cap, "%s", env);
        return buf;
    }
    /* ../shared/assets from the working directory (the repository root), else beside the
     * repository that holds this binary (build/distzo -> ../../shared/assets) */
    snprintf(buf, cap, "../shared/assets");
    if (dz_is_dir(buf)) return buf;
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = '\0';
            char cand[4200];
            snprintf(cand, sizeof cand, "%s/../../shared/assets", exe);
            if (dz_is_dir(cand) && strlen(cand) < cap) memcpy(buf, cand, strlen(cand) + 1);
        }
    }
    return buf;
}

const char *dz_cli_asset(const char *rel, char *buf, size_t cap) {
    char dir[4096];
    snprintf(buf, cap, "%s/%s", dz_cli_assets(dir, sizeof dir), rel);
    return buf;
}

int dz_cli_load(const char *model_path, const char *dtype, const char *tokenizer_path, int need_tokenizer,
                dz_model **m, dz_tokenizer **tok) {
    dz_error err = {0};
    dz_dtype dt = DZ_F32;
    if (dtype && dz_dtype_parse(dtype, &dt) != 0)
        return dz_cli_failf("option --dtype: '%s' is not one of f32, bf16, f16", dtype);
    if (dz_model_load(model_path, dt, m, &err) != DZ_OK) return dz_cli_fail(&err);
    if (!tok) return 0;
    *tok = NULL;
    const char *tp = tokenizer_path ? tokenizer_path : dz_model_tokenizer_path(*m);
    if (!tp) {
        if (!need_tokenizer) return 0;
        dz_model_free(*m);
        *m = NULL;
        return dz_cli_failf("%s: no tokenizer found beside the model; pass --tokenizer PATH", model_path);
    }
    if (dz_tokenizer_load(tp, dz_model_config(*m)->vocab_size, tok, &err) != DZ_OK) {
        dz_model_free(*m);
        *m = NULL;
        return dz_cli_fail(&err);
    }
    const int tv = dz_tokenizer_vocab_size(*tok), mv = dz_model_config(*m)->vocab_size;
    if (tv > mv) {
        dz_tokenizer_free(*tok);
        dz_model_free(*m);
        *m = NULL;
        *tok = NULL;
        return dz_cli_failf("%s: tokenizer has %d tokens but the model's vocabulary is %d", tp, tv, mv);
    }
    return 0;
}

size_t dz_cli_peak_rss(void) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return 0;
    char line[256];
    size_t kb = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmHWM: %zu kB", &kb) == 1) break;
    fclose(f);
    return kb * 1024;
}

void dz_cli_json_string(FILE *out, const char *s) {
    fputc('"', out);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') fprintf(out, "\\%c", *p);
        else if (*p == '\n') fputs("\\n", out);
        else if (*p == '\t') fputs("\\t", out);
        else if (*p == '\r') fputs("\\r", out);
        else if (*p < 0x20) fprintf(out, "\\u%04x", *p);
        else fputc(*p, out);
    }
    fputc('"', out);
}
