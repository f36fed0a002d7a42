/* A node's GPUs as one NCCL group across its MPI ranks, and the node-shared block they
 * upload from pinned on each (DistZO2's sliced upload: docs/CUDA.md, "Several GPUs").
 *
 * The node's rank 0 makes the id through its seam (comm_unique_id: ncclGetUniqueId), the
 * node's MPI communicator carries it to the node's other ranks (dz_comm_node_bcast), and
 * every rank joins as its node rank of the node's size (comm_init: ncclCommInitRank, on the
 * GPU the rank owns). The node is the set of ranks that share the node-shared store
 * (dz_comm_node_alloc): a machine, or with --node-size a simulated node of it, whose ranks'
 * node order is their order on the machine (dz_comm_machine_rank). Without MPI (or in a
 * one-rank node) it is a group of one. Only the seam's function table is used, so this
 * layer needs no CUDA. */
#ifndef DZ_PARALLEL_GPU_GROUP_H
#define DZ_PARALLEL_GPU_GROUP_H

#include "backend/backend.h"
#include "backend/cuda/cuda_seam.h"
#include "parallel/comm.h"

typedef struct dz_gpu_group {
    dz_cuda_comm comm;  /* this rank's member; NULL until joined */
    int rank, nranks;   /* what it joined as: node rank, node size */
    dz_cuda_comm_id id; /* the id every member joined with (node rank 0's) */
} dz_gpu_group;

/* Collective over the node. On failure g->comm stays NULL and the error says which step
 * (and, where node rank 0 could not make the id, every rank of the node says so). Ranks of
 * the node on one GPU (--share-gpus) are refused by every rank of the node, naming them:
 * NCCL takes each GPU once per communicator. */
dz_status dz_gpu_group_join(dz_comm *c, dz_cuda_seam *s, dz_gpu_group *g, dz_error *err);
dz_status dz_gpu_group_leave(dz_cuda_seam *s, dz_gpu_group *g, dz_error *err);

/* A run's backend joins the node's group for DistZO2's sliced upload (src/run/setup.c):
 * where it can (be->streams->seam: the CUDA instance) and the node has several ranks, the
 * group is joined on the backend's seam and handed to the backend (set_node), whose
 * upload_node then shares each layer's upload with the node's GPUs. Nothing otherwise
 * (g->comm stays NULL). Every rank of the node calls it. leave undoes it. */
dz_status dz_gpu_group_join_backend(dz_comm *c, const dz_backend *be, dz_gpu_group *g, dz_error *err);
dz_status dz_gpu_group_leave_backend(const dz_backend *be, dz_gpu_group *g, dz_error *err);

/* Pins [base, base + bytes) of node-shared memory (dz_comm_node_alloc's: with --store ram
 * under MPI, the masters that every GPU of the node slices its upload from) for this rank's
 * GPU (host_register: cudaHostRegister; each process pins its own mapping of the block).
 * Unpin before the block is freed. */
dz_status dz_node_block_pin(dz_cuda_seam *s, void *base, size_t bytes, dz_error *err);
dz_status dz_node_block_unpin(dz_cuda_seam *s, void *base, dz_error *err);

#endif
