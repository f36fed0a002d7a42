/* The layout planner (distzo plan): for a model shape and a cluster (K nodes x R ranks,
 * a memory budget per node), every DistZO2 layout N = P x D with its memory per rank and
 * per node, bytes exchanged and work per rank per step, and the fastest one that fits.
 *
 * Placement: the master weights live once per node in shared memory when a node runs
 * several ranks with --store ram (else once per rank; with a disk store only the global
 * block stays resident, plus the store's buffers); working copies, activations and the
 * process itself are per rank. Sizes come from the runtime's own functions
 * (dz_forward_bytes_for, dz_param_table_bytes, dz_zo_engine_bytes_for and
 * dz_zo_store_bytes_for), so the plan changes when the code does. docs/PLANNER.md has the formulas and the measured check. */
#ifndef DISTZO_PLAN_H
#define DISTZO_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "distzo/model.h"
#include "distzo/zo.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Fixed memory of one distzo train process beyond what the model shape implies: the
 * binary and its libraries, the GEMM's packing buffers (3.2 MB a thread), the GPT-2
 * tokenizer, an SST-2-sized training pool (67k sentences, ~6 MB), the run folder's
 * writers; under mpirun also Open MPI's libraries and shared-memory transport. Measured
 * on small runs (tests/cli/plan.sh: peak RSS minus the modelled parts, about 14 MB alone
 * and 18-21 MB per rank under mpirun since OpenBLAS is no longer loaded by train;
 * docs/PLANNER.md), rounded up. */
#define DZ_PLAN_OVERHEAD_MB 16.0
#define DZ_PLAN_OVERHEAD_MPI_MB 23.0

typedef struct dz_plan_request {
    dz_config cfg;
    int nodes, ranks_per_node;
    double mem_per_node;   /* bytes */
    int disk_store;        /* --store disk: layer masters in a file (one process only, today) */
    dz_dtype master;       /* F32 or BF16 */
    int batch;             /* global batch (examples per step) */
    int seq;               /* longest tokenized example (prompt + label word) */
    int labels;            /* candidates per example */
    int q;                 /* SPSA samples per step */
    dz_zo_estimator estimator; /* its state counts in the engine (LOZO: two windows' V, lozo_rank wide) */
    int lozo_rank;
    int hizoo_rank;        /* hizoo: 1, HiZOO-L's factored curvature */
    int eval_batch;        /* sequences per evaluation forward (the trainer's default) */
    int share_prompts;     /* candidates continue their prompt: 4 activation streams, else 2 */
    int threads;           /* threads per rank (attention scratch); <= 0: this machine's */
    double overhead, overhead_mpi; /* fixed bytes per process: alone, under mpirun */
} dz_plan_request;

typedef struct dz_plan_layout {
    int n, p, d;           /* ranks = P x D */
    int local_batch;       /* the largest data-parallel share of the batch */
    int signs;             /* forwards per rank per sample: 2 (P = 1) or 1 (P = 2) */
    int shared_masters;    /* masters once per node in shared memory */
    /* bytes, per rank */
    double overhead, masters, forward, engine, store_bufs, load_extra;
    double node_work;      /* working copies shared by the node's ranks (0 unless shared masters) */
    double rank_peak;      /* as peak RSS counts it (shared masters count in each rank) */
    double node_peak;      /* shared masters counted once */
    /* per step */
    double payload_per_rank, wire_per_rank, wire_total; /* bytes: allreduce payload, ring estimate */
    int barriers;          /* node barriers (shared masters) */
    double gflop_per_rank; /* forward GEMMs and attention, q x signs x local batch */
    double perturbed;      /* elements written into working copies per rank */
    double updated;        /* master elements each rank updates */
    int feasible;
    char why[200];         /* why not, when infeasible */
} dz_plan_layout;

typedef struct dz_plan {
    int count;
    dz_plan_layout l[2];   /* P = 1, then P = 2 when it divides N */
    int best;              /* index of the recommendation; -1 when nothing fits */
} dz_plan;

/* Defaults: one node, one rank, the trainer's batch 16 / eval batch 64 / shared prompts,
 * 2 labels, q = 1, f32 masters, the measured overheads. cfg, seq and memory are left
 * to the caller. */
void dz_plan_request_default(dz_plan_request *r);
/* Refuses bad requests naming the flag (--nodes, --ranks-per-node, --mem-per-node,
 * --batch, --seq, --labels, --spsa-samples). */
dz_status dz_plan_make(const dz_plan_request *r, dz_plan *out, dz_error *err);

#ifdef __cplusplus
}
#endif

#endif
