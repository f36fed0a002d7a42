/* dz_comm over MPI (built where CMake finds MPI). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parallel/comm.h"

enum { MAX_WINDOWS = 8 };

struct dz_comm {
    int mpi;                  /* 0: one process, no MPI calls at all */
    int rank, size, node, n_nodes, node_rank, node_size, machine_ranks;
    MPI_Comm node_comm;
    int has_node_comm;
    MPI_Win windows[MAX_WINDOWS];
    void *local[MAX_WINDOWS]; /* one-process stand-ins for windows */
    int n_windows;
    uint64_t sent;
    char backend[96];
};

static int launched_by_mpirun(void) {
    static const char *vars[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE"};
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++)
        if (getenv(vars[i])) return 1;
    return 0;
}

static dz_status mpi_fail(dz_error *err, int rc, const char *what) {
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    return dz_fail(err, DZ_ERR_IO, "mpi: %s failed: %s", what, msg);
}

static dz_status split_nodes(dz_comm *c, int node_size, dz_error *err) {
    MPI_Comm shared;
    int rc = MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, c->rank, MPI_INFO_NULL, &shared);
    if (rc != MPI_SUCCESS) return mpi_fail(err, rc, "MPI_Comm_split_type");
    int srank, ssize;
    MPI_Comm_rank(shared, &srank);
    MPI_Comm_size(shared, &ssize);
    c->machine_ranks = ssize;
    /* Nodes are numbered machine by machine (machines ordered by their lowest world rank);
     * a machine holds ceil(ranks / per) nodes. */
    int leader = c->rank;
    MPI_Bcast(&leader, 1, MPI_INT, 0, shared);
    const int per = node_size > 0 ? node_size : ssize, mine[2] = {srank == 0, (ssize + per - 1) / per};
    int *all = malloc(sizeof(int) * 2 * (size_t)c->size);
    if (!all) {
        MPI_Comm_free(&shared);
        return dz_fail(err, DZ_ERR_NOMEM, "mpi: out of memory");
    }
    MPI_Allgather(mine, 2, MPI_INT, all, 2, MPI_INT, MPI_COMM_WORLD);
    int first_node = 0, total = 0;
    for (int r = 0; r < c->size; r++)
        if (all[2 * r]) {
            if (r < leader) first_node += all[2 * r + 1];
            total += all[2 * r + 1];
        }
    free(all);
    c->node = first_node + srank / per;
    c->n_nodes = total;
    rc = MPI_Comm_split(shared, srank / per, srank, &c->node_comm);
    MPI_Comm_free(&shared);
    if (rc != MPI_SUCCESS) return mpi_fail(err, rc, "MPI_Comm_split");
    c->has_node_comm = 1;
    MPI_Comm_rank(c->node_comm, &c->node_rank);
    MPI_Comm_size(c->node_comm, &c->node_size);
    return DZ_OK;
}

dz_status dz_comm_init(int *argc, char ***argv, int node_size, unsigned flags, dz_comm **out, dz_error *err) {
    *out = NULL;
    dz_comm *c = calloc(1, sizeof *c);
    if (!c) return dz_fail(err, DZ_ERR_NOMEM, "out of memory");
    c->size = c->n_nodes = c->node_size = c->machine_ranks = 1;
    snprintf(c->backend, sizeof c->backend, "single process");
    if (node_size < 0) {
        free(c);
        return dz_fail(err, DZ_ERR_INVALID, "--node-size %d: expected 0 (real nodes) or a positive count", node_size);
    }
    if (!(flags & DZ_COMM_FORCE_MPI) && !launched_by_mpirun()) {
        *out = c;
        return DZ_OK;
    }
    int provided = 0;
    int rc = MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided); /* only the main thread calls MPI */
    if (rc != MPI_SUCCESS) {
        free(c);
        return dz_fail(err, DZ_ERR_IO, "mpi: MPI_Init_thread failed (%d)", rc);
    }
    c->mpi = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &c->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &c->size);
    char lib[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(lib, &len);
    lib[strcspn(lib, ",\n")] = 0;
    snprintf(c->backend, sizeof c->backend, "mpi (%.80s)", lib);
    dz_status st = split_nodes(c, node_size, err);
    if (st != DZ_OK) {
        dz_comm_finalize(c);
        return st;
    }
    *out = c;
    return DZ_OK;
}

void dz_comm_finalize(dz_comm *c) {
    if (!c) return;
    for (int i = 0; i < c->n_windows; i++) {
        if (c->mpi) MPI_Win_free(&c->windows[i]);
        else free(c->local[i]);
    }
    if (c->mpi) {
        if (c->has_node_comm) MPI_Comm_free(&c->node_comm);
        MPI_Finalize();
    }
    free(c);
}

void dz_comm_abort(dz_comm *c, int code) {
    if (c && c->mpi) MPI_Abort(MPI_COMM_WORLD, code);
}

int dz_comm_rank(const dz_comm *c) { return c->rank; }
int dz_comm_size(const dz_comm *c) { return c->size; }
int dz_comm_node(const dz_comm *c) { return c->node; }
int dz_comm_n_nodes(const dz_comm *c) { return c->n_nodes; }
int dz_comm_node_rank(const dz_comm *c) { return c->node_rank; }
int dz_comm_node_size(const dz_comm *c) { return c->node_size; }
int dz_comm_is_mpi(const dz_comm *c) { return c->mpi; }
int dz_comm_machine_ranks(const dz_comm *c) { return c->machine_ranks; }
const char *dz_comm_backend(const dz_comm *c) { return c->backend; }
uint64_t dz_comm_bytes_sent(const dz_comm *c) { return c->sent; }

static dz_status allreduce(dz_comm *c, MPI_Comm comm, void *buf, size_t n, MPI_Datatype t, size_t esz, MPI_Op op,
                           const char *what, dz_error *err) {
    if (!c->mpi || n == 0) return DZ_OK;
    for (size_t done = 0; done < n;) { /* MPI counts are int */
        const int k = n - done > (1u << 30) ? 1 << 30 : (int)(n - done);
        const int rc = MPI_Allreduce(MPI_IN_PLACE, (char *)buf + done * esz, k, t, op, comm);
        if (rc != MPI_SUCCESS) return mpi_fail(err, rc, what);
        done += (size_t)k;
    }
    c->sent += n * esz;
    return DZ_OK;
}

dz_status dz_comm_sum_f64(dz_comm *c, double *buf, size_t n, dz_error *err) {
    return allreduce(c, MPI_COMM_WORLD, buf, n, MPI_DOUBLE, sizeof(double), MPI_SUM, "MPI_Allreduce (losses)", err);
}

dz_status dz_comm_sum_u64(dz_comm *c, uint64_t *buf, size_t n, dz_error *err) {
    return allreduce(c, MPI_COMM_WORLD, buf, n, MPI_UINT64_T, 8, MPI_SUM, "MPI_Allreduce", err);
}

dz_status dz_comm_node_sum_u64(dz_comm *c, uint64_t *buf, size_t n, dz_error *err) {
    return allreduce(c, c->node_comm, buf, n, MPI_UINT64_T, 8, MPI_SUM, "MPI_Allreduce (node)", err);
}

dz_status dz_comm_minmax_u64(dz_comm *c, uint64_t v, uint64_t *min, uint64_t *max, dz_error *err) {
    *min = *max = v;
    dz_status st = allreduce(c, MPI_COMM_WORLD, min, 1, MPI_UINT64_T, 8, MPI_MIN, "MPI_Allreduce (min)", err);
    return st == DZ_OK ? allreduce(c, MPI_COMM_WORLD, max, 1, MPI_UINT64_T, 8, MPI_MAX, "MPI_Allreduce (max)", err)
                       : st;
}

dz_status dz_comm_bcast(dz_comm *c, void *buf, size_t bytes, int root, dz_error *err) {
    if (!c->mpi || bytes == 0) return DZ_OK;
    for (size_t done = 0; done < bytes;) {
        const int k = bytes - done > (1u << 30) ? 1 << 30 : (int)(bytes - done);
        const int rc = MPI_Bcast((char *)buf + done, k, MPI_BYTE, root, MPI_COMM_WORLD);
        if (rc != MPI_SUCCESS) return mpi_fail(err, rc, "MPI_Bcast");
        done += (size_t)k;
    }
    if (c->rank == root) c->sent += bytes;
    return DZ_OK;
}

dz_status dz_comm_barrier(dz_comm *c, dz_error *err) {
    const int rc = c->mpi ? MPI_Barrier(MPI_COMM_WORLD) : MPI_SUCCESS;
    return rc == MPI_SUCCESS ? DZ_OK : mpi_fail(err, rc, "MPI_Barrier");
}

dz_status dz_comm_node_barrier(dz_comm *c, dz_error *err) {
    const int rc = c->mpi ? MPI_Barrier(c->node_comm) : MPI_SUCCESS;
    return rc == MPI_SUCCESS ? DZ_OK : mpi_fail(err, rc, "MPI_Barrier (node)");
}

dz_status dz_comm_node_alloc(dz_comm *c, size_t bytes, void **base, dz_error *err) {
    *base = NULL;
    if (c->n_windows == MAX_WINDOWS) return dz_fail(err, DZ_ERR_INVALID, "mpi: too many shared windows");
    if (!c->mpi) {
        if (posix_memalign(base, 64, bytes ? bytes : 64) != 0)
            return dz_fail(err, DZ_ERR_NOMEM, "cannot allocate %zu bytes for the parameter store", bytes);
        c->local[c->n_windows++] = *base;
        return DZ_OK;
    }
    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "alloc_shared_noncontig", "false");
    void *mine = NULL;
    MPI_Win w;
    int rc = MPI_Win_allocate_shared(c->node_rank == 0 ? (MPI_Aint)bytes : 0, 64, info, c->node_comm, &mine, &w);
    MPI_Info_free(&info);
    if (rc != MPI_SUCCESS) return mpi_fail(err, rc, "MPI_Win_allocate_shared (node parameter store)");
    MPI_Aint size = 0;
    int disp = 0;
    rc = MPI_Win_shared_query(w, 0, &size, &disp, base);
    if (rc != MPI_SUCCESS) {
        MPI_Win_free(&w);
        return mpi_fail(err, rc, "MPI_Win_shared_query");
    }
    c->windows[c->n_windows++] = w;
    return DZ_OK;
}
