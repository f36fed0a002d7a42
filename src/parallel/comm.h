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

typedef struct dz_comm dz_comm;

/* Starts MPI if the environment says a launcher started this process (DZ_COMM_FORCE_MPI
 * in flags: always, where MPI is built in), else a one-process group. argc/argv may be
 * NULL. node_size: 0 for real nodes, else ranks per simulated node. */
enum { DZ_COMM_FORCE_MPI = 1 };
dz_status dz_comm_init(int *argc, char ***argv, int node_size, unsigned flags, dz_comm **out, dz_error *err);
/* Ends MPI (if it was started). NULL is fine. */
void dz_comm_finalize(dz_comm *c);
/* Ends the whole job at once (MPI_Abort), for a rank that cannot go on while others may
 * wait on it; a one-process group just returns. */
void dz_comm_abort(dz_comm *c, int code);

int dz_comm_rank(const dz_comm *c);
int dz_comm_size(const dz_comm *c);
int dz_comm_node(const dz_comm *c);        /* index of this rank's node, 0..n_nodes-1 */
int dz_comm_n_nodes(const dz_comm *c);
int dz_comm_node_rank(const dz_comm *c);   /* rank within the node */
int dz_comm_node_size(const dz_comm *c);
int dz_comm_is_mpi(const dz_comm *c);
int dz_comm_machine_ranks(const dz_comm *c); /* ranks on this machine (real shared memory) */
const char *dz_comm_backend(const dz_comm *c); /* "mpi (Open MPI 4.1.4)" or "single process" */

/* A rank that stops answering (stopped, deadlocked, its machine lost) must not hang the
 * job: every collective below waits at most `seconds` (0: forever; default 300), then
 * asks every rank for a sign of life and fails naming those that gave none, so the caller
 * can end the job (dz_comm_abort). Ranks waiting in a collective answer such questions. */
enum { DZ_COMM_DEFAULT_TIMEOUT_S = 300 };
void dz_comm_set_timeout(dz_comm *c, double seconds);

/* Element-wise sums over all ranks, in place. */
dz_status dz_comm_sum_f64(dz_comm *c, double *buf, size_t n, dz_error *err);
dz_status dz_comm_sum_u64(dz_comm *c, uint64_t *buf, size_t n, dz_error *err);
/* The same over this rank's node only. */
dz_status dz_comm_node_sum_u64(dz_comm *c, uint64_t *buf, size_t n, dz_error *err);
/* Minimum and maximum of v over all ranks. */
dz_status dz_comm_minmax_u64(dz_comm *c, uint64_t v, uint64_t *min, uint64_t *max, dz_error *err);
dz_status dz_comm_bcast(dz_comm *c, void *buf, size_t bytes, int root, dz_error *err);
dz_status dz_comm_barrier(dz_comm *c, dz_error *err);
dz_status dz_comm_node_barrier(dz_comm *c, dz_error *err);

/* bytes of memory shared by the ranks of this node (an MPI-3 shared window; plain memory
 * for one process), 64-byte aligned (contents undefined until written), the same memory on every
 * rank of the node. Collective over the node; freed by dz_comm_finalize. */
dz_status dz_comm_node_alloc(dz_comm *c, size_t bytes, void **base, dz_error *err);

/* Bytes this rank has sent through the calls above (payload, not protocol). */
uint64_t dz_comm_bytes_sent(const dz_comm *c);

#endif
