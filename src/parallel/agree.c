/* The ranks' agreement on what affects the weights (agree.h): one min/max per fingerprint. */
#include "parallel/agree.h"

dz_status dz_comm_agree(dz_comm *c, const dz_agree_item *items, int n, dz_error *err) {
    if (dz_comm_size(c) <= 1) return DZ_OK;
    for (int i = 0; i < n; i++) { /* one min/max per item: every rank learns the same first difference */
        uint64_t lo = 0, hi = 0;
        dz_status st = dz_comm_minmax_u64(c, items[i].hash, &lo, &hi, err);
        if (st != DZ_OK) return st;
        if (lo != hi)
            return dz_fail(err, DZ_ERR_INVALID,
                           "the ranks disagree on %s (rank %d's differs from another's): every rank must run the same "
                           "settings, model and data", items[i].what, dz_comm_rank(c));
    }
    return DZ_OK;
}
