/* A node's NCCL group across its MPI ranks and the pinned node-shared block (gpu_group.h). */
#include "parallel/gpu_group.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend/stream_ops.h"

/* What node rank 0 broadcasts: the id, or that it could not make one (so the node's other
 * ranks fail with it instead of waiting in ncclCommInitRank for a rank that never comes). */
typedef struct node_id {
    int made;
    dz_cuda_comm_id id;
} node_id;

static dz_status seam_fail(dz_cuda_seam *s, int status, const char *what, dz_error *err) {
    return dz_fail(err, status == DZ_CUDA_ERR_MEMORY ? DZ_ERR_NOMEM : DZ_ERR_IO, "GPU %d: %s: %s", s->device, what,
                   s->last_error(s));
}

/* NCCL takes each GPU once per communicator, and ranks sharing one (--share-gpus) would fail
 * in ncclCommInitRank, or wait there: every rank of the node sees every rank's GPU first. */
static dz_status gpus_distinct(dz_comm *c, const dz_cuda_seam *s, const dz_gpu_group *g, dz_error *err) {
    uint64_t *dev = calloc((size_t)g->nranks, sizeof *dev);
    if (!dev) return dz_fail(err, DZ_ERR_NOMEM, "the node's GPUs: out of memory");
    dev[g->rank] = (uint64_t)s->device + 1;
    dz_status st = dz_comm_node_sum_u64(c, dev, (size_t)g->nranks, err);
    for (int a = 0; st == DZ_OK && a < g->nranks; a++)
        for (int b = a + 1; st == DZ_OK && b < g->nranks; b++)
            if (dev[a] == dev[b])
                st = dz_fail(err, DZ_ERR_INVALID, "node %d's ranks %d and %d both drive GPU %d (--share-gpus): an NCCL "
                             "group takes each GPU once, so DistZO2's sliced upload needs a GPU per rank of the node",
                             dz_comm_node(c), a, b, (int)dev[a] - 1);
    free(dev);
    return st;
}

dz_status dz_gpu_group_join(dz_comm *c, dz_cuda_seam *s, dz_gpu_group *g, dz_error *err) {
    memset(g, 0, sizeof *g);
    g->rank = dz_comm_node_rank(c), g->nranks = dz_comm_node_size(c);
    dz_status st = gpus_distinct(c, s, g, err);
    if (st != DZ_OK) return st;
    node_id shared = {0};
    int status = DZ_CUDA_OK;
    if (g->rank == 0) {
        status = s->comm_unique_id(s, &shared.id);
        shared.made = status == DZ_CUDA_OK;
    }
    st = dz_comm_node_bcast(c, &shared, sizeof shared, err);
    if (st != DZ_OK) return st;
    if (!shared.made)
        return g->rank == 0 ? seam_fail(s, status, "the node's NCCL id (ncclGetUniqueId)", err)
                            : dz_fail(err, DZ_ERR_IO, "GPU %d: node %d's rank 0 could not make the node's NCCL id",
                                      s->device, dz_comm_node(c));
    g->id = shared.id;
    status = s->comm_init(s, &g->comm, g->nranks, g->rank, &g->id);
    if (status != DZ_CUDA_OK) {
        g->comm = NULL;
        return seam_fail(s, status, "joining the node's NCCL group (ncclCommInitRank)", err);
    }
    return DZ_OK;
}

dz_status dz_gpu_group_leave(dz_cuda_seam *s, dz_gpu_group *g, dz_error *err) {
    const int status = g->comm ? s->comm_destroy(s, g->comm) : DZ_CUDA_OK;
    g->comm = NULL;
    return status == DZ_CUDA_OK ? DZ_OK : seam_fail(s, status, "leaving the node's NCCL group", err);
}

static dz_cuda_seam *backend_seam(const dz_backend *be) {
    return be && be->streams && be->streams->seam && be->streams->set_node ? be->streams->seam(be) : NULL;
}

dz_status dz_gpu_group_join_backend(dz_comm *c, const dz_backend *be, dz_gpu_group *g, dz_error *err) {
    memset(g, 0, sizeof *g);
    dz_cuda_seam *s = backend_seam(be);
    if (!s || !c || dz_comm_node_size(c) < 2) return DZ_OK;
    dz_status st = dz_gpu_group_join(c, s, g, err);
    if (st == DZ_OK) be->streams->set_node(be, g->comm, g->rank, g->nranks);
    return st;
}

dz_status dz_gpu_group_leave_backend(const dz_backend *be, dz_gpu_group *g, dz_error *err) {
    dz_cuda_seam *s = backend_seam(be);
    if (!s || !g->comm) return DZ_OK;
    be->streams->set_node(be, NULL, 0, 0);
    return dz_gpu_group_leave(s, g, err);
}

dz_status dz_node_block_pin(dz_cuda_seam *s, void *base, size_t bytes, dz_error *err) {
    const int status = s->host_register(s, base, bytes);
    return status == DZ_CUDA_OK ? DZ_OK : seam_fail(s, status, "pinning the node-shared block (cudaHostRegister)", err);
}

dz_status dz_node_block_unpin(dz_cuda_seam *s, void *base, dz_error *err) {
    const int status = s->host_unregister(s, base);
    return status == DZ_CUDA_OK ? DZ_OK
                                : seam_fail(s, status, "unpinning the node-shared block (cudaHostUnregister)", err);
}
