/* A step's two forwards in lockstep (DISTZO_PAIR_GEMM=1: model/forward_pair.h, each matrix's
 * w+ / w- made inside the GEMM's packing from theta) against the working copies (=0): a few
 * training steps on the tiny real-shaped models (LLaMA with GQA, OPT pre-norm), plain and
 * prompt-tree batches, v1 and v2 z, Gaussian and Rademacher, q = 1 and 2, fused and
 * unfused updates, weight decay; every instruction-set level at 1 and 2 threads. g of
 * every step and the weights after them must be bitwise the same both ways, and the pair
 * must have run (its second set of layer scratch is then in the forward's bytes). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/isa.h"
#include "core/threads.h"
#include "distzo/zo.h"

#include "zo_fixture.h"

enum { STEPS = 3 };

typedef struct run_out {
    float g[STEPS][DZ_ZO_MAX_Q];
    uint64_t weights;
    size_t forward_bytes;
} run_out;

/* One prompt per sequence of the fixture, its next-token rows scored on the prompts (a
 * tree batch whose candidates are one token: no continuation stream). */
static void tree_loss(const float *lp, const float *plp, void *user, double *out) {
    mean_nll_cb(plp, lp, user, out);
}

static dz_zo_batch tree_of(fixture *fx) {
    return (dz_zo_batch){.p_tokens = fx->tokens, .p_lengths = fx->lengths, .n_prompts = B, .PT = T,
                         .p_rows = fx->rows, .p_targets = fx->targets, .n_p_rows = fx->n_rows, .loss = tree_loss,
                         .user = fx};
}

static run_out run_steps(const char *name, const dz_zo_params *p, int tree, int pair) {
    setenv("DISTZO_PAIR_GEMM", pair ? "1" : "0", 1);
    fixture fx;
    load_batch(name, &fx);
    zo_rig r = {.m = load_owned(name, DZ_F32)};
    dz_error err = {0};
    assert_int_equal(dz_forward_create_streams(r.m, B, T, 0, tree ? 4 : 2, &r.f, &err), DZ_OK);
    assert_int_equal(dz_zo_engine_create(r.m, r.f, p, &r.e, &err), DZ_OK);
    const dz_zo_batch zb = tree ? tree_of(&fx) : batch_of(&fx, mean_nll_cb);
    run_out o;
    memset(&o, 0, sizeof o);
    for (int s = 0; s < STEPS; s++) {
        dz_zo_step_result res;
        assert_int_equal(dz_zo_step(r.e, (uint32_t)s, 1e-2f, &zb, &res, &err), DZ_OK);
        memcpy(o.g[s], res.g, sizeof res.g[0] * (size_t)p->q);
    }
    assert_int_equal(dz_zo_flush(r.e, &err), DZ_OK);
    o.weights = checksum(r.m);
    o.forward_bytes = dz_forward_bytes(r.f);
    zo_rig_close(&r);
    unsetenv("DISTZO_PAIR_GEMM");
    return o;
}

static void same_both_ways(const char *name, const dz_zo_params *p, int tree, const char *what) {
    const run_out a = run_steps(name, p, tree, 0), b = run_steps(name, p, tree, 1);
    for (int s = 0; s < STEPS; s++)
        for (int j = 0; j < p->q; j++)
            if (memcmp(&a.g[s][j], &b.g[s][j], sizeof(float)))
                fail_msg("%s: step %d sample %d: g %.9g (working copies) vs %.9g (pair)", what, s, j, a.g[s][j],
                         b.g[s][j]);
    if (a.weights != b.weights) fail_msg("%s: the weights after %d steps differ", what, STEPS);
    if (b.forward_bytes <= a.forward_bytes) fail_msg("%s: the pair did not run", what);
}

static void pair_steps_are_the_working_copies_steps(void **state) {
    (void)state;
    static const char *names[] = {"llama_gqa_untied", "opt_preln"};
    const dz_zo_params cases[] = {
        {.seed = 5, .eps = 1e-2f, .q = 1, .fuse = 1},
        {.seed = 6, .eps = 1e-2f, .q = 2, .fuse = 1, .wd = 0.1f, .rng_v2 = 1},
        {.seed = 7, .eps = 1e-2f, .q = 1, .fuse = 0, .rademacher = 1},
        {.seed = 8, .eps = 1e-2f, .q = 1, .fuse = 1, .rademacher = 1, .rng_v2 = 1},
    };
    const int n_cases = (int)(sizeof cases / sizeof cases[0]);
    int runs = 0;
    for (dz_isa isa = DZ_ISA_BASELINE; isa <= dz_isa_best(); isa++) {
        assert_int_equal(dz_isa_force(isa, NULL), DZ_OK);
        for (int threads = 1; threads <= 2; threads++) {
            dz_set_num_threads(threads);
            for (int k = 0; k < 2; k++)
                for (int c = 0; c < n_cases; c++) {
                    char what[160];
                    snprintf(what, sizeof what, "%s, case %d, %s, %d threads, %s", names[k], c, dz_isa_name(isa), threads,
                             c % 2 ? "tree batch" : "plain batch");
                    same_both_ways(names[k], &cases[c], c % 2, what);
                    runs++;
                }
        }
    }
    print_message("pair == working copies in %d runs, levels baseline to %s\n", runs, dz_isa_name(dz_isa_best()));
    assert_int_equal(dz_isa_force(DZ_ISA_AUTO, NULL), DZ_OK);
    dz_set_num_threads(0);
}

/* A bad switch is refused, naming it. */
static void a_bad_switch_is_refused(void **state) {
    (void)state;
    setenv("DISTZO_PAIR_GEMM", "yes", 1);
    dz_model *m = load_owned("opt_preln", DZ_F32);
    dz_forward *f;
    dz_zo_engine *e = NULL;
    dz_error err = {0};
    assert_int_equal(dz_forward_create_streams(m, B, T, 0, 2, &f, &err), DZ_OK);
    const dz_zo_params p = {.seed = 1, .eps = 1e-3f, .q = 1, .fuse = 1};
    assert_int_not_equal(dz_zo_engine_create(m, f, &p, &e, &err), DZ_OK);
    assert_non_null(strstr(err.msg, "DISTZO_PAIR_GEMM"));
    assert_null(e);
    unsetenv("DISTZO_PAIR_GEMM");
    dz_forward_free(f);
    dz_model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(pair_steps_are_the_working_copies_steps),
        cmocka_unit_test(a_bad_switch_is_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
