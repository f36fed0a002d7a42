/* The host seam's collectives (cuda_seam.h, seam_host.h): host seams in one process play
 * the devices of a node, and a group made by comm_unique_id joins them as NCCL's
 * communicators do. An all-gather is an operation of its device's stream like a copy: it
 * reads its send range and writes its receive range, so the race check orders it with the
 * device's other streams (an upload of the slice not waited for is DZ_CUDA_ERR_HAZARD).
 * When the first member's all-gather runs, every member's stream runs up to its own
 * all-gather of the same number (the collective's rendezvous, which a GPU reaches by
 * waiting), the slices are read, and each member's operation then writes them, in order of
 * rank, into its own receive buffer. A member that never joins fails the collective (NCCL
 * would wait forever); calls of several devices outside group_start/group_end too.
 *
 * An id holds its maker's process id, its number among that process's ids and the group's
 * address there. An id made in another process (a job's node rank 0 broadcasts it over MPI)
 * joins a group of its own here that no other member can reach: the rank and size are
 * recorded (dz_cuda_seam_host_comm_member), and its all-gathers fail, since the host seam
 * cannot play another process's device, unless the process has an exchange
 * (dz_cuda_seam_host_set_exchange: a test's MPI): then such an all-gather is checked and
 * enqueued as any other, its stream runs up to it at the call, and its send range is
 * exchanged with the other processes' members there and then, in call order (so the
 * processes' collectives meet in program order, as NCCL's do); the receive range is written
 * when the operation runs, lazily, as any other. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/cuda/seam_host.h"

enum { HS_GROUP_MAX = HS_STREAMS }; /* members of a group */
static const uint64_t GROUP_MAGIC = 0x647a6e63636c6772ull;

typedef struct hs_slot {            /* one member's part of one collective */
    hs_state *h;
    int stream;
    uint64_t pos;                   /* the absolute index of its all-gather in that stream */
    const void *send;
} hs_slot;

typedef struct hs_collective {
    size_t count;
    int joined, consumed;
    unsigned char *gathered;        /* nranks x count bytes, from the first run to the last */
    hs_slot slot[HS_GROUP_MAX];
} hs_collective;

typedef struct hs_group {
    uint64_t magic;
    int nranks, live, ever;
    int remote;                     /* joined by an id of another process */
    struct hs_member *member[HS_GROUP_MAX];
    hs_collective *colls;
    size_t n_colls, cap_colls;
} hs_group;

typedef struct hs_member {
    hs_group *g;
    hs_state *h;
    int rank;
    uint64_t next_seq;              /* this member's next collective */
} hs_member;

typedef struct hs_id {              /* the bytes of a host-seam dz_cuda_comm_id */
    uint64_t magic;
    int64_t pid;
    uint64_t number;
    hs_group *group;                /* valid in process pid only */
} hs_id;
_Static_assert(sizeof(hs_id) <= sizeof(dz_cuda_comm_id), "a host-seam id fits a dz_cuda_comm_id");

static _Thread_local int group_depth; /* ncclGroupStart/End nest per thread */
static dz_cuda_host_exchange remote_exchange; /* across processes (NULL: none) */
static void *remote_ctx;

void dz_cuda_seam_host_set_exchange(dz_cuda_host_exchange fn, void *ctx) { remote_exchange = fn, remote_ctx = ctx; }
static uint64_t ids_made;             /* this process's ids so far */

static int comm_unique_id(dz_cuda_seam *s, dz_cuda_comm_id *id) {
    hs_group *g = calloc(1, sizeof *g);
    if (!g) return hs_fail(hs_of(s), DZ_CUDA_ERR_MEMORY, "comm_unique_id: out of host memory");
    g->magic = GROUP_MAGIC;
    const hs_id made = {.magic = GROUP_MAGIC, .pid = (int64_t)getpid(), .number = ids_made++, .group = g};
    memset(id, 0, sizeof *id);
    memcpy(id->bytes, &made, sizeof made);
    return DZ_CUDA_OK;
}

int dz_cuda_seam_host_comm_origin(const dz_cuda_comm_id *id, long *pid, unsigned long *number) {
    hs_id got;
    memcpy(&got, id->bytes, sizeof got);
    if (got.magic != GROUP_MAGIC) return 0;
    *pid = (long)got.pid, *number = (unsigned long)got.number;
    return 1;
}

void dz_cuda_seam_host_comm_member(dz_cuda_comm comm, int *rank, int *nranks) {
    const struct hs_member *m = comm;
    *rank = m ? m->rank : -1, *nranks = m ? m->g->nranks : 0;
}

/* The group an id names: this process's, or a new one standing for another process's. */
static hs_group *group_of(hs_state *h, const dz_cuda_comm_id *id) {
    hs_id got;
    memcpy(&got, id->bytes, sizeof got);
    if (got.magic != GROUP_MAGIC) return hs_fail(h, DZ_CUDA_ERR_INVALID, "comm_init: not an id of comm_unique_id"), NULL;
    if (got.pid == (int64_t)getpid()) {
        if (!got.group || got.group->magic != GROUP_MAGIC)
            return hs_fail(h, DZ_CUDA_ERR_INVALID, "comm_init: id %llu of this process names no live group",
                           (unsigned long long)got.number), NULL;
        return got.group;
    }
    hs_group *g = calloc(1, sizeof *g);
    if (!g) return hs_fail(h, DZ_CUDA_ERR_MEMORY, "comm_init: out of host memory"), NULL;
    g->magic = GROUP_MAGIC, g->remote = 1;
    return g;
}

static int comm_init(dz_cuda_seam *s, dz_cuda_comm *comm, int nranks, int rank, const dz_cuda_comm_id *id) {
    hs_state *h = hs_of(s);
    *comm = NULL;
    hs_group *g = group_of(h, id);
    if (!g) return DZ_CUDA_ERR_INVALID;
    int st = DZ_CUDA_OK;
    if (nranks < 1 || nranks > HS_GROUP_MAX || (g->nranks && nranks != g->nranks))
        st = hs_fail(h, DZ_CUDA_ERR_INVALID, "comm_init: %d ranks (the group has %d; at most %d)", nranks, g->nranks,
                     HS_GROUP_MAX);
    else if (rank < 0 || rank >= nranks || g->member[rank])
        st = hs_fail(h, DZ_CUDA_ERR_INVALID, "comm_init: rank %d outside 0..%d or taken", rank, nranks - 1);
    hs_member *m = st == DZ_CUDA_OK ? calloc(1, sizeof *m) : NULL;
    if (st == DZ_CUDA_OK && !m) st = hs_fail(h, DZ_CUDA_ERR_MEMORY, "comm_init: out of host memory");
    if (st != DZ_CUDA_OK) {
        if (g->remote) free(g); /* made for this call alone */
        return st;
    }
    *m = (hs_member){.g = g, .h = h, .rank = rank};
    g->nranks = nranks, g->member[rank] = m, g->live++, g->ever++;
    *comm = m;
    return DZ_CUDA_OK;
}

/* ncclCommDestroy waits for the member's work; the group goes with its last member. */
static int comm_destroy(dz_cuda_seam *s, dz_cuda_comm comm) {
    hs_member *m = comm;
    if (!m) return DZ_CUDA_OK;
    const int status = hs_run_all(hs_of(s));
    hs_group *g = m->g;
    g->member[m->rank] = NULL;
    free(m);
    if (--g->live == 0) {
        for (size_t i = 0; i < g->n_colls; i++) free(g->colls[i].gathered);
        free(g->colls);
        g->magic = 0;
        free(g);
    }
    return status;
}

static int group_start(dz_cuda_seam *s) {
    (void)s;
    group_depth++;
    return DZ_CUDA_OK;
}

static int group_end(dz_cuda_seam *s) {
    if (group_depth == 0) return hs_fail(hs_of(s), DZ_CUDA_ERR_INVALID, "group_end without group_start");
    group_depth--;
    return DZ_CUDA_OK;
}

/* The group's collective number seq, made when its first member calls. */
static hs_collective *collective(hs_state *h, hs_group *g, uint64_t seq) {
    while (g->n_colls <= seq) {
        if (g->n_colls == g->cap_colls) {
            const size_t cap = g->cap_colls ? 2 * g->cap_colls : 16;
            hs_collective *c = realloc(g->colls, cap * sizeof *c);
            if (!c) return hs_fail(h, DZ_CUDA_ERR_MEMORY, "all_gather: out of host memory"), NULL;
            g->colls = c, g->cap_colls = cap;
        }
        memset(&g->colls[g->n_colls++], 0, sizeof *g->colls);
    }
    return &g->colls[seq];
}

/* A member whose group spans processes (joined through another process's id, or the maker
 * of an id whose other members joined elsewhere), with an exchange to reach them. */
static int is_remote(const hs_state *h, const hs_member *m) {
    return remote_exchange && m && m->h == h && m->g->nranks > 1 && (m->g->remote || m->g->ever < m->g->nranks);
}

static int gather_checks(hs_state *h, const hs_member *m, const void *send, void *recv, size_t count) {
    if (!m || m->h != h) return hs_fail(h, DZ_CUDA_ERR_INVALID, "all_gather: a communicator of another device");
    if (m->g->remote && m->g->nranks > 1 && !remote_exchange)
        return hs_fail(h, DZ_CUDA_ERR_INVALID, "all_gather: rank %d of a group made in another process: the host "
                       "seam plays the devices of one process only", m->rank);
    if (m->g->nranks > 1 && group_depth == 0 && !is_remote(h, m))
        return hs_fail(h, DZ_CUDA_ERR_INVALID, "all_gather of one of %d devices in this process outside "
                       "group_start/group_end: it would wait forever for the others", m->g->nranks);
    if (count == 0) return DZ_CUDA_OK;
    const int st = hs_check_device(h, send, count, "all_gather: send");
    return st != DZ_CUDA_OK ? st : hs_check_device(h, recv, count * (size_t)m->g->nranks, "all_gather: recv");
}

/* A member of another process's group: its stream up to the all-gather, then the slices
 * exchanged now; a call that failed still exchanges (zeros), or the other processes wait. */
static int remote_gather(hs_state *h, hs_member *m, hs_collective *c, const hs_slot *me, size_t count, int status) {
    const int n = m->g->nranks;
    unsigned char *all = calloc(count * (size_t)n + 1, 1);
    if (!all) return hs_fail(h, DZ_CUDA_ERR_MEMORY, "all_gather: out of host memory");
    if (status == DZ_CUDA_OK) status = hs_run_stream(h, me->stream, me->pos);
    if (status == DZ_CUDA_OK) memcpy(all + (size_t)m->rank * count, me->send, count);
    const int ex = remote_exchange(remote_ctx, all, count, n, m->rank);
    if (status == DZ_CUDA_OK && ex != 0)
        status = hs_fail(h, DZ_CUDA_ERR_INVALID, "all_gather: the exchange across processes failed");
    if (status == DZ_CUDA_OK && c) c->gathered = all;
    else free(all);
    return status;
}

static int all_gather(dz_cuda_seam *s, dz_cuda_comm comm, const void *send, void *recv, size_t count,
                      dz_cuda_stream st) {
    hs_state *h = hs_of(s);
    hs_member *m = comm;
    int i = 0, status = hs_stream_index(h, st, &i);
    if (status == DZ_CUDA_OK) status = gather_checks(h, m, send, recv, count);
    if (status != DZ_CUDA_OK) return is_remote(h, m) ? remote_gather(h, m, NULL, NULL, count, status) : status;
    hs_collective *c = collective(h, m->g, m->next_seq);
    if (!c) return is_remote(h, m) ? remote_gather(h, m, NULL, NULL, count, DZ_CUDA_ERR_MEMORY) : DZ_CUDA_ERR_MEMORY;
    if (c->joined && c->count != count)
        return hs_fail(h, DZ_CUDA_ERR_INVALID, "all_gather %llu: rank %d gives %zu bytes, others %zu",
                       (unsigned long long)m->next_seq, m->rank, count, c->count);
    const size_t total = count * (size_t)m->g->nranks;
    hs_op op = {.kind = HS_GATHER, .nr = 2,
                .u.gather = {.member = m, .seq = m->next_seq, .send = send, .recv = recv, .count = count}};
    op.r[0] = (hs_range){(uintptr_t)send, (uintptr_t)send + count, 0};
    op.r[1] = (hs_range){(uintptr_t)recv, (uintptr_t)recv + total, 1};
    status = hs_enqueue(h, i, &op);
    if (status != DZ_CUDA_OK) return is_remote(h, m) ? remote_gather(h, m, NULL, NULL, count, status) : status;
    const hs_stream *q = &h->streams[i];
    c->slot[m->rank] = (hs_slot){.h = h, .stream = i, .pos = q->base + q->n - 1, .send = send};
    c->count = count, c->joined++, m->next_seq++;
    return is_remote(h, m) ? remote_gather(h, m, c, &c->slot[m->rank], count, DZ_CUDA_OK) : DZ_CUDA_OK;
}

/* The rendezvous: every member's stream up to its all-gather, then the slices read. */
static int gather_slices(hs_state *h, hs_group *g, hs_collective *c, uint64_t seq) {
    if (c->joined < g->nranks)
        return hs_fail(h, DZ_CUDA_ERR_INVALID, "all_gather %llu: %d of %d ranks joined (NCCL would wait forever)",
                       (unsigned long long)seq, c->joined, g->nranks);
    int status = DZ_CUDA_OK;
    for (int r = 0; r < g->nranks; r++) {
        const int st = hs_run_stream(c->slot[r].h, c->slot[r].stream, c->slot[r].pos);
        if (status == DZ_CUDA_OK) status = st;
    }
    c->gathered = malloc(c->count * (size_t)g->nranks + 1);
    if (!c->gathered) return hs_fail(h, DZ_CUDA_ERR_MEMORY, "all_gather: out of host memory");
    for (int r = 0; r < g->nranks; r++) memcpy(c->gathered + (size_t)r * c->count, c->slot[r].send, c->count);
    return status;
}

int hs_gather_run(hs_state *h, const hs_op *op) {
    const hs_member *m = op->u.gather.member;
    hs_group *g = m->g;
    hs_collective *c = &g->colls[op->u.gather.seq];
    if (is_remote(h, m)) { /* exchanged at the call (remote_gather) */
        if (!c->gathered) return hs_fail(h, DZ_CUDA_ERR_INVALID, "all_gather: the exchange never happened");
        memcpy(op->u.gather.recv, c->gathered, c->count * (size_t)g->nranks);
        free(c->gathered);
        c->gathered = NULL;
        return DZ_CUDA_OK;
    }
    int status = c->gathered ? DZ_CUDA_OK : gather_slices(h, g, c, op->u.gather.seq);
    if (!c->gathered) return status;
    memcpy(op->u.gather.recv, c->gathered, c->count * (size_t)g->nranks);
    if (++c->consumed == g->nranks) {
        free(c->gathered);
        c->gathered = NULL;
    }
    return status;
}

void hs_nccl_api(dz_cuda_seam *s) {
    s->comm_unique_id = comm_unique_id, s->comm_init = comm_init, s->comm_destroy = comm_destroy;
    s->group_start = group_start, s->group_end = group_end, s->all_gather = all_gather;
}
