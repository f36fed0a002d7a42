/* ZO_RNG v1 and v2 side by side in one run (docs/ZO_RNG.md section 10): ns per element of
 * the z fill and of the step's fused pass (update, then w+ and w-: two z per element), over
 * N f32 parameters on the CPU backend's ops, at each thread count asked for. Built on
 * distzo/bench.h's dz_bench_zo_passes_run (the passes `distzo bench step` reports), best of
 * REPS rounds; Gaussian z, or Rademacher with DISTZO_BENCH_Z=rademacher.
 * usage: bench_zo_rng [MILLIONS [REPS [THREADS...]]]   e.g. bench_zo_rng 16 5 1 2 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "distzo/distzo.h"

int main(int argc, char **argv) {
    const double millions = argc > 1 ? atof(argv[1]) : 16;
    const int reps = argc > 2 ? atoi(argv[2]) : 5;
    const size_t n = (size_t)(millions * 1e6), block = 1u << 21; /* a layer block's working copy */
    if (n < 1 || reps < 1) return fprintf(stderr, "usage: %s [MILLIONS [REPS [THREADS...]]]\n", argv[0]), 2;
    const char *zdist = getenv("DISTZO_BENCH_Z");
    const int rademacher = zdist && !strcmp(zdist, "rademacher");
    dz_error err = {0};
    printf("%s z\n| threads | z fill v1 (ns/z) | z fill v2 (ns/z) | v1/v2 | fused pass v1 (ns/element) | fused pass v2 "
           "(ns/element) | v1/v2 |\n|---|---|---|---|---|---|---|\n",
           rademacher ? "Rademacher" : "Gaussian");
    for (int a = 3; a < (argc > 3 ? argc : 4); a++) {
        const int threads = argc > 3 ? atoi(argv[a]) : 1;
        if (dz_runtime_init(threads, &err) != DZ_OK) return fprintf(stderr, "%s\n", err.msg), 1;
        dz_bench_zo_passes p;
        if (dz_bench_zo_passes_run(n, block, reps, rademacher, &p, &err) != DZ_OK) return fprintf(stderr, "%s\n", err.msg), 1;
        const double z1 = p.zgen_s / (2.0 * n) * 1e9, z2 = p.zgen_v2_s / (2.0 * n) * 1e9;
        const double f1 = p.fused_s / n * 1e9, f2 = p.fused_v2_s / n * 1e9;
        printf("| %d | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f |\n", dz_runtime_threads(), z1, z2, z1 / z2, f1, f2,
               f1 / f2);
    }
    return 0;
}
