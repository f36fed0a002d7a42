/* --verify-every: replicas are identical only because every rank applies the same
 * updates; a checksum of each node's masters, compared across nodes (and across ranks
 * that hold their own copy), catches divergence or corruption. */
#include <string.h>

#include "distzo/log.h"
#include "parallel/comm.h"
#include "run/compute.h"
#include "run/faults.h"
#include "store/store.h"

/* Tests: one flipped bit on one node (run/faults.h), in the middle of the named tensor,
 * wherever its master lives: in memory, or in the store file. */
static dz_status inject_fault(dz_compute *comp, int done, dz_error *err) {
    const dz_faults f = dz_faults_get();
    const int node_rank = dz_comm_node_rank(comp->comm), node = dz_comm_node(comp->comm);
    if (f.corrupt_step != done || node != f.corrupt_node || (node_rank != 0 && comp->node_shared)) return DZ_OK;
    const dz_param_table *t = dz_model_params(comp->m);
    int id = !strcmp(f.corrupt_tensor, "last") ? t->count - 1 : f.corrupt_tensor[0] ? -1 : 0;
    for (int i = 0; id < 0 && i < t->count; i++)
        if (!strcmp(t->params[i].hf_name, f.corrupt_tensor)) id = i;
    if (id < 0) return dz_fail(err, DZ_ERR_INVALID, "DISTZO_TEST_CORRUPT: the model has no tensor %s", f.corrupt_tensor);
    const size_t byte = (size_t)dz_param_numel(&t->params[id]) / 2 * dz_dtype_size(dz_model_dtype(comp->m));
    unsigned char *mem = dz_model_tensor(comp->m, id);
    dz_log(DZ_LOG_INFO, "test fault: flipping a bit of %s on node %d after step %d", t->params[id].hf_name, node, done);
    if (mem) {
        mem[byte] ^= 1;
        return DZ_OK;
    }
    const int block = t->params[id].block;
    const uint64_t off = dz_store_tensor_offset_in_block(comp->store, id) + byte;
    unsigned char b;
    dz_status st = dz_store_read_range(comp->store, block, off, 1, &b, err);
    b ^= 1;
    if (st == DZ_OK) st = dz_store_write_range(comp->store, block, off, 1, &b, err);
    return st;
}

dz_status dz_compute_weights_checksum(const dz_compute *comp, uint64_t *sum, dz_error *err) {
    const int slices = comp->node_shared ? dz_comm_node_size(comp->comm) : 1;
    const int slice = comp->node_shared ? dz_comm_node_rank(comp->comm) : 0;
    dz_status st = dz_zo_checksum_slice(comp->e, slice, slices, sum, err);
    if (st == DZ_OK && comp->node_shared) st = dz_comm_node_sum_u64(comp->comm, sum, 1, err);
    return st;
}

dz_status dz_compute_verify_replicas(dz_compute *comp, int done, dz_error *err) {
    dz_status st = dz_zo_flush(comp->e, err);
    if (st != DZ_OK) return st;
    if ((st = inject_fault(comp, done, err)) != DZ_OK) return st;
    const int node = dz_comm_node(comp->comm);
    uint64_t sum = 0, lo, hi;
    st = dz_compute_weights_checksum(comp, &sum, err);
    if (st == DZ_OK) st = dz_comm_minmax_u64(comp->comm, sum, &lo, &hi, err);
    if (st != DZ_OK) return st;
    const int copies = comp->node_shared ? dz_comm_n_nodes(comp->comm) : dz_comm_size(comp->comm);
    if (copies < 2) { /* nothing to compare: say so rather than report agreement */
        if (comp->rank0 && !comp->verify_warned)
            dz_log(DZ_LOG_WARN, "--verify-every: this job holds one copy of the weights (%s), so there is nothing to "
                   "compare it with; the check compares the copies of nodes (or of ranks with --node-size 1)",
                   dz_comm_size(comp->comm) > 1 ? "its ranks share it" : "one process");
        comp->verify_warned = 1;
        if (comp->rank0) dz_log(DZ_LOG_INFO, "weights after step %d: checksum %016llx (one copy: not compared)", done,
                              (unsigned long long)sum);
        return DZ_OK;
    }
    if (lo != hi)
        return dz_fail(err, DZ_ERR_INVALID,
                       "replica check after step %d: the weights differ between nodes (checksums %016llx to %016llx; "
                       "this node %d: %016llx): a node diverged or its memory was corrupted; --resume from the last "
                       "checkpoint", done, (unsigned long long)lo, (unsigned long long)hi, node, (unsigned long long)sum);
    if (comp->rank0) dz_log(DZ_LOG_INFO, "replica check after step %d: %d node(s) agree, checksum %016llx", done,
                          dz_comm_n_nodes(comp->comm), (unsigned long long)sum);
    return DZ_OK;
}
