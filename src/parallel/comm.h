/* The process group a run spans: MPI when the process was started by mpirun (or a
 * compatible launcher), one process otherwise. Everything parallel in distzo goes through
 * these few calls, so the engine never sees MPI and a build without MPI still runs.
 *
 * Nodes: ranks that share memory (MPI_COMM_TYPE_SHARED) form a node; node_size > 0 splits
 * them further into simulated nodes of that many ranks, so tests on one machine exercise
 * the cross-node paths.
 *
 * Determinism: the only reduction of floating-point data is dz_comm_sum_f64, used where
 * each element has exactly one non-zero contributor (x + 0 + ... + 0 == x in any order),
 * so its result does not depend on the number of ranks or the reduction tree. Integer
 * sums are exact anyway. */
#ifndef DZ_PARALLEL_COMM_H
#define DZ_PARALLEL_COMM_H

#include <stddef.h>
#include <stdint.h>

#include "distzo/error.h"
#include "distzo/parallel.h" /* dz_comm, init/finalize, rank/size, dz_comm_sum_u64, bytes sent */

int dz_comm_node(const dz_comm *c);        /* index of this rank's node, 0..n_nodes-1 */
int dz_comm_node_rank(const dz_comm *c);   /* rank within the node */
int dz_comm_node_size(const dz_comm *c);
int dz_comm_is_mpi(const dz_comm *c);

/* Element-wise sums over all ranks, in place. */
dz_status dz_comm_sum_f64(dz_comm *c, double *buf, size_t n, dz_error *err);
/* The same over this rank's node only. */
dz_status dz_comm_node_sum_u64(dz_comm *c, uint64_t *buf, size_t n, dz_error *err);
/* Minimum and maximum of v over all ranks. */
dz_status dz_comm_minmax_u64(dz_comm *c, uint64_t v, uint64_t *min, uint64_t *max, dz_error *err);
dz_status dz_comm_bcast(dz_comm *c, void *buf, size_t bytes, int root, dz_error *err);
/* bytes from the node's rank 0 to every rank of its node (the node's NCCL id). */
dz_status dz_comm_node_bcast(dz_comm *c, void *buf, size_t bytes, dz_error *err);
dz_status dz_comm_barrier(dz_comm *c, dz_error *err);
dz_status dz_comm_node_barrier(dz_comm *c, dz_error *err);

/* bytes of memory shared by the ranks of this node (an MPI-3 shared window; plain memory
 * for one process), 64-byte aligned (contents undefined until written), the same memory on every
 * rank of the node. Collective over the node; freed by dz_comm_finalize. */
dz_status dz_comm_node_alloc(dz_comm *c, size_t bytes, void **base, dz_error *err);

#endif
