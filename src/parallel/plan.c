/* The layout planner: see plan.h and docs/PLANNER.md. */
#include "distzo/plan.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "distzo/zo.h"
#include "parallel/layout.h"

void dz_plan_request_default(dz_plan_request *r) {
    memset(r, 0, sizeof *r);
    r->nodes = r->ranks_per_node = 1;
    r->master = DZ_F32;
    r->batch = 16;
    r->labels = 2;
    r->q = 1;
    r->lozo_rank = 2;
    r->eval_batch = 64;
    r->share_prompts = 1;
    r->overhead = DZ_PLAN_OVERHEAD_MB * 1048576.0;
    r->overhead_mpi = DZ_PLAN_OVERHEAD_MPI_MB * 1048576.0;
}

/* Parameter counts by where the engine touches them. */
typedef struct table_sums {
    double layers;         /* every layer block */
    double head;           /* the head as the ZO step streams it (tied: the token embedding) */
    double small_globals;  /* final norm, projections: read whole */
    double all;
    double largest_tensor; /* bytes in the master dtype, aligned */
} table_sums;

static table_sums sums_of(const dz_param_table *t, const dz_config *c, dz_dtype master) {
    table_sums s = {0};
    for (int i = 0; i < t->count; i++) {
        const dz_param *p = &t->params[i];
        const double n = (double)dz_param_numel(p);
        const double bytes = (double)dz_param_table_bytes(&(dz_param_table){1, (dz_param *)p}, master, -1);
        s.all += n;
        if (bytes > s.largest_tensor) s.largest_tensor = bytes;
        if (p->block < c->n_layers) {
            s.layers += n;
        } else if (p->role == DZ_G_LM_HEAD || (c->tied_head && p->role == DZ_G_TOK_EMB)) {
            s.head += n;
        } else if (p->role != DZ_G_TOK_EMB && p->role != DZ_G_POS_EMB) {
            s.small_globals += n; /* embeddings are read a row per token: negligible */
        }
    }
    return s;
}

/* Forward FLOPs of one sign over `examples` examples: with shared prompts each prompt
 * (seq - 1 tokens) runs once and its `labels` one-token candidates continue it, the head
 * scoring one prompt row per candidate; else every candidate is a full sequence. */
static double sign_flops(const dz_plan_request *r, int examples) {
    const int cands = examples * r->labels;
    if (!r->share_prompts) return dz_forward_flops(&r->cfg, cands, r->seq, cands);
    const int pt = r->seq > 1 ? r->seq - 1 : 1;
    return dz_forward_flops(&r->cfg, examples, pt, cands) + dz_forward_flops(&r->cfg, cands, 1, 0);
}

static void fill_layout(const dz_plan_request *r, const dz_param_table *t, const table_sums *s, dz_plan_layout *L) {
    const int n = L->n, R = r->ranks_per_node;
    L->local_batch = (r->batch + L->d - 1) / L->d; /* the critical path: the largest share */
    L->signs = L->p == 1 ? 2 : 1;
    const int hizoo = r->estimator == DZ_ZO_HIZOO; /* a third forward (L0); a curvature state per replica */
    const int fzoo = r->estimator == DZ_ZO_FZOO;   /* under --pertp 2 each rank its own directions: a replica */
    L->shared_masters = !r->disk_store && R > 1 && !hizoo && !(fzoo && L->p > 1);
    /* memory: what the trainer's setup() allocates for this rank's share */
    const int rows = L->local_batch * r->labels, max_batch = rows > r->eval_batch ? rows : r->eval_batch;
    size_t row_floats = 0;
    L->forward = (double)dz_forward_bytes_for(&r->cfg, max_batch, r->seq, 0, r->share_prompts ? 4 : 2, r->threads,
                                              &row_floats);
    const dz_zo_params est = {.q = r->q, .estimator = r->estimator, .lozo_rank = r->lozo_rank, .lozo_nu = 1,
                                .hizoo_rank = r->hizoo_rank};
    L->engine = (double)dz_zo_engine_bytes_for(t, row_floats, (size_t)max_batch * r->seq) +
                (double)dz_zo_estimator_bytes_for(t, &est);
    /* with shared masters the node's ranks also share one pair of working copies */
    L->node_work = L->shared_masters ? (double)dz_zo_engine_bytes_for(t, 0, 0) : 0.0;
    L->engine -= L->node_work;
    L->overhead = n > 1 ? r->overhead_mpi : r->overhead;
    L->masters = (double)dz_param_table_bytes(t, r->master, r->disk_store ? r->cfg.n_layers : -1);
    L->store_bufs = r->disk_store ? (double)dz_zo_store_bytes_for(t, r->master) : 0.0;
    L->load_extra = s->largest_tensor; /* the file pages of the tensor being copied in at load */
    const double work = L->forward + L->engine + L->store_bufs;
    L->rank_peak = L->overhead + L->masters + L->node_work + (work > L->load_extra ? work : L->load_extra);
    if (L->shared_masters) { /* the node's leader copies in before anyone allocates working buffers */
        const double all_work = R * work;
        L->node_peak = L->masters + L->node_work + R * L->overhead +
                       (all_work > L->load_extra ? all_work : L->load_extra);
    } else {
        L->node_peak = R * L->rank_peak;
    }
    /* FZOO: q + 1 passes (l0 and one per direction), each one +eps forward, split over the
     * P ranks of a pair (the larger share); HiZOO: the L0 pass (one forward a rank) then the
     * pair, its pairs in 4 slots; else q of both signs */
    const double fzoo_share = ceil((r->q + 1.0) / L->p);
    const double passes = fzoo ? fzoo_share : hizoo ? 2 : r->q, slots = fzoo ? r->q + 1 : hizoo ? 4 : 2 * r->q;
    const double forwards = fzoo ? fzoo_share : hizoo ? L->signs + 1 : r->q * L->signs;
    /* per step: one allreduce of slots x B (loss, weight) doubles */
    if (n > 1) {
        L->payload_per_rank = 8.0 * slots * 2 * r->batch;
        L->wire_per_rank = 2.0 * (n - 1) / n * L->payload_per_rank;
        L->wire_total = n * L->wire_per_rank;
    }
    L->barriers = L->shared_masters ? 2 * r->cfg.n_layers + 2 : 0; /* around each block's sliced fill */
    L->gflop_per_rank = forwards * sign_flops(r, L->local_batch) / 1e9;
    /* w+ and w- whatever the signs; a node's ranks split the layers' working copies */
    L->perturbed = passes * 2.0 * (s->layers / (L->shared_masters ? R : 1) + s->head + s->small_globals);
    L->updated = ceil(s->all / (L->shared_masters ? R : 1));
    /* feasibility */
    L->feasible = 1;
    if (r->disk_store && n > 1)
        snprintf(L->why, sizeof L->why, "--store disk runs in one process today (%d ranks asked)", n);
    else if (r->batch < L->d)
        snprintf(L->why, sizeof L->why, "--batch %d is smaller than the %d data-parallel groups", r->batch, L->d);
    else if (L->node_peak > r->mem_per_node)
        snprintf(L->why, sizeof L->why, "needs %.0f MB per node, more than --mem-per-node %.0f MB",
                 L->node_peak / 1048576.0, r->mem_per_node / 1048576.0);
    else
        L->why[0] = '\0';
    L->feasible = L->why[0] == '\0';
}

/* a before b: less work on the critical path, then fewer elements touched, bytes on the
 * wire, memory per rank, then the smaller P (fewer ranks depend on each other). */
static int better(const dz_plan_layout *a, const dz_plan_layout *b) {
    const double keys[][2] = {{a->gflop_per_rank, b->gflop_per_rank},
                              {a->perturbed + a->updated, b->perturbed + b->updated},
                              {a->wire_per_rank, b->wire_per_rank},
                              {a->rank_peak, b->rank_peak},
                              {a->p, b->p}};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        const double x = keys[i][0], y = keys[i][1], tol = 1e-9 * (fabs(x) > fabs(y) ? fabs(x) : fabs(y));
        if (x < y - tol) return 1;
        if (y < x - tol) return 0;
    }
    return 0;
}

dz_status dz_plan_make(const dz_plan_request *r, dz_plan *out, dz_error *err) {
    memset(out, 0, sizeof *out);
    out->best = -1;
    const struct { const char *flag; int v, lo; } ints[] = {
        {"--nodes", r->nodes, 1}, {"--ranks-per-node", r->ranks_per_node, 1}, {"--batch", r->batch, 1},
        {"--seq", r->seq, 2} /* a prompt token and a label's */, {"--labels", r->labels, 1}, {"--spsa-samples", r->q, 1}};
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
        if (ints[i].v < ints[i].lo)
            return dz_fail(err, DZ_ERR_INVALID, "%s %d: must be at least %d", ints[i].flag, ints[i].v, ints[i].lo);
    if (!(r->mem_per_node > 0) || !isfinite(r->mem_per_node))
        return dz_fail(err, DZ_ERR_INVALID, "--mem-per-node must be a positive number of GB");
    if ((long long)r->nodes * r->ranks_per_node > 1 << 20)
        return dz_fail(err, DZ_ERR_INVALID, "--nodes %d x --ranks-per-node %d: too many ranks", r->nodes,
                       r->ranks_per_node);
    if (r->master != DZ_F32 && r->master != DZ_BF16)
        return dz_fail(err, DZ_ERR_INVALID, "--master-dtype: master weights are f32 or bf16");
    if (r->cfg.pos_offset > 0 && r->seq > r->cfg.max_seq_len)
        return dz_fail(err, DZ_ERR_INVALID, "--seq %d exceeds the model's %d learned positions", r->seq,
                       r->cfg.max_seq_len);
    dz_param_table t;
    dz_status st = dz_param_table_build(&r->cfg, &t, err);
    if (st != DZ_OK) return st;
    const table_sums s = sums_of(&t, &r->cfg, r->master);
    const int n = r->nodes * r->ranks_per_node;
    for (int p = 1; p <= 2; p++) {
        dz_layout lay;
        if (n % p != 0 || dz_layout_make(n, 0, p, n / p, &lay, NULL) != DZ_OK) continue;
        dz_plan_layout *L = &out->l[out->count++];
        L->n = n, L->p = lay.p, L->d = lay.d;
        fill_layout(r, &t, &s, L);
        if (L->feasible && (out->best < 0 || better(L, &out->l[out->best]))) out->best = out->count - 1;
    }
    dz_param_table_free(&t);
    return DZ_OK;
}
