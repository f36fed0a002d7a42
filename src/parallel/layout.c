/* Parallel layouts: see layout.h. */
#include "parallel/layout.h"

dz_status dz_layout_make(int n, int rank, int pertp, int dp, dz_layout *out, dz_error *err) {
    if (pertp < 0 || pertp > 2)
        return dz_fail(err, DZ_ERR_INVALID, "--pertp %d: perturbation parallelism is 1 or 2 (the +eps and -eps forwards)",
                       pertp);
    if (dp < 0) return dz_fail(err, DZ_ERR_INVALID, "--dp %d: expected a positive count", dp);
    int p = pertp, d = dp;
    if (p == 0) p = d > 0 && n % d == 0 && n / d <= 2 ? n / d : 1;
    if (d == 0) d = n % p == 0 ? n / p : 0;
    if (p * d != n && d == 0) /* --dp left to follow: the ranks do not divide by --pertp */
        return dz_fail(err, DZ_ERR_INVALID, "--pertp %d does not divide the %d rank%s (run under mpirun -np a multiple of "
                       "%d)", p, n, n == 1 ? "" : "s", p);
    if (p * d != n)
        return dz_fail(err, DZ_ERR_INVALID, "--pertp %d x --dp %d must equal the number of ranks (%d)", p, d, n);
    *out = (dz_layout){.n = n, .p = p, .d = d, .rank = rank, .pair_index = rank % p, .group = rank / p};
    out->signs = p == 1 ? 3 : 1 << out->pair_index;
    return DZ_OK;
}

void dz_layout_share(int n, int parts, int k, int *lo, int *hi) {
    *lo = (int)((long long)n * k / parts);
    *hi = (int)((long long)n * (k + 1) / parts);
}
