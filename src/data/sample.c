/* MeZO-style subsampling: n examples without replacement, reproducible from a seed. */
#include "data/internal.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"

int dz_split_counts(int available, int want_train, int want_dev, int *n_train, int *n_dev) {
    const int64_t want = (int64_t)want_train + want_dev;
    if (available >= want) {
        *n_train = want_train, *n_dev = want_dev;
        return 0;
    }
    int dev = want > 0 ? (int)((int64_t)available * want_dev / want) : 0;
    if (dev == 0 && want_dev > 0 && available >= 2) dev = 1;
    *n_dev = dev, *n_train = available - dev;
    return 1;
}

dz_status dz_dataset_sample(const dz_dataset *src, int n, uint64_t seed, dz_dataset *out,
                            dz_error *err) {
    memset(out, 0, sizeof *out);
    const char *path = src->path ? src->path : "(dataset)";
    if (n <= 0) return dz_fail(err, DZ_ERR_INVALID, "%s: sample size must be positive, got %d", path, n);
    if (n > src->count) n = src->count;
    int *order = malloc((size_t)(src->count ? src->count : 1) * sizeof *order);
    if (!order) return dz_fail(err, DZ_ERR_NOMEM, "%s: out of memory", path);
    for (int i = 0; i < src->count; i++) order[i] = i;
    /* Partial Fisher-Yates: after step i, order[0..i] is a uniform draw without replacement. */
    uint64_t state = seed;
    for (int i = 0; i < n; i++) {
        int j = i + (int)dz_uniform_below(&state, (uint64_t)(src->count - i));
        int t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    int cap = 0;
    dz_status st = dz_dataset_init(out, path, err);
    for (int i = 0; i < n && st == DZ_OK; i++) {
        st = dz_dataset_append(out, &cap, &src->items[order[i]], err);
    }
    free(order);
    if (st != DZ_OK) dz_dataset_free(out);
    return st;
}
