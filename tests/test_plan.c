/* The planner (src/parallel/plan.c): its sizes are the runtime's own (forward, engine and
 * arena bytes from the config alone equal what a real model allocates), the layouts it
 * enumerates, and its byte counts, memory sums, feasibility and recommendation against
 * hand-computed values for opt-tiny. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "distzo/plan.h"
#include "distzo/zo.h"

static dz_config preset(const char *name) {
    dz_config c;
    dz_error err = {0};
    assert_int_equal(dz_config_preset(name, &c, &err), DZ_OK);
    return c;
}

/* Forward, engine and master bytes predicted from the config alone == allocated. */
static void sizes_from_config_equal_allocated(void **state) {
    (void)state;
    const char *names[] = {"opt-tiny", "llama-tiny"};
    for (size_t k = 0; k < 2; k++) {
        dz_config c = preset(names[k]);
        c.n_layers = 2; /* small and quick; shapes are the preset's */
        dz_error err = {0};
        dz_model *m = NULL;
        assert_int_equal(dz_model_init_random(&c, DZ_F32, 1, 0.02f, &m, &err), DZ_OK);
        assert_int_equal(dz_param_table_bytes(dz_model_params(m), DZ_F32, -1), dz_model_arena_bytes(m));
        const int shapes[][4] = {{4, 9, 0, 2}, {6, 5, 0, 4}, {3, 7, 1, 1}}; /* batch, seq, kv cache, streams */
        for (size_t i = 0; i < 3; i++) {
            const int B = shapes[i][0], T = shapes[i][1], kv = shapes[i][2], ns = shapes[i][3];
            dz_forward *f = NULL;
            assert_int_equal(dz_forward_create_streams(m, B, T, kv, ns, &f, &err), DZ_OK);
            int tokens[64];
            for (int t = 0; t < B * T; t++) tokens[t] = 3 + t;
            const dz_weight_source w = dz_model_weights(m);
            assert_int_equal(dz_forward_run(f, &w, tokens, NULL, B, T, 0, &err), DZ_OK); /* takes the block scratch */
            size_t row_floats = 0;
            assert_int_equal(dz_forward_bytes_for(&c, B, T, kv, ns, 0, &row_floats), dz_forward_bytes(f));
            assert_int_equal(row_floats, dz_forward_row_floats(f));
            const dz_zo_params estimators[] = { /* what each estimator keeps counts too */
                {.seed = 1, .eps = 1e-3f, .q = 1, .fuse = 1},
                {.seed = 1, .eps = 1e-3f, .q = 1, .fuse = 1, .estimator = DZ_ZO_SPARSE, .sparse_density = 0.5f},
                {.seed = 1, .eps = 1e-3f, .q = 1, .fuse = 1, .estimator = DZ_ZO_LOZO, .lozo_rank = 3, .lozo_nu = 4},
            };
            for (size_t j = 0; ns >= 2 && j < sizeof estimators / sizeof estimators[0]; j++) {
                dz_zo_engine *e = NULL;
                assert_int_equal(dz_zo_engine_create(m, f, &estimators[j], &e, &err), DZ_OK);
                assert_int_equal(dz_zo_engine_bytes_for(dz_model_params(m), row_floats, (size_t)B * T) +
                                     dz_zo_estimator_bytes_for(dz_model_params(m), &estimators[j]),
                                 dz_zo_engine_bytes(e));
                dz_zo_engine_free(e);
            }
            dz_forward_free(f);
        }
        dz_model_free(m);
    }
}

static dz_plan_request request(int nodes, int rpn, double mem_mb) {
    dz_plan_request r;
    dz_plan_request_default(&r);
    r.cfg = preset("opt-tiny");
    r.nodes = nodes, r.ranks_per_node = rpn;
    r.mem_per_node = mem_mb * 1048576.0;
    r.seq = 24;
    r.threads = 2;
    r.overhead = 10.0 * 1048576, r.overhead_mpi = 20.0 * 1048576;
    return r;
}

/* N = P x D with P in {1, 2} dividing N. */
static void layouts_enumerated(void **state) {
    (void)state;
    dz_error err = {0};
    dz_plan p;
    const int cases[][3] = {{1, 1, 1}, {1, 3, 1}, {2, 2, 2}, {3, 1, 1}, {1, 6, 2}}; /* nodes, ranks per node, layouts */
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        dz_plan_request r = request(cases[i][0], cases[i][1], 4096);
        assert_int_equal(dz_plan_make(&r, &p, &err), DZ_OK);
        assert_int_equal(p.count, cases[i][2]);
        const int n = cases[i][0] * cases[i][1];
        for (int k = 0; k < p.count; k++) {
            assert_int_equal(p.l[k].n, n);
            assert_int_equal(p.l[k].p, k + 1);
            assert_int_equal(p.l[k].p * p.l[k].d, n);
            assert_int_equal(p.l[k].signs, k == 0 ? 2 : 1);
        }
    }
}

/* Bytes per step: one allreduce of q x 2 signs x B (loss, weight) doubles = 32 q B. */
static void bytes_per_step_by_hand(void **state) {
    (void)state;
    dz_error err = {0};
    dz_plan p;
    dz_plan_request r = request(2, 2, 4096);
    r.batch = 16, r.q = 2;
    assert_int_equal(dz_plan_make(&r, &p, &err), DZ_OK);
    for (int k = 0; k < p.count; k++) {
        assert_true(p.l[k].payload_per_rank == 1024.0);      /* 32 x 2 x 16 */
        assert_true(p.l[k].wire_per_rank == 1536.0);         /* ring: 2 (N-1)/N x payload */
        assert_true(p.l[k].wire_total == 6144.0);
        assert_int_equal(p.l[k].barriers, 2 * 2 + 2);        /* shared by 2 ranks: around each block's fill */
    }
    r = request(1, 1, 4096);
    assert_int_equal(dz_plan_make(&r, &p, &err), DZ_OK);
    assert_true(p.l[0].payload_per_rank == 0.0 && p.l[0].wire_total == 0.0);
    assert_int_equal(p.l[0].barriers, 0);
    r = request(4, 1, 4096); /* one rank per node: own masters, no barriers */
    assert_int_equal(dz_plan_make(&r, &p, &err), DZ_OK);
    assert_int_equal(p.l[0].barriers, 0);
    assert_int_equal(p.l[0].shared_masters, 0);
}

/* HiZOO against MeZO on the same request, by hand: 4 bytes of curvature a parameter in the
 * engine (opt-tiny: 3,448,704 of them), 3 forwards a step where MeZO runs 2 (P = 1: 1.5x
 * the GFLOP; P = 2: 2x), L0's loss pairs exchanged too, and no shared masters. */
static void hizoo_by_hand(void **state) {
    (void)state;
    dz_error err = {0};
    dz_plan mezo, hizoo;
    dz_plan_request r = request(1, 2, 4096);
    r.batch = 16;
    assert_int_equal(dz_plan_make(&r, &mezo, &err), DZ_OK);
    r.estimator = DZ_ZO_HIZOO;
    assert_int_equal(dz_plan_make(&r, &hizoo, &err), DZ_OK);
    assert_int_equal(mezo.count, hizoo.count);
    for (int k = 0; k < hizoo.count; k++) {
        const dz_plan_layout *a = &mezo.l[k], *b = &hizoo.l[k];
        assert_int_equal(a->shared_masters, 1);
        assert_int_equal(b->shared_masters, 0);
        assert_true(b->engine - a->engine - a->node_work == 4.0 * 3448704);
        assert_true(fabs(b->gflop_per_rank / a->gflop_per_rank - (a->p == 1 ? 1.5 : 2.0)) < 1e-12);
        assert_true(b->payload_per_rank == 2 * a->payload_per_rank);
    }
}

/* FZOO (N = 4) against MeZO (q = 1) by hand: N + 1 = 5 one-sided forwards a step, so
 * P = 1 is 5 / 2 MeZO's GFLOP; under P = 2 the pair splits the 5 passes (3 on the larger
 * share) where MeZO's rank runs 1, each rank a replica (no shared masters); both feasible. */
static void fzoo_by_hand(void **state) {
    (void)state;
    dz_error err = {0};
    dz_plan mezo, fzoo;
    dz_plan_request r = request(1, 2, 4096);
    r.batch = 16;
    assert_int_equal(dz_plan_make(&r, &mezo, &err), DZ_OK);
    r.estimator = DZ_ZO_FZOO, r.q = 4;
    assert_int_equal(dz_plan_make(&r, &fzoo, &err), DZ_OK);
    assert_int_equal(mezo.count, fzoo.count);
    for (int k = 0; k < fzoo.count; k++) {
        const dz_plan_layout *a = &mezo.l[k], *b = &fzoo.l[k];
        assert_int_equal(a->p, b->p);
        assert_true(b->feasible);
        assert_int_equal(b->shared_masters, b->p == 1);
        assert_true(fabs(b->gflop_per_rank / a->gflop_per_rank - (b->p == 1 ? 2.5 : 3.0)) < 1e-12);
    }
}

/* HiZOO-L by hand on opt-tiny: a layer's q, k, v, o (64 x 64) keep 64 + 64 + 1 floats each,
 * fc1 (256 x 64) and fc2 (64 x 256) 321 each, its biases and norms (832) one each: 1,990;
 * the embedding 50272 + 64 + 1, the positions 2050 + 64 + 1, the final norm 128: 56,560
 * floats, and the column sums 2 x (4 x 64 + 64 + 256) + 64 + 64 = 1,280 doubles. */
static void hizoo_lowrank_by_hand(void **state) {
    (void)state;
    dz_error err = {0};
    dz_plan mezo, low;
    dz_plan_request r = request(1, 1, 4096);
    assert_int_equal(dz_plan_make(&r, &mezo, &err), DZ_OK);
    r.estimator = DZ_ZO_HIZOO, r.hizoo_rank = 1;
    assert_int_equal(dz_plan_make(&r, &low, &err), DZ_OK);
    assert_true(low.l[0].engine - mezo.l[0].engine == 56560.0 * 4 + 1280.0 * 8);
}

/* opt-tiny: 2 layers of 49,984 parameters, token embedding 50272 x 64 (tied head),
 * positions 2050 x 64, final norm 2 x 64: 3,448,704 floats, each tensor a multiple of
 * 64 bytes, so the arena is 13,794,816 bytes. */
static void memory_sums_by_hand(void **state) {
    (void)state;
    dz_error err = {0};
    dz_plan p;
    dz_plan_request r = request(1, 2, 4096);
    assert_int_equal(dz_plan_make(&r, &p, &err), DZ_OK);
    const dz_plan_layout *L = &p.l[0];
    assert_true(L->masters == 13794816.0);
    assert_true(L->load_extra == 50272.0 * 64 * 4); /* the embedding's file pages while it is copied */
    assert_int_equal(L->shared_masters, 1);
    assert_true(L->overhead == 20.0 * 1048576);
    const double work = L->forward + L->engine;
    assert_true(work > L->load_extra);
    assert_true(L->node_work == 2.0 * 49984 * 4); /* w+ and w- of one layer, once per node */
    assert_true(L->rank_peak == L->overhead + L->masters + L->node_work + work);
    assert_true(L->node_peak == L->masters + L->node_work + 2 * (L->overhead + work)); /* shared once */
    assert_true(L->updated == 3448704.0 / 2);                           /* each rank updates half */
    /* the local batch: ceil(B / D) examples x 2 labels, or the eval batch of 64 */
    assert_int_equal(L->local_batch, 8);
    assert_true(L->forward == (double)dz_forward_bytes_for(&r.cfg, 64, 24, 0, 4, 2, NULL));
    /* LOZO keeps V (cols x rank) of two windows for every matrix: per layer q, k, v, o and
     * fc1 have 64 columns, fc2 256; the token and position embeddings 64 each (the head is tied) */
    const double mezo_engine = L->engine;
    r.estimator = DZ_ZO_LOZO, r.lozo_rank = 3;
    assert_int_equal(dz_plan_make(&r, &p, &err), DZ_OK);
    assert_true(p.l[0].engine - mezo_engine == 2.0 * 3 * (2 * (5 * 64 + 256) + 2 * 64) * 4);
    r.estimator = DZ_ZO_SPARSE; /* a mask from the weights: nothing kept */
    assert_int_equal(dz_plan_make(&r, &p, &err), DZ_OK);
    assert_true(p.l[0].engine == mezo_engine);
    /* disk store: only the global block resident, plus the second pair of working copies
     * of the largest layer and the 8 MB chunk buffer (f32); one process */
    r = request(1, 1, 4096);
    r.disk_store = 1;
    assert_int_equal(dz_plan_make(&r, &p, &err), DZ_OK);
    assert_true(p.l[0].masters == (50272.0 * 64 + 2050.0 * 64 + 128) * 4);
    assert_true(p.l[0].store_bufs == 2 * 49984.0 * 4 + 64 * 32768 * 4);
    assert_true(p.l[0].feasible);
    r = request(1, 2, 4096);
    r.disk_store = 1;
    assert_int_equal(dz_plan_make(&r, &p, &err), DZ_OK);
    assert_false(p.l[0].feasible);
    assert_non_null(strstr(p.l[0].why, "--store disk"));
    assert_int_equal(p.best, -1);
}

static void feasibility_and_recommendation(void **state) {
    (void)state;
    dz_error err = {0};
    dz_plan p;
    dz_plan_request r = request(1, 4, 4096);
    r.batch = 16; /* P1 x D4 (2 signs x 4 examples) ties P2 x D2 (1 sign x 8): the smaller P */
    assert_int_equal(dz_plan_make(&r, &p, &err), DZ_OK);
    assert_true(fabs(p.l[0].gflop_per_rank - p.l[1].gflop_per_rank) < 1e-9 * p.l[0].gflop_per_rank);
    assert_int_equal(p.best, 0);
    r.batch = 6; /* D4: shares of 2 x 2 signs = 4 forward-examples; D2: 3 x 1 sign = 3 */
    assert_int_equal(dz_plan_make(&r, &p, &err), DZ_OK);
    assert_int_equal(p.l[0].local_batch, 2);
    assert_int_equal(p.l[1].local_batch, 3);
    assert_true(p.l[1].gflop_per_rank < p.l[0].gflop_per_rank);
    assert_int_equal(p.best, 1);
    r.batch = 3; /* 4 data-parallel groups need 4 examples */
    assert_int_equal(dz_plan_make(&r, &p, &err), DZ_OK);
    assert_false(p.l[0].feasible);
    assert_non_null(strstr(p.l[0].why, "--batch 3"));
    assert_true(p.l[1].feasible);
    assert_int_equal(p.best, 1);
    r = request(1, 2, 50); /* 50 MB cannot hold two ranks' working sets */
    assert_int_equal(dz_plan_make(&r, &p, &err), DZ_OK);
    assert_false(p.l[0].feasible);
    assert_non_null(strstr(p.l[0].why, "--mem-per-node"));
    assert_int_equal(p.best, -1);
}

static void bad_requests_name_the_flag(void **state) {
    (void)state;
    dz_error err = {0};
    dz_plan p;
    struct { const char *flag; int field; } cases[] = {{"--nodes", 0}, {"--ranks-per-node", 1}, {"--batch", 2},
                                                      {"--seq", 3}, {"--labels", 4}, {"--spsa-samples", 5}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        dz_plan_request r = request(1, 1, 4096);
        int *fields[] = {&r.nodes, &r.ranks_per_node, &r.batch, &r.seq, &r.labels, &r.q};
        *fields[cases[i].field] = 0;
        memset(&err, 0, sizeof err);
        assert_int_not_equal(dz_plan_make(&r, &p, &err), DZ_OK);
        assert_non_null(strstr(err.msg, cases[i].flag));
    }
    dz_plan_request r = request(1, 1, 0);
    assert_int_not_equal(dz_plan_make(&r, &p, &err), DZ_OK);
    assert_non_null(strstr(err.msg, "--mem-per-node"));
    r = request(1, 1, 4096);
    r.seq = 5000; /* OPT's learned positions stop at 2048 */
    assert_int_not_equal(dz_plan_make(&r, &p, &err), DZ_OK);
    assert_non_null(strstr(err.msg, "--seq 5000"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(sizes_from_config_equal_allocated),
        cmocka_unit_test(layouts_enumerated),
        cmocka_unit_test(bytes_per_step_by_hand),
        cmocka_unit_test(hizoo_by_hand),
        cmocka_unit_test(fzoo_by_hand),
        cmocka_unit_test(hizoo_lowrank_by_hand),
        cmocka_unit_test(memory_sums_by_hand),
        cmocka_unit_test(feasibility_and_recommendation),
        cmocka_unit_test(bad_requests_name_the_flag),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
