/* The ranks' agreement on what affects the weights (agree.h): one min/max per fingerprint. */
#include "parallel/agree.h"

#include <string.h>

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

dz_status dz_comm_share_outcome(dz_comm *c, dz_status st, int root, dz_error *err) {
    if (!c || dz_comm_size(c) <= 1) return st;
    struct {
        int32_t code;
        char msg[sizeof err->msg];
    } outcome = {.code = (int32_t)st};
    const int is_root = dz_comm_rank(c) == root;
    if (is_root && st != DZ_OK && err) memcpy(outcome.msg, err->msg, sizeof outcome.msg);
    dz_error bcast_err = {0}; /* a failed root's own message stays in err */
    dz_status bst = dz_comm_bcast(c, &outcome, sizeof outcome, root, st == DZ_OK ? err : &bcast_err);
    if (st != DZ_OK || bst != DZ_OK) return st != DZ_OK ? st : bst;
    if (outcome.code == DZ_OK) return DZ_OK;
    outcome.msg[sizeof outcome.msg - 1] = 0;
    return dz_fail(err, (dz_status)outcome.code, "%s", outcome.msg[0] ? outcome.msg : "rank 0 failed (its error is above)");
}
