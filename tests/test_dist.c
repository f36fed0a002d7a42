/* The parallel layer without MPI: layouts and shares (src/parallel/layout.c), the
 * one-process group (src/parallel/comm.h), and the engine's contract that makes every layout
 * give the single-process step: ranks of a P x D layout, emulated one after another in
 * this process, each compute their signs on their share of the batch; their per-example
 * (loss, weight) vectors, summed, give L+ and L- bitwise equal to one engine on the whole
 * batch, with exactly one non-zero contributor per element; at every instruction-set level
 * the machine runs (core/isa.h), each giving the baseline level's step. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/isa.h"
#include "parallel/comm.h"
#include "parallel/layout.h"
#include "distzo/distzo.h"
#include "distzo/zo.h"

static void layouts_and_defaults(void **state) {
    (void)state;
    dz_error err = {0};
    dz_layout l;
    assert_int_equal(dz_layout_make(4, 3, 0, 0, &l, &err), DZ_OK); /* default: all data-parallel */
    assert_int_equal(l.p, 1);
    assert_int_equal(l.d, 4);
    assert_int_equal(l.group, 3);
    assert_int_equal(l.signs, 3);
    assert_int_equal(dz_layout_make(4, 3, 2, 0, &l, &err), DZ_OK); /* --pertp 2: D derived */
    assert_int_equal(l.d, 2);
    assert_int_equal(l.pair_index, 1);
    assert_int_equal(l.group, 1);
    assert_int_equal(l.signs, 2); /* odd ranks: -eps */
    assert_int_equal(dz_layout_make(4, 2, 0, 2, &l, &err), DZ_OK); /* --dp 2: P derived */
    assert_int_equal(l.p, 2);
    assert_int_equal(l.signs, 1);
    assert_int_equal(dz_layout_make(2, 0, 2, 1, &l, &err), DZ_OK);
    assert_int_equal(dz_layout_make(1, 0, 0, 0, &l, &err), DZ_OK);
    assert_int_equal(l.signs, 3);
    /* refused, naming the flags */
    assert_int_equal(dz_layout_make(4, 0, 3, 0, &l, &err), DZ_ERR_INVALID);
    assert_non_null(strstr(err.msg, "--pertp 3"));
    assert_int_equal(dz_layout_make(2, 0, 0, 3, &l, &err), DZ_ERR_INVALID);
    assert_non_null(strstr(err.msg, "number of ranks (2)"));
    assert_int_equal(dz_layout_make(3, 0, 2, 0, &l, &err), DZ_ERR_INVALID);
    assert_int_equal(dz_layout_make(4, 0, 0, -1, &l, &err), DZ_ERR_INVALID);
}

/* Shares are contiguous, cover 0..n-1 exactly once, and differ in size by at most 1. */
static void shares_partition(void **state) {
    (void)state;
    for (int n = 0; n <= 37; n++)
        for (int parts = 1; parts <= 9; parts++) {
            int next = 0, lo, hi, min = n, max = 0;
            for (int k = 0; k < parts; k++) {
                dz_layout_share(n, parts, k, &lo, &hi);
                assert_int_equal(lo, next);
                assert_true(hi >= lo);
                next = hi;
                min = hi - lo < min ? hi - lo : min;
                max = hi - lo > max ? hi - lo : max;
            }
            assert_int_equal(next, n);
            assert_true(max - min <= 1);
        }
}

/* Without a launcher the group is one process and every collective is the identity. */
static void one_process_group(void **state) {
    (void)state;
    dz_error err = {0};
    dz_comm *c = NULL;
    assert_int_equal(dz_comm_init(NULL, NULL, 0, 0, &c, &err), DZ_OK);
    assert_int_equal(dz_comm_size(c), 1);
    assert_int_equal(dz_comm_rank(c), 0);
    assert_int_equal(dz_comm_n_nodes(c), 1);
    assert_int_equal(dz_comm_node_size(c), 1);
    double v[3] = {1.5, -0.0, 3.25};
    assert_int_equal(dz_comm_sum_f64(c, v, 3, &err), DZ_OK);
    assert_true(v[0] == 1.5 && v[2] == 3.25);
    uint64_t lo, hi;
    assert_int_equal(dz_comm_minmax_u64(c, 42, &lo, &hi, &err), DZ_OK);
    assert_true(lo == 42 && hi == 42);
    void *mem = NULL;
    assert_int_equal(dz_comm_node_alloc(c, 1000, &mem, &err), DZ_OK);
    assert_non_null(mem);
    assert_int_equal((uintptr_t)mem % 64, 0);
    memset(mem, 7, 1000);
    assert_int_equal(dz_comm_barrier(c, &err), DZ_OK);
    assert_int_equal(dz_comm_bytes_sent(c), 0);
    dz_comm_finalize(c);
    assert_int_equal(dz_comm_init(NULL, NULL, -1, 0, &c, &err), DZ_ERR_INVALID); /* --node-size -1 */
}

/* ---- the engine's contract ---------------------------------------------------------- */

enum { NB = 6, NT = 9 }; /* global batch: 6 sequences of up to 9 tokens */

typedef struct batch_data {
    int tokens[NB * NT], lengths[NB], rows[NB * NT], targets[NB * NT], first_row[NB + 1];
    int lo, hi;  /* the share this batch holds */
    int n_rows;
} batch_data;

/* Per sequence: summed NLL of its rows and the row count (token-weighted mean). */
static void seq_losses(const float *lp, const float *plp, void *user, double *out) {
    (void)plp;
    const batch_data *b = user;
    for (int i = 0; i < b->hi - b->lo; i++) {
        double s = 0.0;
        for (int r = b->first_row[i]; r < b->first_row[i + 1]; r++) s -= lp[r];
        out[2 * i] = s, out[2 * i + 1] = b->first_row[i + 1] - b->first_row[i];
    }
}

/* Sequences [lo, hi) of the global batch laid out as a batch of their own. */
static void make_share(batch_data *b, int lo, int hi) {
    uint64_t s = 12345;
    int all[NB * NT], len[NB];
    for (int i = 0; i < NB; i++) {
        len[i] = 4 + i % 5;
        for (int t = 0; t < NT; t++) all[i * NT + t] = (int)((s = s * 6364136223846793005ULL + 1442695040888963407ULL) >> 58);
    }
    memset(b, 0, sizeof *b);
    b->lo = lo, b->hi = hi;
    for (int i = lo; i < hi; i++) {
        const int k = i - lo;
        b->lengths[k] = len[i];
        memcpy(&b->tokens[k * NT], &all[i * NT], sizeof(int) * NT);
        b->first_row[k] = b->n_rows;
        for (int t = 0; t + 1 < len[i]; t++) {
            b->rows[b->n_rows] = k * NT + t;
            b->targets[b->n_rows++] = all[i * NT + t + 1];
        }
    }
    b->first_row[hi - lo] = b->n_rows;
}

typedef struct capture {
    double *v;
    size_t n;
} capture;

/* A sum hook that keeps what this "rank" contributes (the others run later). */
static dz_status keep(void *ctx, double *buf, size_t n, dz_error *err) {
    (void)err;
    capture *c = ctx;
    c->v = malloc(n * sizeof *c->v);
    memcpy(c->v, buf, n * sizeof *c->v);
    c->n = n;
    return DZ_OK;
}

/* One step of a fresh engine (same seed, same random opt-tiny) on examples [lo, hi) with
 * the given signs; returns its result, and its contribution through the hook. */
static dz_zo_step_result run_rank(int signs, int lo, int hi, capture *cap) {
    dz_error err = {0};
    dz_config cfg;
    assert_int_equal(dz_config_preset("opt-tiny", &cfg, &err), DZ_OK);
    cfg.vocab_size = 64; /* tokens above are < 64 */
    dz_model *m = NULL;
    assert_int_equal(dz_model_init_random(&cfg, DZ_F32, 7, 0.02f, &m, &err), DZ_OK);
    dz_forward *f = NULL;
    assert_int_equal(dz_forward_create_streams(m, NB, NT, 0, 2, &f, &err), DZ_OK);
    const dz_zo_params zp = {.seed = 3, .eps = 1e-3f, .q = 2, .fuse = 1};
    dz_zo_engine *e = NULL;
    assert_int_equal(dz_zo_engine_create(m, f, &zp, &e, &err), DZ_OK);
    const dz_zo_parallel par = {.signs = signs, .sum = cap ? keep : NULL, .ctx = cap};
    assert_int_equal(dz_zo_engine_set_parallel(e, &par, &err), DZ_OK);
    batch_data b;
    make_share(&b, lo, hi);
    const dz_zo_batch zb = {.tokens = b.tokens, .lengths = b.lengths, .B = hi - lo, .T = NT, .rows = b.rows,
                            .targets = b.targets, .n_rows = b.n_rows, .loss = seq_losses, .user = &b,
                            .n_examples = hi - lo, .example0 = lo, .n_global = NB};
    dz_zo_step_result r;
    assert_int_equal(dz_zo_step(e, 0, 1e-3f, &zb, &r, &err), DZ_OK);
    dz_zo_engine_free(e);
    dz_forward_free(f);
    dz_model_free(m);
    return r;
}

/* At the level in force: every layout's summed contributions give ref's L+ and L-. */
static void layouts_give_the_step(const dz_zo_step_result ref) {
    const char *level = dz_isa_name(dz_isa_active());
    const int layouts[][2] = {{1, 2}, {2, 1}, {2, 2}, {1, 3}, {2, 3}}; /* P, D */
    for (size_t k = 0; k < sizeof layouts / sizeof *layouts; k++) {
        const int P = layouts[k][0], D = layouts[k][1], N = P * D;
        capture caps[6] = {{0}};
        for (int r = 0; r < N; r++) {
            dz_layout l;
            dz_error err = {0};
            assert_int_equal(dz_layout_make(N, r, P, D, &l, &err), DZ_OK);
            int lo, hi;
            dz_layout_share(NB, D, l.group, &lo, &hi);
            run_rank(l.signs, lo, hi, &caps[r]);
        }
        /* q 2 x 2 signs x 6 examples x (loss, weight): exactly one contributor each */
        const size_t n = caps[0].n;
        assert_int_equal(n, 2 * 2 * NB * 2);
        double *sum = calloc(n, sizeof *sum);
        for (size_t i = 0; i < n; i++) {
            int contributors = 0;
            for (int r = 0; r < N; r++) {
                contributors += caps[r].v[i] != 0.0;
                sum[i] += caps[r].v[i];
            }
            assert_int_equal(contributors, 1);
        }
        for (int j = 0; j < 2; j++) /* L = sum of losses / sum of weights, in example order */
            for (int sign = 0; sign < 2; sign++) {
                const double *x = sum + (size_t)(2 * j + sign) * 2 * NB;
                double loss = 0.0, weight = 0.0;
                for (int i = 0; i < NB; i++) loss += x[2 * i], weight += x[2 * i + 1];
                const double want = sign == 0 ? ref.loss_plus[j] : ref.loss_minus[j];
                if (loss / weight != want)
                    fail_msg("%s, P%d x D%d, sample %d, sign %d: %.17g != %.17g", level, P, D, j, sign, loss / weight,
                             want);
            }
        for (int r = 0; r < N; r++) free(caps[r].v);
        free(sum);
    }
}

static void same_result(const dz_zo_step_result *a, const dz_zo_step_result *b, const char *level) {
    for (int j = 0; j < 2; j++)
        if (a->loss_plus[j] != b->loss_plus[j] || a->loss_minus[j] != b->loss_minus[j] || a->g[j] != b->g[j])
            fail_msg("%s, sample %d: L+ %.17g L- %.17g g %.9g; baseline L+ %.17g L- %.17g g %.9g", level, j,
                     a->loss_plus[j], a->loss_minus[j], (double)a->g[j], b->loss_plus[j], b->loss_minus[j],
                     (double)b->g[j]);
}

static void layouts_give_the_single_step(void **state) {
    (void)state;
    dz_zo_step_result baseline = {0};
    for (dz_isa isa = DZ_ISA_BASELINE; isa <= dz_isa_best(); isa++) {
        assert_int_equal(dz_isa_force(isa, NULL), DZ_OK);
        const dz_zo_step_result ref = run_rank(3, 0, NB, NULL);
        assert_true(ref.finite);
        if (isa == DZ_ISA_BASELINE) baseline = ref;
        same_result(&ref, &baseline, dz_isa_name(isa));
        layouts_give_the_step(ref);
        print_message("%s: every layout gives the single step\n", dz_isa_name(isa));
    }
    assert_int_equal(dz_isa_force(DZ_ISA_AUTO, NULL), DZ_OK);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(layouts_and_defaults),
        cmocka_unit_test(shares_partition),
        cmocka_unit_test(one_process_group),
        cmocka_unit_test(layouts_give_the_single_step),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
