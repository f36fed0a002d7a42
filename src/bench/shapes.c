#include "bench/shapes.h"

#include "distzo/bench.h"

/* The layers' GEMMs on M token rows: q, k and v, the output projection, the MLP. */
static int layer_shapes(const dz_config *c, int M, dz_gemm_shape *s) {
    const int d = c->dim, f = c->hidden_dim, L = c->n_layers;
    const int qd = c->n_heads * c->head_dim, kvd = c->n_kv_heads * c->head_dim;
    int n = 0;
    s[n++] = (dz_gemm_shape){M, qd, d, L};
    s[n++] = (dz_gemm_shape){M, kvd, d, 2.0 * L};
    s[n++] = (dz_gemm_shape){M, d, qd, L};
    s[n++] = (dz_gemm_shape){M, f, d, (c->arch == DZ_ARCH_OPT ? 1.0 : 2.0) * L};
    s[n++] = (dz_gemm_shape){M, d, f, L};
    return n;
}

int dz_bench_model_shapes(const dz_config *c, int B, int T, dz_gemm_shape *s) {
    const int N = B * T, head_rows = N < 512 ? N : 512;
    int n = layer_shapes(c, N, s);
    s[n++] = (dz_gemm_shape){head_rows, 4096, c->embed_dim, (double)N / head_rows * c->vocab_size / 4096.0};
    return n;
}

int dz_bench_batch_shapes(const dz_config *c, int M, int H, dz_gemm_shape *s) {
    int n = layer_shapes(c, M, s);
    s[n++] = (dz_gemm_shape){H, c->vocab_size, c->embed_dim, 1.0};
    return n;
}

void dz_bench_measure_shapes(const dz_gemm_shape *shapes, int n, double best[2][DZ_BENCH_MAX_SHAPES]) {
    for (int i = 0; i < n; i++)
        for (int impl = DZ_BENCH_GEMM_OPENBLAS; impl <= DZ_BENCH_GEMM_DISTZO; impl++) {
            const double gf = dz_bench_gemm_gflops((dz_bench_gemm)impl, shapes[i].M, shapes[i].N, shapes[i].K, 0.3);
            if (gf > best[impl][i]) best[impl][i] = gf;
        }
}

double dz_bench_shapes_gflops(const dz_gemm_shape *shapes, int n, const double *gf) {
    double flops = 0.0, secs = 0.0;
    for (int i = 0; i < n; i++) {
        const double fl = 2.0 * shapes[i].M * shapes[i].N * shapes[i].K * shapes[i].count;
        flops += fl, secs += fl / (gf[i] * 1e9);
    }
    return flops / secs / 1e9;
}
