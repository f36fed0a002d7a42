/* --verify-every: replicas are identical only because every rank applies the same
 * updates; a checksum of each node's masters, compared across nodes (and across ranks
 * that hold their own copy), catches divergence or corruption. */
#include "distzo/log.h"
#include "parallel/comm.h"
#include "run/faults.h"
#include "run/trainer.h"

/* Tests: one flipped bit on one node (run/faults.h). */
static void inject_fault(dz_trainer *tr, int done) {
    const dz_faults f = dz_faults_get();
    const int node_rank = dz_comm_node_rank(tr->comm), node = dz_comm_node(tr->comm);
    if (f.corrupt_step == done && node == f.corrupt_node && (node_rank == 0 || !tr->node_shared) && !tr->store)
        ((unsigned char *)dz_model_tensor(tr->m, 0))[0] ^= 1;
}

dz_status dz_trainer_verify_replicas(dz_trainer *tr, int done, dz_error *err) {
    dz_status st = dz_zo_flush(tr->e, err);
    if (st != DZ_OK) return st;
    inject_fault(tr, done);
    const int node_rank = dz_comm_node_rank(tr->comm), node = dz_comm_node(tr->comm);
    const int slices = tr->node_shared ? dz_comm_node_size(tr->comm) : 1;
    uint64_t sum = 0, lo, hi;
    st = dz_zo_checksum_slice(tr->e, tr->node_shared ? node_rank : 0, slices, &sum, err);
    if (st == DZ_OK && tr->node_shared) st = dz_comm_node_sum_u64(tr->comm, &sum, 1, err);
    if (st == DZ_OK) st = dz_comm_minmax_u64(tr->comm, sum, &lo, &hi, err);
    if (st != DZ_OK) return st;
    if (lo != hi)
        return dz_fail(err, DZ_ERR_INVALID,
                       "replica check after step %d: the weights differ between nodes (checksums %016llx to %016llx; "
                       "this node %d: %016llx): a node diverged or its memory was corrupted; --resume from the last "
                       "checkpoint", done, (unsigned long long)lo, (unsigned long long)hi, node, (unsigned long long)sum);
    if (tr->rank0) dz_log(DZ_LOG_INFO, "replica check after step %d: %d node(s) agree, checksum %016llx", done,
                          dz_comm_n_nodes(tr->comm), (unsigned long long)sum);
    return DZ_OK;
}
