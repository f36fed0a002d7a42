/* A node's NCCL group across its MPI ranks and the pinned node-shared block
 * (parallel/gpu_group.h; docs/CUDA.md, "Several GPUs"), on host seams, one per rank.
 * Run alone it checks the group of one (the serial build's, and a one-rank job's); under
 * mpirun (tests/cli/gpu_group.sh: 2, 3, 4 ranks, and simulated nodes of 2 with
 * DZ_TEST_NODE_SIZE) every rank checks, against facts gathered separately over the whole
 * job (every rank's pid, node and node rank, summed over MPI_COMM_WORLD):
 *  - the id it joined with was made by its node's rank 0 (that process's pid, its first id),
 *    so the node's broadcast reached it and no other node's id did;
 *  - it joined as its node rank of its node's size, on the GPU of its machine-local rank;
 *  - a node rank 0 that cannot make the id makes every rank of its node fail saying so, and
 *    ranks of a node on one GPU (--share-gpus) are refused by every rank;
 *  - the node-shared block, pinned on every rank, is a pinned range of its seam: a slice
 *    uploads from it and comes back intact, a copy past its end is an overrun, a second
 *    registration and host_free of it are refused, and unpinning (or the seam's end) leaves
 *    the block to its owner.
 * The host seam is per process, so an all-gather across ranks is not played here (it fails:
 * on a rank that joined another process's id saying so, on the leader as a collective its
 * other members never join); the data path of N GPUs is tests/test_cuda_nccl.c's, in one
 * process. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "cuda_seam_ok.h"
#include "parallel/gpu_group.h"

static dz_comm *comm;

typedef struct job {
    int size;
    uint64_t *pid, *node, *node_rank; /* by world rank */
} job;

/* Every rank's pid, node and node rank, by a world sum (not the node broadcast). */
static void job_gather(job *j) {
    const int n = dz_comm_size(comm), me = dz_comm_rank(comm);
    j->size = n;
    uint64_t *all = calloc(3 * (size_t)n, sizeof *all);
    assert_non_null(all);
    all[me] = (uint64_t)getpid(), all[n + me] = (uint64_t)dz_comm_node(comm), all[2 * n + me] = (uint64_t)dz_comm_node_rank(comm);
    dz_error err;
    assert_int_equal(dz_comm_sum_u64(comm, all, 3 * (size_t)n, &err), DZ_OK);
    j->pid = all, j->node = all + n, j->node_rank = all + 2 * n;
}

static uint64_t node_leader_pid(const job *j, int node) {
    for (int r = 0; r < j->size; r++)
        if (j->node[r] == (uint64_t)node && j->node_rank[r] == 0) return j->pid[r];
    fail_msg("node %d has no rank 0", node);
    return 0;
}

static dz_cuda_seam *rank_seam(void) {
    int device = -1;
    dz_error err;
    const int m = dz_comm_machine_rank(comm), mr = dz_comm_machine_ranks(comm);
    assert_int_equal(dz_gpu_for_rank(m, mr, mr, 0, &device, &err), DZ_OK);
    assert_int_equal(device, m);
    dz_cuda_seam *s = dz_cuda_seam_host_create_device(device);
    assert_non_null(s);
    return s;
}

static void each_rank_joins_its_node_group(void **state) {
    (void)state;
    job j;
    job_gather(&j);
    dz_cuda_seam *s = rank_seam();
    dz_gpu_group g;
    dz_error err;
    assert_int_equal(dz_gpu_group_join(comm, s, &g, &err), DZ_OK);
    const int leader = dz_comm_node_rank(comm) == 0;
    assert_non_null(g.comm);
    assert_int_equal(g.rank, dz_comm_node_rank(comm));
    assert_int_equal(g.nranks, dz_comm_node_size(comm));
    int rank = -1, nranks = -1;
    dz_cuda_seam_host_comm_member(g.comm, &rank, &nranks);
    assert_int_equal(rank, dz_comm_node_rank(comm));
    assert_int_equal(nranks, dz_comm_node_size(comm));
    long pid = 0;
    unsigned long number = 99;
    assert_true(dz_cuda_seam_host_comm_origin(&g.id, &pid, &number));
    assert_int_equal((uint64_t)pid, node_leader_pid(&j, dz_comm_node(comm)));
    assert_int_equal(number, 0); /* the leader's first id (this test runs first) */
    assert_int_equal(leader, pid == (long)getpid());
    assert_int_equal(dz_gpu_group_leave(s, &g, &err), DZ_OK);
    assert_null(g.comm);
    s->destroy(s);
    free(j.pid);
}

/* A group of one gathers its own slice; a rank of a group spread over processes cannot be
 * played by the host seam, and its all-gather says so. */
static void a_group_gathers_or_says_it_cannot(void **state) {
    (void)state;
    dz_cuda_seam *s = rank_seam();
    dz_gpu_group g;
    dz_error err;
    assert_int_equal(dz_gpu_group_join(comm, s, &g, &err), DZ_OK);
    unsigned char *dev = NULL, host[64], back[64];
    for (int i = 0; i < 64; i++) host[i] = (unsigned char)(7 * i + 1);
    SEAM_OK(s, s->dev_alloc(s, (void **)&dev, 64 * (size_t)g.nranks));
    SEAM_OK(s, s->memcpy_async(s, dev + 64 * (size_t)g.rank, host, 64, DZ_COPY_H2D, NULL));
    SEAM_OK(s, s->group_start(s));
    const int st = s->all_gather(s, g.comm, dev + 64 * (size_t)g.rank, dev, 64, NULL);
    SEAM_OK(s, s->group_end(s));
    if (g.nranks == 1) {
        SEAM_OK(s, st);
        SEAM_OK(s, s->memcpy_async(s, back, dev, 64, DZ_COPY_D2H, NULL));
        SEAM_OK(s, s->stream_synchronize(s, NULL));
        assert_memory_equal(back, host, 64);
    } else if (g.rank != 0) { /* joined an id of another process */
        assert_int_equal(st, DZ_CUDA_ERR_INVALID);
        assert_non_null(strstr(s->last_error(s), "another process"));
    } else { /* the leader's group is its own, whose other members never join here */
        SEAM_OK(s, st);
        assert_int_equal(s->stream_synchronize(s, NULL), DZ_CUDA_ERR_INVALID);
        assert_non_null(strstr(s->last_error(s), "ranks joined"));
    }
    assert_int_equal(dz_gpu_group_leave(s, &g, &err), DZ_OK);
    SEAM_OK(s, s->dev_free(s, dev));
    s->destroy(s);
}

static int refuse_id_safe(dz_cuda_seam *s, dz_cuda_comm_id *id) {
    (void)s, (void)id;
    return DZ_CUDA_ERR_RUNTIME;
}

static void a_leader_without_an_id_fails_its_node(void **state) {
    (void)state;
    dz_cuda_seam *s = rank_seam();
    s->comm_unique_id = refuse_id_safe; /* node rank 0's ncclGetUniqueId fails */
    dz_gpu_group g;
    dz_error err;
    assert_int_equal(dz_gpu_group_join(comm, s, &g, &err), DZ_ERR_IO);
    assert_null(g.comm);
    assert_non_null(strstr(err.msg, dz_comm_node_rank(comm) == 0 ? "ncclGetUniqueId" : "could not make the node's NCCL id"));
    s->destroy(s);
}

/* --share-gpus: every rank on GPU 0; a node of several ranks is refused by all of them. */
static void ranks_sharing_a_gpu_are_refused(void **state) {
    (void)state;
    dz_cuda_seam *s = dz_cuda_seam_host_create_device(0);
    assert_non_null(s);
    dz_gpu_group g;
    dz_error err;
    const dz_status st = dz_gpu_group_join(comm, s, &g, &err);
    if (dz_comm_node_size(comm) == 1) {
        assert_int_equal(st, DZ_OK);
        assert_int_equal(dz_gpu_group_leave(s, &g, &err), DZ_OK);
    } else {
        assert_int_equal(st, DZ_ERR_INVALID);
        assert_null(g.comm);
        assert_non_null(strstr(err.msg, "ranks 0 and 1 both drive GPU 0"));
    }
    s->destroy(s);
}

enum { BLOCK = 4099 };

static unsigned char pattern(size_t i) { return (unsigned char)(i * 131 + 17); }

static void the_node_block_is_pinned_on_every_rank(void **state) {
    (void)state;
    dz_error err;
    unsigned char *block = NULL;
    assert_int_equal(dz_comm_node_alloc(comm, BLOCK, (void **)&block, &err), DZ_OK);
    if (dz_comm_node_rank(comm) == 0)
        for (size_t i = 0; i < BLOCK; i++) block[i] = pattern(i);
    assert_int_equal(dz_comm_node_barrier(comm, &err), DZ_OK);
    dz_cuda_seam *s = rank_seam();
    assert_false(dz_cuda_seam_host_pinned(s, block, BLOCK));
    assert_int_equal(dz_node_block_pin(s, block, BLOCK, &err), DZ_OK);
    assert_true(dz_cuda_seam_host_pinned(s, block, BLOCK));
    assert_false(dz_cuda_seam_host_pinned(s, block + 1, BLOCK));
    /* this rank's slice of the block, as the sliced upload takes it */
    const size_t n = (size_t)dz_comm_node_size(comm), c = (BLOCK + n - 1) / n, r = (size_t)dz_comm_node_rank(comm);
    const size_t lo = r * c < BLOCK ? r * c : BLOCK, len = lo + c < BLOCK ? c : BLOCK - lo;
    unsigned char *dev = NULL, back[BLOCK];
    SEAM_OK(s, s->dev_alloc(s, (void **)&dev, c + 1));
    if (len) SEAM_OK(s, s->memcpy_async(s, dev, block + lo, len, DZ_COPY_H2D, NULL));
    assert_int_equal(s->memcpy_async(s, dev, block + BLOCK - c, c + 1, DZ_COPY_H2D, NULL), DZ_CUDA_ERR_OVERRUN);
    if (len) SEAM_OK(s, s->memcpy_async(s, back, dev, len, DZ_COPY_D2H, NULL));
    SEAM_OK(s, s->stream_synchronize(s, NULL));
    for (size_t i = 0; i < len; i++) assert_int_equal(back[i], pattern(lo + i));
    assert_int_equal(dz_node_block_pin(s, block + 8, 8, &err), DZ_ERR_IO); /* registered already */
    assert_int_equal(s->host_free(s, block), DZ_CUDA_ERR_INVALID);         /* not the seam's to free */
    assert_int_equal(dz_node_block_unpin(s, block, &err), DZ_OK);
    assert_false(dz_cuda_seam_host_pinned(s, block, 1));
    assert_int_equal(dz_node_block_unpin(s, block, &err), DZ_ERR_IO);
    /* pinned again and left so: the seam's end does not free the node's block */
    assert_int_equal(dz_node_block_pin(s, block, BLOCK, &err), DZ_OK);
    SEAM_OK(s, s->dev_free(s, dev));
    s->destroy(s);
    for (size_t i = 0; i < BLOCK; i++) assert_int_equal(block[i], pattern(i));
    assert_int_equal(dz_comm_node_barrier(comm, &err), DZ_OK); /* every rank read before the window goes */
}

int main(int argc, char **argv) {
    const char *ns = getenv("DZ_TEST_NODE_SIZE");
    dz_error err;
    if (dz_comm_init(&argc, &argv, ns ? atoi(ns) : 0, 0, &comm, &err) != DZ_OK) {
        fprintf(stderr, "test_gpu_group: %s\n", err.msg);
        return 1;
    }
    /* what the script checks the job against (a build without MPI runs each rank alone) */
    printf("test_gpu_group: rank %d of %d, node %d rank %d of %d, nodes %d\n", dz_comm_rank(comm),
           dz_comm_size(comm), dz_comm_node(comm), dz_comm_node_rank(comm), dz_comm_node_size(comm),
           dz_comm_n_nodes(comm));
    fflush(stdout);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(each_rank_joins_its_node_group),
        cmocka_unit_test(a_group_gathers_or_says_it_cannot),
        cmocka_unit_test(a_leader_without_an_id_fails_its_node),
        cmocka_unit_test(ranks_sharing_a_gpu_are_refused),
        cmocka_unit_test(the_node_block_is_pinned_on_every_rank),
    };
    const int failed = cmocka_run_group_tests(tests, NULL, NULL);
    dz_comm_finalize(comm);
    return failed;
}
