/* sgemm GFLOP/s through distzo's OpenBLAS loader, for the Linear layout y = x w^T.
 *
 *   bench_sgemm [--seconds S] [--threads T,...] [M N K]...
 *
 * Defaults: 2048^3 and the OPT-125m forward shapes at M=2048 tokens
 * (N x K = 768x768, 3072x768, 768x3072, 50272x768), with 1 and 2 threads.
 * Compare cores by running it under OPENBLAS_CORETYPE=Prescott (etc.). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/blas.h"

#define MAX_SHAPES 32
#define MAX_THREADS 8

static int parse_list(const char *s, int *out, int cap) {
    int n = 0;
    while (*s && n < cap) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s || v <= 0) return -1;
        out[n++] = (int)v;
        s = *end == ',' ? end + 1 : end;
        if (*end && *end != ',') return -1;
    }
    return n;
}

int main(int argc, char **argv) {
    static const int defaults[][3] = {
        {2048, 2048, 2048}, {2048, 768, 768}, {2048, 3072, 768}, {2048, 768, 3072}, {2048, 50272, 768},
    };
    int shapes[MAX_SHAPES][3], n_shapes = 0;
    int threads[MAX_THREADS] = {1, 2}, n_threads = 2;
    double seconds = 1.0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--seconds") && i + 1 < argc) {
            seconds = atof(argv[++i]);
        } else if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
            n_threads = parse_list(argv[++i], threads, MAX_THREADS);
            if (n_threads <= 0) { fprintf(stderr, "bad --threads list: %s\n", argv[i]); return 2; }
        } else if (i + 2 < argc && n_shapes < MAX_SHAPES) {
            for (int d = 0; d < 3; d++) shapes[n_shapes][d] = atoi(argv[i + d]);
            if (shapes[n_shapes][0] <= 0 || shapes[n_shapes][1] <= 0 || shapes[n_shapes][2] <= 0) {
                fprintf(stderr, "bad shape: %s %s %s\n", argv[i], argv[i + 1], argv[i + 2]);
                return 2;
            }
            n_shapes++;
            i += 2;
        } else {
            fprintf(stderr, "usage: %s [--seconds S] [--threads T,...] [M N K]...\n", argv[0]);
            return 2;
        }
    }
    if (n_shapes == 0) {
        n_shapes = (int)(sizeof defaults / sizeof defaults[0]);
        memcpy(shapes, defaults, sizeof defaults);
    }

    dz_error err;
    if (dz_blas_init(&err) != DZ_OK) {
        fprintf(stderr, "bench_sgemm: %s\n", err.msg);
        return 1;
    }
    printf("core: %s\n%s\nconfig: %s\n", dz_blas_core_name(), dz_blas_selection(), dz_blas_config());
    printf("%6s %6s %6s %8s %10s\n", "M", "N", "K", "threads", "GFLOP/s");
    for (int s = 0; s < n_shapes; s++)
        for (int t = 0; t < n_threads; t++) {
            dz_blas_set_threads(threads[t]);
            double gf = dz_blas_sgemm_gflops(shapes[s][0], shapes[s][1], shapes[s][2], seconds);
            printf("%6d %6d %6d %8d %10.1f\n", shapes[s][0], shapes[s][1], shapes[s][2], threads[t], gf);
            fflush(stdout);
        }
    return 0;
}
