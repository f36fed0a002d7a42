/* Parallel layouts (DistZO2): which forwards and which examples a rank computes.
 *
 * N ranks = P x D. Perturbation parallelism P (1 or 2): rank r computes the +eps forward
 * when r % P == 0 and the -eps one when r % P == 1 (P = 1: both). Data parallelism D:
 * rank r belongs to group r / P, which takes a contiguous share of the global batch.
 * Adjacent ranks form a pair, so a pair usually sits on one node. Nothing else depends on
 * the layout: the global batch, the seeds and the order in which per-example losses are
 * combined are the same for every N, P and D. */
#ifndef DZ_PARALLEL_LAYOUT_H
#define DZ_PARALLEL_LAYOUT_H

#include "distzo/error.h"

typedef struct dz_layout {
    int n, p, d;     /* ranks, perturbation parallelism, data parallelism */
    int rank;
    int pair_index;  /* rank % p: 0 computes +eps, 1 -eps */
    int group;       /* rank / p: data-parallel group 0..d-1 */
    int signs;       /* bit 0: +eps forwards, bit 1: -eps forwards */
} dz_layout;

/* pertp / dp: 0 = derive (default: every rank data-parallel). Refuses, naming the flags,
 * layouts whose product is not n. */
dz_status dz_layout_make(int n, int rank, int pertp, int dp, dz_layout *out, dz_error *err);
/* Part k of `parts` contiguous shares of n items: [*lo, *hi), sizes differing by at most 1. */
void dz_layout_share(int n, int parts, int k, int *lo, int *hi);

#endif
