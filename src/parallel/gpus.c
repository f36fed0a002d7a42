/* Which GPU a rank owns (distzo/parallel.h): a pure function of where the rank sits, so the
 * CLI's choice is tested without a GPU or MPI. */
#include "distzo/parallel.h"

dz_status dz_gpu_for_rank(int machine_rank, int machine_ranks, int gpus_per_node, int share, int *device,
                          dz_error *err) {
    *device = -1;
    if (gpus_per_node < 1) return dz_fail(err, DZ_ERR_INVALID, "--gpus-per-node %d: give at least 1", gpus_per_node);
    if (machine_rank < 0 || machine_rank >= machine_ranks)
        return dz_fail(err, DZ_ERR_INVALID, "rank %d of the %d ranks on this machine: no such rank", machine_rank,
                       machine_ranks);
    /* One GPU per rank is the point: ranks sharing one run their kernels by turns, each
     * holding its own copy of the working buffers and its own CUDA context. */
    if (machine_ranks > gpus_per_node && !share)
        return dz_fail(err, DZ_ERR_INVALID, "%d ranks on this machine but --gpus-per-node %d: each rank owns one GPU; "
                       "start at most %d ranks per machine (mpirun --map-by ppr:%d:node), or pass --share-gpus to let "
                       "ranks share GPUs", machine_ranks, gpus_per_node, gpus_per_node, gpus_per_node);
    *device = machine_rank % gpus_per_node;
    return DZ_OK;
}
