/* The CUDA backend's attention op (backend/cuda/cuda_attention.h: the flash-style kernel
 * of attention_element.h) through the CUDA seam's host implementation, which runs the
 * kernel's element code block by block and checks every buffer it reads:
 *  - against the reference backend within 1e-5 relative, on every case of
 *    tests/cuda_attention_cases.h: head_dim 8, 16 and 64; 4 query heads on 4, 2 and 1 kv
 *    heads; padding rows; tree batches (continuations reading another sequence's slot
 *    below their start); packed rows (row0); 300 keys (ten key tiles) and 300 query rows;
 *    and head_dim 100 and 256 on the tree batch (the kernel's larger row arrays);
 *  - the comparison catches a wrong result: a scale off by 1e-3, a prefix read from the
 *    wrong slot, a length one short;
 *  - the host arrays of the args may change as soon as the op returns, and back-to-back
 *    calls that grow the instance's staging give right results with no hazard;
 *  - the staging is allocated by the first call and by a larger batch only, never per call;
 *    a grow whose host_free fails still frees the old device array;
 *  - key rows outside their slot, q shorter than its rows, and launches the kernel cannot
 *    run fail, kept as the instance's status, and nothing is written. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "backend/cuda/cuda_attention.h" /* DZ_ATTN_STAGE_SLOTS */
#include "backend/cuda/cuda_backend.h"
#include "cuda_attention_cases.h"

/* A CUDA backend instance over a fresh host seam (its own: freed with it). */
static dz_backend *instance(dz_cuda_seam **seam_out) {
    dz_cuda_seam *s = dz_cuda_seam_host_create();
    assert_non_null(s);
    dz_backend *be = NULL;
    dz_error err = {0};
    assert_int_equal(dz_backend_cuda_create_on(s, 1, &be, &err), DZ_OK);
    assert_non_null(be->ops->attention);
    if (seam_out) *seam_out = s;
    return be;
}

static void assert_clean(const dz_backend *be, const dz_cuda_seam *s) {
    char msg[256];
    const int st = dz_backend_cuda_status(be, msg, sizeof msg);
    if (st != DZ_CUDA_OK) fail_msg("the instance's status is %d: %s", st, msg);
    assert_int_equal(dz_cuda_seam_host_hazards(s), 0);
}

static void every_case_matches_the_reference(void **st) {
    (void)st;
    dz_cuda_seam *s = NULL;
    dz_backend *be = instance(&s);
    const double worst = attn_every_case_matches_ref(be, NULL);
    print_message("host seam: worst relative error %.3g against the reference\n", worst);
    dz_cuda_seam *s2 = NULL;
    dz_backend *twin = instance(&s2); /* the twin check test_cuda_gpu makes against a GPU */
    attn_case_check(be, twin, &attn_layouts[2], 16, 2);
    assert_clean(be, s);
    assert_clean(twin, s2);
    dz_backend_free(be);
    dz_backend_free(twin);
}

/* Layout `name`'s case with one thing of the instance's args changed: its error. */
static double tweaked(const char *name, int what) {
    const attn_layout *lay = NULL;
    for (size_t l = 0; l < sizeof attn_layouts / sizeof attn_layouts[0]; l++)
        if (strcmp(attn_layouts[l].name, name) == 0) lay = &attn_layouts[l];
    assert_non_null(lay);
    dz_cuda_seam *s = NULL;
    dz_backend *be = instance(&s);
    attn_run r;
    attn_case_make(&r, be, lay, 16, 2);
    if (what == 1) r.args.scale *= 1.001f;
    if (what == 2) r.pk[1] = r.dk[1], r.pv[1] = r.dv[1]; /* its own slot, not the prompt's */
    if (what == 3) r.lengths[2] -= 1;                    /* a real row taken for padding */
    be->ops->attention(be, r.dout, r.dq, &r.args);
    const double e = attn_case_error(&r, be);
    assert_clean(be, s);
    attn_case_free(&r, be);
    dz_backend_free(be);
    return e;
}

static void wrong_results_are_detected(void **st) {
    (void)st;
    assert_true(tweaked("tree batch", 0) <= ATTN_TOL); /* the same harness, untouched: passes */
    for (int what = 1; what <= 3; what++) {
        const double e = tweaked("tree batch", what);
        if (!(e > ATTN_TOL)) fail_msg("change %d went unnoticed: relative error %.3g", what, e);
    }
}

/* Scribbles over the host arrays the args point to (the op must have copied them). */
static void scribble(attn_run *r) {
    for (int b = 0; b < r->lay->batch; b++) {
        r->start[b] = -7, r->lengths[b] = 1 << 30, r->row0[b] = -3;
        r->pk[b] = r->pv[b] = r->ok[b] = r->ov[b] = NULL;
    }
}

/* Calls before any synchronize, more of them than the staging has slots, the second with
 * a larger batch (the staging grows): each call's host arrays scribbled over as soon as it
 * returns. A slot refilled before the device took what it held would change an upload's
 * source (a hazard) or a launch's sequences. */
static void back_to_back_calls_keep_their_own_args(void **st) {
    (void)st;
    enum { CALLS = DZ_ATTN_STAGE_SLOTS + 2 };
    static const int layout[CALLS] = {3, 1, 2, 0, 1, 2}, hd[CALLS] = {8, 16, 64, 16, 8, 16};
    static const int kv[CALLS] = {4, 1, 2, 2, 4, 1};
    dz_cuda_seam *s = NULL;
    dz_backend *be = instance(&s);
    attn_run runs[CALLS];
    for (int i = 0; i < CALLS; i++) attn_case_make(&runs[i], be, &attn_layouts[layout[i]], hd[i], kv[i]);
    for (int i = 0; i < CALLS; i++) {
        be->ops->attention(be, runs[i].dout, runs[i].dq, &runs[i].args);
        scribble(&runs[i]);
    }
    for (int i = 0; i < CALLS; i++) {
        const double e = attn_case_error(&runs[i], be);
        if (!(e <= ATTN_TOL)) fail_msg("call %d: relative error %.3g", i, e);
    }
    assert_clean(be, s);
    for (int i = 0; i < CALLS; i++) attn_case_free(&runs[i], be);
    dz_backend_free(be);
}

/* The seam's allocations, counted: its dev_alloc and host_alloc wrapped. */
static int allocations;
static int (*real_dev_alloc)(dz_cuda_seam *, void **, size_t), (*real_host_alloc)(dz_cuda_seam *, void **, size_t);
static int counted_dev_alloc(dz_cuda_seam *s, void **p, size_t n) { return allocations++, real_dev_alloc(s, p, n); }
static int counted_host_alloc(dz_cuda_seam *s, void **p, size_t n) { return allocations++, real_host_alloc(s, p, n); }

static int attention_allocations(const dz_backend *be, attn_run *r) {
    const int before = allocations;
    be->ops->attention(be, r->dout, r->dq, &r->args);
    return allocations - before;
}

static void the_staging_is_allocated_once(void **st) {
    (void)st;
    dz_cuda_seam *s = NULL;
    dz_backend *be = instance(&s);
    real_dev_alloc = s->dev_alloc, real_host_alloc = s->host_alloc;
    s->dev_alloc = counted_dev_alloc, s->host_alloc = counted_host_alloc;
    attn_run small, big;
    attn_case_make(&small, be, &attn_layouts[3], 8, 2); /* 2 sequences */
    attn_case_make(&big, be, &attn_layouts[1], 8, 2);   /* 4 */
    assert_int_equal(attention_allocations(be, &small), 2); /* the host ring and the device array */
    for (int i = 0; i < 2 * DZ_ATTN_STAGE_SLOTS; i++) assert_int_equal(attention_allocations(be, &small), 0);
    assert_int_equal(attention_allocations(be, &big), 2); /* grown */
    for (int i = 0; i < 2 * DZ_ATTN_STAGE_SLOTS; i++) {
        assert_int_equal(attention_allocations(be, &big), 0);
        assert_int_equal(attention_allocations(be, &small), 0);
    }
    assert_true(attn_case_error(&small, be) <= ATTN_TOL && attn_case_error(&big, be) <= ATTN_TOL);
    assert_clean(be, s);
    attn_case_free(&small, be), attn_case_free(&big, be);
    dz_backend_free(be);
}

/* A grow whose host_free fails still frees the old device array (its pointer is dropped),
 * and the instance keeps the failure. */
static int dev_frees;
static int (*real_host_free)(dz_cuda_seam *, void *), (*real_dev_free)(dz_cuda_seam *, void *);
static int failing_host_free(dz_cuda_seam *s, void *p) { return real_host_free(s, p), DZ_CUDA_ERR_RUNTIME; }
static int counted_dev_free(dz_cuda_seam *s, void *p) { return dev_frees++, real_dev_free(s, p); }

static void a_failed_grow_frees_the_old_staging(void **st) {
    (void)st;
    dz_cuda_seam *s = NULL;
    dz_backend *be = instance(&s);
    attn_run small, big;
    attn_case_make(&small, be, &attn_layouts[3], 8, 2); /* 2 sequences */
    attn_case_make(&big, be, &attn_layouts[1], 8, 2);   /* 4: the staging grows */
    be->ops->attention(be, small.dout, small.dq, &small.args);
    real_host_free = s->host_free, real_dev_free = s->dev_free;
    s->host_free = failing_host_free, s->dev_free = counted_dev_free;
    dev_frees = 0;
    be->ops->attention(be, big.dout, big.dq, &big.args);
    assert_int_equal(dev_frees, 1);
    assert_int_equal(dz_backend_cuda_status(be, NULL, 0), DZ_CUDA_ERR_RUNTIME);
    s->host_free = real_host_free, s->dev_free = real_dev_free;
    attn_case_free(&small, be), attn_case_free(&big, be);
    dz_backend_free(be);
}

/* The tree case with the instance's args changed by `what`: the status it ends with
 * (message in msg), and whether out was left as it was. */
static int failing(int what, char *msg, size_t cap, int *untouched) {
    dz_backend *be = instance(NULL);
    attn_run r;
    attn_case_make(&r, be, &attn_layouts[1], 8, 2);
    const size_t kv_row = (size_t)r.kv * r.hd;
    float *short_q = attn_upload(be, r.q, r.out_floats - (size_t)r.heads * r.hd); /* a row short */
    const float *q = r.dq;
    if (what == 0) r.pk[1] = r.dk[0] + kv_row;        /* prefix positions 1 .. 9 of a 9-position slot */
    if (what == 1) r.ok[2] = r.dk[2] + kv_row;        /* own keys one position past the slot */
    if (what == 2) q = short_q;                       /* q smaller than its rows */
    if (what == 3) r.args.head_dim = 300;             /* no kernel runs such a head */
    if (what == 4) r.args.n_kv_heads = 3;             /* 4 query heads on 3 kv heads */
    be->ops->attention(be, r.dout, q, &r.args);
    be->ops->synchronize(be);
    const int status = dz_backend_cuda_status(be, msg, cap);
    float *after = attn_floats(r.out_floats);
    be->ops->download(be, after, r.dout, sizeof(float) * r.out_floats);
    memset(r.got, ATTN_GARBAGE, sizeof(float) * r.out_floats);
    *untouched = memcmp(after, r.got, sizeof(float) * r.out_floats) == 0;
    free(after);
    be->ops->free(be, short_q);
    attn_case_free(&r, be);
    dz_backend_free(be);
    return status;
}

static void overruns_and_bad_launches_fail(void **st) {
    (void)st;
    static const struct {
        int status;
        const char *says;
    } want[] = {{DZ_CUDA_ERR_OVERRUN, "sequence 1's prefix keys"},
                {DZ_CUDA_ERR_OVERRUN, "sequence 2's own keys"},
                {DZ_CUDA_ERR_OVERRUN, "attention: q"},
                {DZ_CUDA_ERR_INVALID, "head_dim"},
                {DZ_CUDA_ERR_INVALID, "n_kv_heads"}};
    for (int what = 0; what < 5; what++) {
        char msg[256];
        int untouched = 0;
        const int status = failing(what, msg, sizeof msg, &untouched);
        if (status != want[what].status || !strstr(msg, want[what].says))
            fail_msg("case %d: status %d (%s), want %d saying \"%s\"", what, status, msg, want[what].status,
                     want[what].says);
        assert_true(untouched);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_case_matches_the_reference),
        cmocka_unit_test(wrong_results_are_detected),
        cmocka_unit_test(back_to_back_calls_keep_their_own_args),
        cmocka_unit_test(the_staging_is_allocated_once),
        cmocka_unit_test(a_failed_grow_frees_the_old_staging),
        cmocka_unit_test(overruns_and_bad_launches_fail),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
