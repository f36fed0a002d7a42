/* The process group a run spans (MPI under mpirun, one process otherwise): what a
 * program needs to start one, hand it to dz_train (dz_train_layout.comm) and report on
 * it. The collectives the run itself uses are internal (src/parallel/comm.h). */
#ifndef DISTZO_PARALLEL_H
#define DISTZO_PARALLEL_H

#include <stddef.h>
#include <stdint.h>

#include "distzo/error.h"

#ifdef __cplusplus
extern "C" {
#endif

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
int dz_comm_n_nodes(const dz_comm *c);
int dz_comm_machine_ranks(const dz_comm *c); /* ranks on this machine (real shared memory) */
int dz_comm_machine_rank(const dz_comm *c);  /* this rank's place among them, 0..machine_ranks-1 */
const char *dz_comm_backend(const dz_comm *c); /* "mpi (Open MPI 4.1.4)" or "single process" */

/* A rank that stops answering (stopped, deadlocked, its machine lost) must not hang the
 * job: every collective waits at most `seconds` (0: forever; default 300), then
 * asks every rank for a sign of life and fails naming those that gave none, so the caller
 * can end the job (dz_comm_abort). Ranks waiting in a collective answer such questions. */
enum { DZ_COMM_DEFAULT_TIMEOUT_S = 300 };
void dz_comm_set_timeout(dz_comm *c, double seconds);

/* Element-wise sum over all ranks, in place. */
dz_status dz_comm_sum_u64(dz_comm *c, uint64_t *buf, size_t n, dz_error *err);

/* The GPU a rank owns (--gpus-per-node G): its machine-local rank mod G. GPUs belong to a
 * machine, so the rank is counted among the ranks of the machine (dz_comm_machine_rank),
 * not of a simulated node (--node-size). More ranks on the machine than G are refused
 * unless `share` (--share-gpus: ranks then take GPUs round robin, several per GPU). */
dz_status dz_gpu_for_rank(int machine_rank, int machine_ranks, int gpus_per_node, int share, int *device,
                          dz_error *err);

/* Bytes this rank has sent through the process group (payload, not protocol). */
uint64_t dz_comm_bytes_sent(const dz_comm *c);

#ifdef __cplusplus
}
#endif

#endif
