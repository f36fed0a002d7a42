/* dz_comm over MPI (built where CMake finds MPI). */
#include <mpi.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "parallel/comm.h"

enum { MAX_WINDOWS = 8 };
/* The watchdog's messages travel on a communicator of their own (never mixed with the
 * collectives'): a waiting rank that times out sends TAG_PING to every rank, and every
 * rank waiting in a collective answers TAG_PONG. */
enum { TAG_PING = 1, TAG_PONG = 2 };
/* How long the ranks get to answer a ping, at most (less when the timeout is shorter). */
static const double PING_WAIT_S = 10.0;

struct dz_comm {
    int mpi;                  /* 0: one process, no MPI calls at all */
    int rank, size, node, n_nodes, node_rank, node_size, machine_ranks, machine_rank;
    MPI_Comm node_comm, watch;
    int has_node_comm, has_watch;
    double timeout_s;         /* 0: collectives wait forever */
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
    c->machine_ranks = ssize, c->machine_rank = srank;
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
    c->timeout_s = DZ_COMM_DEFAULT_TIMEOUT_S;
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
    if (st == DZ_OK && (rc = MPI_Comm_dup(MPI_COMM_WORLD, &c->watch)) != MPI_SUCCESS)
        st = mpi_fail(err, rc, "MPI_Comm_dup");
    c->has_watch = st == DZ_OK;
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
        if (c->has_watch) MPI_Comm_free(&c->watch);
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
int dz_comm_machine_rank(const dz_comm *c) { return c->machine_rank; }
const char *dz_comm_backend(const dz_comm *c) { return c->backend; }
uint64_t dz_comm_bytes_sent(const dz_comm *c) { return c->sent; }

void dz_comm_set_timeout(dz_comm *c, double seconds) { c->timeout_s = seconds > 0 ? seconds : 0; }

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Answers every ping that has arrived: a waiting rank is alive. */
static void answer_pings(dz_comm *c) {
    for (;;) {
        int flag = 0, token;
        MPI_Status s;
        MPI_Iprobe(MPI_ANY_SOURCE, TAG_PING, c->watch, &flag, &s);
        if (!flag) return;
        MPI_Recv(&token, 1, MPI_INT, s.MPI_SOURCE, TAG_PING, c->watch, MPI_STATUS_IGNORE);
        MPI_Send(&token, 1, MPI_INT, s.MPI_SOURCE, TAG_PONG, c->watch);
    }
}

/* After a timeout: pings every other rank and waits a while for the answers; the
 * error names the ranks that gave none. */
static dz_status name_silent_ranks(dz_comm *c, const char *what, dz_error *err) {
    const int n = c->size;
    MPI_Request *req = calloc(2 * (size_t)n, sizeof *req);
    int *tokens = calloc(2 * (size_t)n, sizeof *tokens), *answered = calloc((size_t)n, sizeof *answered);
    if (!req || !tokens || !answered) {
        free(req), free(tokens), free(answered);
        return dz_fail(err, DZ_ERR_IO, "mpi: no answer within %.0f s in %s (--rank-timeout)", c->timeout_s, what);
    }
    for (int r = 0; r < n; r++) {
        req[r] = req[n + r] = MPI_REQUEST_NULL;
        if (r == c->rank) continue;
        MPI_Irecv(&tokens[n + r], 1, MPI_INT, r, TAG_PONG, c->watch, &req[n + r]);
        MPI_Isend(&tokens[r], 1, MPI_INT, r, TAG_PING, c->watch, &req[r]);
    }
    answered[c->rank] = 1;
    const double wait = c->timeout_s < PING_WAIT_S ? c->timeout_s : PING_WAIT_S, until = now_s() + wait;
    int missing = n - 1;
    while (missing > 0 && now_s() < until) {
        answer_pings(c); /* another rank that timed out asks us too */
        for (int r = 0; r < n; r++) {
            int flag = 0;
            if (answered[r]) continue;
            MPI_Test(&req[n + r], &flag, MPI_STATUS_IGNORE);
            if (flag) answered[r] = 1, missing--;
        }
        sched_yield();
    }
    char list[512] = "";
    size_t len = 0;
    for (int r = 0; r < n && len < sizeof list - 16; r++)
        if (!answered[r]) len += (size_t)snprintf(list + len, sizeof list - len, "%s%d", len ? ", " : "", r);
    free(req), free(tokens), free(answered); /* requests still pending die with the job */
    if (missing == 0)
        return dz_fail(err, DZ_ERR_IO,
                       "mpi: %s did not complete within %g s though every rank answers (--rank-timeout; a rank may "
                       "be far behind)", what, c->timeout_s);
    return dz_fail(err, DZ_ERR_IO, "mpi: rank %s did not respond within %g s (waiting in %s; --rank-timeout)", list,
                   c->timeout_s, what);
}

/* Completes a started collective: polls it, answering pings meanwhile, for at most the
 * timeout. A timed-out collective cannot be cancelled: the caller must end the job. */
static dz_status finish(dz_comm *c, MPI_Request *req, int rc, const char *what, dz_error *err) {
    if (rc != MPI_SUCCESS) return mpi_fail(err, rc, what);
    const double start = now_s();
    for (unsigned k = 0;; k++) {
        int flag = 0;
        rc = MPI_Test(req, &flag, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS) return mpi_fail(err, rc, what);
        if (flag) return DZ_OK;
        if ((k & 255) != 255) continue; /* the common case: done within microseconds */
        answer_pings(c);
        if (c->timeout_s > 0 && now_s() - start > c->timeout_s) return name_silent_ranks(c, what, err);
        if (k > 65536) sched_yield(); /* a long wait: leave the core to the ranks that compute */
    }
}

static dz_status allreduce(dz_comm *c, MPI_Comm comm, void *buf, size_t n, MPI_Datatype t, size_t esz, MPI_Op op,
                           const char *what, dz_error *err) {
    if (!c->mpi || n == 0) return DZ_OK;
    for (size_t done = 0; done < n;) { /* MPI counts are int */
        const int k = n - done > (1u << 30) ? 1 << 30 : (int)(n - done);
        MPI_Request req;
        const dz_status st =
            finish(c, &req, MPI_Iallreduce(MPI_IN_PLACE, (char *)buf + done * esz, k, t, op, comm, &req), what, err);
        if (st != DZ_OK) return st;
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

static dz_status bcast(dz_comm *c, MPI_Comm comm, void *buf, size_t bytes, int root, const char *what,
                       dz_error *err) {
    if (!c->mpi || bytes == 0) return DZ_OK;
    for (size_t done = 0; done < bytes;) {
        const int k = bytes - done > (1u << 30) ? 1 << 30 : (int)(bytes - done);
        MPI_Request req;
        const dz_status st = finish(c, &req, MPI_Ibcast((char *)buf + done, k, MPI_BYTE, root, comm, &req), what, err);
        if (st != DZ_OK) return st;
        done += (size_t)k;
    }
    return DZ_OK;
}

dz_status dz_comm_bcast(dz_comm *c, void *buf, size_t bytes, int root, dz_error *err) {
    const dz_status st = bcast(c, MPI_COMM_WORLD, buf, bytes, root, "MPI_Bcast", err);
    if (st == DZ_OK && c->mpi && c->rank == root) c->sent += bytes;
    return st;
}

dz_status dz_comm_node_bcast(dz_comm *c, void *buf, size_t bytes, dz_error *err) {
    const dz_status st = bcast(c, c->node_comm, buf, bytes, 0, "MPI_Bcast (node)", err);
    if (st == DZ_OK && c->mpi && c->node_rank == 0) c->sent += bytes;
    return st;
}

dz_status dz_comm_barrier(dz_comm *c, dz_error *err) {
    if (!c->mpi) return DZ_OK;
    MPI_Request req;
    return finish(c, &req, MPI_Ibarrier(MPI_COMM_WORLD, &req), "MPI_Barrier", err);
}

dz_status dz_comm_node_barrier(dz_comm *c, dz_error *err) {
    if (!c->mpi) return DZ_OK;
    MPI_Request req;
    return finish(c, &req, MPI_Ibarrier(c->node_comm, &req), "MPI_Barrier (node)", err);
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
