/* dz_comm for builds without MPI: one process, every collective is the identity. */
#include <stdlib.h>

#include "parallel/comm.h"

enum { MAX_BLOCKS = 8 };

struct dz_comm {
    void *blocks[MAX_BLOCKS];
    int n_blocks;
};

dz_status dz_comm_init(int *argc, char ***argv, int node_size, unsigned flags, dz_comm **out, dz_error *err) {
    (void)argc, (void)argv;
    *out = NULL;
    if (node_size < 0)
        return dz_fail(err, DZ_ERR_INVALID, "--node-size %d: expected 0 (real nodes) or a positive count", node_size);
    if (flags & DZ_COMM_FORCE_MPI)
        return dz_fail(err, DZ_ERR_UNSUPPORTED, "this distzo was built without MPI (install libopenmpi-dev and rebuild)");
    if (!(*out = calloc(1, sizeof **out))) return dz_fail(err, DZ_ERR_NOMEM, "out of memory");
    return DZ_OK;
}

void dz_comm_finalize(dz_comm *c) {
    if (!c) return;
    for (int i = 0; i < c->n_blocks; i++) free(c->blocks[i]);
    free(c);
}

void dz_comm_abort(dz_comm *c, int code) { (void)c, (void)code; }
void dz_comm_set_timeout(dz_comm *c, double seconds) { (void)c, (void)seconds; }
int dz_comm_rank(const dz_comm *c) { return (void)c, 0; }
int dz_comm_size(const dz_comm *c) { return (void)c, 1; }
int dz_comm_node(const dz_comm *c) { return (void)c, 0; }
int dz_comm_n_nodes(const dz_comm *c) { return (void)c, 1; }
int dz_comm_node_rank(const dz_comm *c) { return (void)c, 0; }
int dz_comm_node_size(const dz_comm *c) { return (void)c, 1; }
int dz_comm_is_mpi(const dz_comm *c) { return (void)c, 0; }
int dz_comm_machine_ranks(const dz_comm *c) { return (void)c, 1; }
int dz_comm_machine_rank(const dz_comm *c) { return (void)c, 0; }
const char *dz_comm_backend(const dz_comm *c) { return (void)c, "single process (built without MPI)"; }
uint64_t dz_comm_bytes_sent(const dz_comm *c) { return (void)c, 0; }
dz_status dz_comm_sum_f64(dz_comm *c, double *b, size_t n, dz_error *e) { return (void)c, (void)b, (void)n, (void)e, DZ_OK; }
dz_status dz_comm_sum_u64(dz_comm *c, uint64_t *b, size_t n, dz_error *e) { return (void)c, (void)b, (void)n, (void)e, DZ_OK; }
dz_status dz_comm_node_sum_u64(dz_comm *c, uint64_t *b, size_t n, dz_error *e) {
    return (void)c, (void)b, (void)n, (void)e, DZ_OK;
}
dz_status dz_comm_minmax_u64(dz_comm *c, uint64_t v, uint64_t *min, uint64_t *max, dz_error *e) {
    (void)c, (void)e;
    *min = *max = v;
    return DZ_OK;
}
dz_status dz_comm_bcast(dz_comm *c, void *b, size_t n, int root, dz_error *e) {
    return (void)c, (void)b, (void)n, (void)root, (void)e, DZ_OK;
}
dz_status dz_comm_node_bcast(dz_comm *c, void *b, size_t n, dz_error *e) { return (void)c, (void)b, (void)n, (void)e, DZ_OK; }
dz_status dz_comm_barrier(dz_comm *c, dz_error *e) { return (void)c, (void)e, DZ_OK; }
dz_status dz_comm_node_barrier(dz_comm *c, dz_error *e) { return (void)c, (void)e, DZ_OK; }

dz_status dz_comm_node_alloc(dz_comm *c, size_t bytes, void **base, dz_error *err) {
    *base = NULL;
    if (c->n_blocks == MAX_BLOCKS) return dz_fail(err, DZ_ERR_INVALID, "too many node allocations");
    if (posix_memalign(base, 64, bytes ? bytes : 64) != 0)
        return dz_fail(err, DZ_ERR_NOMEM, "cannot allocate %zu bytes for the parameter store", bytes);
    c->blocks[c->n_blocks++] = *base;
    return DZ_OK;
}
