/* Every rank must train the same run: at start each rank fingerprints what affects the
 * weights (each setting, the model's tensor table, the data) and the job is refused,
 * on every rank, naming the first item on which some rank differs from the others. */
#ifndef DZ_PARALLEL_AGREE_H
#define DZ_PARALLEL_AGREE_H

#include <stdint.h>

#include "distzo/error.h"
#include "parallel/comm.h"

typedef struct dz_agree_item {
    const char *what;   /* e.g. "--lr", "the model's tensor table", "the training data" */
    uint64_t hash;      /* its fingerprint on this rank (core/hash.h) */
} dz_agree_item;

/* Collective over all ranks (a no-op in one process): DZ_ERR_INVALID naming items[i].what
 * for the first i whose fingerprint is not the same on every rank. */
dz_status dz_comm_agree(dz_comm *c, const dz_agree_item *items, int n, dz_error *err);

/* Collective (a no-op in one process): root's outcome st, with its message, on every rank,
 * for work that root alone did (reading or writing the run folder). A rank whose own st
 * failed keeps its own. Every rank then reports root's error itself: a failing job ends
 * by MPI_Abort from whichever rank gets there first, and root may be killed before it
 * prints. */
dz_status dz_comm_share_outcome(dz_comm *c, dz_status st, int root, dz_error *err);

#endif
