/* Several GPUs through the CUDA seam (docs/CUDA.md, "Several GPUs"), on N host seams that
 * play the GPUs of a node:
 *  - the all-gather behind the seam: every device ends with every rank's slice in rank
 *    order, in place or not; one of several devices called outside a group, a rank that
 *    never joins, a collective reading a slice whose upload it is not ordered after (a
 *    missing event wait) fail as they must;
 *  - DistZO2's sliced upload (backend/cuda/sliced_upload.h) for N = 1, 2, 3, 4 and blocks
 *    of sizes that N does not divide (down to fewer bytes than GPUs): every device ends
 *    bitwise equal to the host block, block after block through rotating buffers; each
 *    device's link carries ceil(B / N) bytes at most and together they carry B once;
 *    leaving out any one of its waits (the gather's on the upload, the upload's on the
 *    compute that still reads the buffer, the compute's on the gather) is a hazard; its
 *    free releases everything even when one of its calls fails;
 *  - the device a rank owns (dz_gpu_for_rank, distzo/parallel.h) and its way to the
 *    backend, the name "cuda@D". */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "backend/cuda/sliced_upload.h"
#include "cuda_seam_ok.h"
#include "backend/backend.h"
#include "distzo/parallel.h"

enum { MAX_N = 4 };

typedef struct node {
    int n;
    dz_cuda_seam *s[MAX_N];
    dz_cuda_comm comm[MAX_N];
} node;

static void node_open(node *g, int n) {
    memset(g, 0, sizeof *g);
    g->n = n;
    dz_cuda_comm_id id;
    for (int r = 0; r < n; r++) {
        g->s[r] = dz_cuda_seam_host_create_device(r);
        assert_non_null(g->s[r]);
        assert_int_equal(g->s[r]->device, r);
    }
    SEAM_OK(g->s[0], g->s[0]->comm_unique_id(g->s[0], &id));
    SEAM_OK(g->s[0], g->s[0]->group_start(g->s[0]));
    for (int r = 0; r < n; r++) SEAM_OK(g->s[r], g->s[r]->comm_init(g->s[r], &g->comm[r], n, r, &id));
    SEAM_OK(g->s[0], g->s[0]->group_end(g->s[0]));
}

/* strict: every call must succeed (after a failure on purpose, collectives may be left
 * without all their ranks). */
static void node_close(node *g, int strict) {
    for (int r = 0; r < g->n; r++) {
        const int st = g->s[r]->comm_destroy(g->s[r], g->comm[r]);
        if (strict) SEAM_OK(g->s[r], st);
    }
    for (int r = 0; r < g->n; r++) g->s[r]->destroy(g->s[r]);
}

static void fill_bytes(unsigned char *p, size_t n, unsigned seed) {
    uint32_t x = seed * 2654435761u + 12345u;
    for (size_t i = 0; i < n; i++) {
        x = x * 1664525u + 1013904223u;
        p[i] = (unsigned char)(x >> 24);
    }
}

/* ---- the all-gather ---- */

/* Rank r's slice (count bytes of value 16 r + i) uploaded and gathered, in place or from a
 * separate send buffer; every device must hold all slices in rank order. */
static void gather_once(node *g, size_t count, int in_place) {
    const int n = g->n;
    void *recv[MAX_N], *send[MAX_N];
    dz_cuda_stream st[MAX_N];
    unsigned char *host = malloc((size_t)n * count), *back = malloc((size_t)n * count);
    for (int r = 0; r < n; r++) {
        dz_cuda_seam *s = g->s[r];
        SEAM_OK(s, s->stream_create(s, &st[r]));
        SEAM_OK(s, s->dev_alloc(s, &recv[r], (size_t)n * count));
        send[r] = (char *)recv[r] + (size_t)r * count;
        if (!in_place) SEAM_OK(s, s->dev_alloc(s, &send[r], count));
        for (size_t i = 0; i < count; i++) host[(size_t)r * count + i] = (unsigned char)(16 * r + i);
        SEAM_OK(s, s->memcpy_async(s, send[r], host + (size_t)r * count, count, DZ_COPY_H2D, st[r]));
    }
    SEAM_OK(g->s[0], g->s[0]->group_start(g->s[0]));
    for (int r = 0; r < n; r++)
        SEAM_OK(g->s[r], g->s[r]->all_gather(g->s[r], g->comm[r], send[r], recv[r], count, st[r]));
    SEAM_OK(g->s[0], g->s[0]->group_end(g->s[0]));
    for (int r = n - 1; r >= 0; r--) { /* the last device's work runs first: the rendezvous orders it */
        dz_cuda_seam *s = g->s[r];
        SEAM_OK(s, s->memcpy_async(s, back, recv[r], (size_t)n * count, DZ_COPY_D2H, st[r]));
        SEAM_OK(s, s->stream_synchronize(s, st[r]));
        assert_memory_equal(back, host, (size_t)n * count);
        assert_int_equal(dz_cuda_seam_host_hazards(s), 0);
        if (!in_place) SEAM_OK(s, s->dev_free(s, send[r]));
        SEAM_OK(s, s->dev_free(s, recv[r]));
        SEAM_OK(s, s->stream_destroy(s, st[r]));
    }
    free(host), free(back);
}

static void all_gather_gives_every_device_every_slice(void **state) {
    (void)state;
    for (int n = 1; n <= MAX_N; n++) {
        node g;
        node_open(&g, n);
        gather_once(&g, 7, 1);
        gather_once(&g, 5, 0);
        gather_once(&g, 1, 1);
        node_close(&g, 1);
    }
}

static void all_gather_misuse_fails(void **state) {
    (void)state;
    node g;
    node_open(&g, 2);
    void *buf[2];
    dz_cuda_stream up[2], comm[2];
    unsigned char host[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    for (int r = 0; r < 2; r++) {
        dz_cuda_seam *s = g.s[r];
        SEAM_OK(s, s->dev_alloc(s, &buf[r], 8));
        SEAM_OK(s, s->stream_create(s, &up[r]));
        SEAM_OK(s, s->stream_create(s, &comm[r]));
    }
    dz_cuda_seam *s0 = g.s[0], *s1 = g.s[1];
    /* one of two devices outside a group: NCCL would wait forever */
    assert_int_equal(s0->all_gather(s0, g.comm[0], buf[0], buf[0], 4, comm[0]), DZ_CUDA_ERR_INVALID);
    assert_non_null(strstr(s0->last_error(s0), "group_start"));
    /* a communicator of another device */
    SEAM_OK(s0, s0->group_start(s0));
    assert_int_equal(s0->all_gather(s0, g.comm[1], buf[0], buf[0], 4, comm[0]), DZ_CUDA_ERR_INVALID);
    /* the slice uploaded on another stream with no event between: the gather reads it unordered */
    SEAM_OK(s0, s0->memcpy_async(s0, buf[0], host, 4, DZ_COPY_H2D, up[0]));
    assert_int_equal(s0->all_gather(s0, g.comm[0], buf[0], buf[0], 4, comm[0]), DZ_CUDA_ERR_HAZARD);
    assert_int_equal(dz_cuda_seam_host_hazards(s0), 1);
    SEAM_OK(s0, s0->group_end(s0));
    assert_int_equal(s0->group_end(s0), DZ_CUDA_ERR_INVALID);
    SEAM_OK(s0, s0->device_synchronize(s0));
    /* rank 1 never joins collective 0: running rank 0's part fails instead of hanging */
    SEAM_OK(s0, s0->group_start(s0));
    SEAM_OK(s0, s0->all_gather(s0, g.comm[0], buf[0], buf[0], 4, comm[0]));
    SEAM_OK(s0, s0->group_end(s0));
    assert_int_equal(s0->stream_synchronize(s0, comm[0]), DZ_CUDA_ERR_INVALID);
    assert_non_null(strstr(s0->last_error(s0), "1 of 2 ranks joined"));
    (void)s1;
    node_close(&g, 1); /* frees the buffers and streams with the seams */
}

/* ---- the sliced upload ---- */

static void slices_cover_the_block_once(void **state) {
    (void)state;
    for (int n = 1; n <= 5; n++)
        for (size_t b = 0; b <= 23; b++) {
            size_t next = 0, most = 0;
            for (int r = 0; r < n; r++) {
                size_t off = 0;
                const size_t len = dz_sliced_slice(b, n, r, &off);
                if (len) assert_int_equal(off, next); /* contiguous, in rank order */
                assert_int_equal(off, len ? next : off);
                assert_true(off <= b);
                next += len;
                if (len > most) most = len;
            }
            assert_int_equal(next, b);
            assert_int_equal(most, (b + n - 1) / n);
        }
}

typedef struct run {
    node g;
    dz_sliced_upload u[MAX_N];
    dz_sliced_upload *up[MAX_N];
    dz_cuda_stream compute[MAX_N];
    unsigned char *host; /* pinned, on device 0's seam: one host block for the node */
    size_t cap;
} run;

static void run_open(run *x, int n, size_t cap, int buffers) {
    node_open(&x->g, n);
    x->cap = cap;
    for (int r = 0; r < n; r++) {
        dz_cuda_seam *s = x->g.s[r];
        SEAM_OK(s, dz_sliced_upload_init(&x->u[r], s, x->g.comm[r], r, n, cap, buffers));
        SEAM_OK(s, s->stream_create(s, &x->compute[r]));
        x->up[r] = &x->u[r];
    }
    void *h = NULL;
    SEAM_OK(x->g.s[0], x->g.s[0]->host_alloc(x->g.s[0], &h, cap));
    x->host = h;
}

static void run_close(run *x, int strict) {
    for (int r = 0; r < x->g.n; r++) { /* every device's uploads read the host block: done first */
        const int st = x->g.s[r]->device_synchronize(x->g.s[r]);
        if (strict) SEAM_OK(x->g.s[r], st);
    }
    dz_cuda_seam *s0 = x->g.s[0];
    int st = s0->host_free(s0, x->host);
    if (strict) SEAM_OK(s0, st);
    for (int r = 0; r < x->g.n; r++) {
        st = dz_sliced_upload_free(&x->u[r]);
        if (strict) SEAM_OK(x->g.s[r], st);
    }
    node_close(&x->g, strict);
}

/* The compute of block k on each device: reads the whole block (a download of it) after
 * its gather, then lets the buffer go. The host block is then checked and may change. */
static void compute_block(run *x, uint64_t k, size_t block, unsigned char *out) {
    for (int r = 0; r < x->g.n; r++) {
        dz_cuda_seam *s = x->g.s[r];
        void *buf = NULL;
        SEAM_OK(s, dz_sliced_acquire(&x->u[r], k, x->compute[r], &buf));
        SEAM_OK(s, s->memcpy_async(s, out + (size_t)r * x->cap, buf, block, DZ_COPY_D2H, x->compute[r]));
        SEAM_OK(s, dz_sliced_release(&x->u[r], k, x->compute[r]));
    }
}

static void every_device_ends_with_the_host_block(void **state) {
    (void)state;
    static const size_t sizes[] = {1, 2, 3, 5, 7, 97, 1000, 4099};
    for (int n = 1; n <= MAX_N; n++)
        for (int buffers = 1; buffers <= 2; buffers++) {
            run x;
            run_open(&x, n, 4099, buffers);
            unsigned char *out = malloc((size_t)n * x.cap), *expect = malloc(x.cap);
            size_t before[MAX_N];
            for (int r = 0; r < n; r++) before[r] = dz_cuda_seam_host_copied(x.g.s[r], DZ_COPY_H2D);
            for (uint64_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
                const size_t b = sizes[k];
                fill_bytes(x.host, b, (unsigned)(k + 1));
                memcpy(expect, x.host, b);
                SEAM_OK(x.g.s[0], dz_sliced_upload_node(x.up, n, k, x.host, b));
                compute_block(&x, k, b, out);
                size_t total = 0;
                for (int r = 0; r < n; r++) {
                    dz_cuda_seam *s = x.g.s[r];
                    SEAM_OK(s, s->stream_synchronize(s, x.compute[r]));
                    assert_memory_equal(out + (size_t)r * x.cap, expect, b); /* bitwise the host block */
                    const size_t sent = dz_cuda_seam_host_copied(s, DZ_COPY_H2D) - before[r];
                    before[r] += sent;
                    assert_true(sent <= (b + n - 1) / n); /* this GPU's PCIe link: 1/N of the block */
                    if (r == 0) assert_int_equal(sent, (b + n - 1) / n);
                    total += sent;
                    assert_int_equal(dz_cuda_seam_host_hazards(s), 0);
                }
                assert_int_equal(total, b); /* the node's links carry the block once */
            }
            free(out), free(expect);
            run_close(&x, 1);
        }
}

/* The next block's upload while the compute of this one is still enqueued: with two
 * buffers it goes to the other buffer (fine); with one it must wait, and does. */
static void uploads_overlap_compute_in_order(void **state) {
    (void)state;
    for (int buffers = 1; buffers <= 2; buffers++) {
        run x;
        run_open(&x, 3, 100, buffers);
        unsigned char *out = malloc(3 * 4 * x.cap), expect[4][100];
        for (uint64_t k = 0; k < 4; k++) {
            fill_bytes(expect[k], 100, (unsigned)(7 * k + 3));
            memcpy(x.host, expect[k], 100);
            SEAM_OK(x.g.s[0], dz_sliced_upload_node(x.up, 3, k, x.host, 100));
            compute_block(&x, k, 100, out + k * 3 * x.cap);
            /* the host block changes for the next block: wait for the slice uploads only */
            for (int r = 0; r < 3; r++) SEAM_OK(x.g.s[r], x.g.s[r]->event_synchronize(x.g.s[r], x.u[r].sliced));
        }
        for (int r = 0; r < 3; r++) SEAM_OK(x.g.s[r], x.g.s[r]->stream_synchronize(x.g.s[r], x.compute[r]));
        for (int k = 0; k < 4; k++)
            for (int r = 0; r < 3; r++) assert_memory_equal(out + ((size_t)k * 3 + r) * x.cap, expect[k], 100);
        for (int r = 0; r < 3; r++) assert_int_equal(dz_cuda_seam_host_hazards(x.g.s[r]), 0);
        free(out);
        run_close(&x, 1);
    }
}

/* Each wait left out (one device of three, the others correct) is a hazard on that device;
 * the buffer still read is block k - 1's with one buffer (which 1), block k - 2's with two
 * (which 3). */
static void a_missing_wait_is_a_hazard(void **state) {
    (void)state;
    unsigned char *out = malloc(3 * 64);
    for (int which = 0; which < 4; which++) {
        run x;
        run_open(&x, 3, 64, which == 3 ? 2 : 1);
        fill_bytes(x.host, 64, 5);
        dz_cuda_seam *s1 = x.g.s[1];
        if (which == 0) { /* the gather does not wait for the slice's upload */
            x.u[1].omit = DZ_SLICED_OMIT_SLICE_WAIT;
            assert_int_equal(dz_sliced_upload_node(x.up, 3, 0, x.host, 64), DZ_CUDA_ERR_HAZARD);
        } else if (which == 1) { /* the next upload does not wait for the compute reading the buffer */
            SEAM_OK(x.g.s[0], dz_sliced_upload_node(x.up, 3, 0, x.host, 64));
            compute_block(&x, 0, 64, out);
            x.u[1].omit = DZ_SLICED_OMIT_RELEASE_WAIT;
            assert_int_equal(dz_sliced_upload_slice(&x.u[1], 1, x.host, 64), DZ_CUDA_ERR_HAZARD);
        } else if (which == 2) { /* the compute reads the block without waiting for its gather */
            SEAM_OK(x.g.s[0], dz_sliced_upload_node(x.up, 3, 0, x.host, 64));
            assert_int_equal(s1->memcpy_async(s1, out, x.u[1].buf[0], 64, DZ_COPY_D2H, x.compute[1]),
                             DZ_CUDA_ERR_HAZARD);
        } else { /* two buffers: block 1 goes to the other one; block 2 must wait for block 0's compute */
            for (uint64_t k = 0; k < 2; k++) {
                SEAM_OK(x.g.s[0], dz_sliced_upload_node(x.up, 3, k, x.host, 64));
                compute_block(&x, k, 64, out);
            }
            x.u[1].omit = DZ_SLICED_OMIT_RELEASE_WAIT;
            assert_int_equal(dz_sliced_upload_slice(&x.u[1], 2, x.host, 64), DZ_CUDA_ERR_HAZARD);
        }
        assert_non_null(strstr(s1->last_error(s1), "race"));
        assert_int_equal(dz_cuda_seam_host_hazards(s1), 1);
        assert_int_equal(dz_cuda_seam_host_hazards(x.g.s[0]), 0);
        x.u[1].omit = 0;
        run_close(&x, 0);
    }
    free(out);
}

/* The free releases every buffer, stream and event even when one of its calls fails (a
 * stream's destroy reporting its work's error, as CUDA's sticky errors do), and touches
 * nothing after an init refused for its arguments. Counted by wrapping the seam's table. */
static int (*real_stream_destroy)(dz_cuda_seam *, dz_cuda_stream);
static int (*real_dev_free)(dz_cuda_seam *, void *);
static int dev_frees, stream_destroys;
static int failing_stream_destroy(dz_cuda_seam *s, dz_cuda_stream st) {
    stream_destroys++;
    real_stream_destroy(s, st);
    return DZ_CUDA_ERR_RUNTIME;
}
static int counted_dev_free(dz_cuda_seam *s, void *p) {
    dev_frees++;
    return real_dev_free(s, p);
}

static void free_releases_all_after_a_failure(void **state) {
    (void)state;
    node g;
    node_open(&g, 1);
    dz_cuda_seam *s = g.s[0];
    real_stream_destroy = s->stream_destroy, real_dev_free = s->dev_free;
    s->stream_destroy = failing_stream_destroy, s->dev_free = counted_dev_free;
    dz_sliced_upload u;
    assert_int_equal(dz_sliced_upload_init(&u, s, g.comm[0], 0, 1, 4096, DZ_SLICED_MAX_BUFFERS + 1),
                     DZ_CUDA_ERR_INVALID);
    dev_frees = stream_destroys = 0;
    assert_int_equal(dz_sliced_upload_free(&u), DZ_CUDA_OK);
    assert_int_equal(dev_frees + stream_destroys, 0);
    SEAM_OK(s, dz_sliced_upload_init(&u, s, g.comm[0], 0, 1, 4096, 2));
    dev_frees = stream_destroys = 0;
    assert_int_equal(dz_sliced_upload_free(&u), DZ_CUDA_ERR_RUNTIME); /* the first failure */
    assert_int_equal(stream_destroys, 2);                           /* upload and gather */
    assert_int_equal(dev_frees, 2);                                 /* both buffers */
    s->stream_destroy = real_stream_destroy, s->dev_free = real_dev_free;
    node_close(&g, 1);
}

/* ---- the device a rank owns ---- */

static void ranks_own_gpus_by_local_rank(void **state) {
    (void)state;
    dz_error err = {0};
    int dev = -1;
    for (int g = 1; g <= 8; g++)
        for (int local = 0; local < g; local++) {
            assert_int_equal(dz_gpu_for_rank(local, g, g, 0, &dev, &err), DZ_OK);
            assert_int_equal(dev, local);
        }
    /* 4 ranks on 2 GPUs: refused unless sharing is asked for, then round robin */
    assert_int_equal(dz_gpu_for_rank(3, 4, 2, 0, &dev, &err), DZ_ERR_INVALID);
    assert_non_null(strstr(err.msg, "4 ranks on this machine but --gpus-per-node 2"));
    assert_int_equal(dz_gpu_for_rank(3, 4, 2, 1, &dev, &err), DZ_OK);
    assert_int_equal(dev, 1);
    assert_int_equal(dz_gpu_for_rank(2, 4, 2, 1, &dev, &err), DZ_OK);
    assert_int_equal(dev, 0);
    /* fewer ranks than GPUs: the first ones are used */
    assert_int_equal(dz_gpu_for_rank(1, 2, 8, 0, &dev, &err), DZ_OK);
    assert_int_equal(dev, 1);
    assert_int_equal(dz_gpu_for_rank(0, 1, 0, 0, &dev, &err), DZ_ERR_INVALID);
    assert_int_equal(dz_gpu_for_rank(2, 2, 4, 0, &dev, &err), DZ_ERR_INVALID); /* rank outside its machine */
}

/* The choice travels in the backend's name, "cuda@D" or "cuda:MODE@D": cuda's only, a
 * number, then refused for want of CUDA or a GPU (this machine) like plain "cuda". */
static void the_gpu_travels_in_the_backend_name(void **state) {
    (void)state;
    dz_backend *be = NULL;
    dz_error err = {0};
    assert_int_equal(dz_backend_create("ref@0", &be, &err), DZ_ERR_INVALID);
    assert_non_null(strstr(err.msg, "--gpus-per-node applies to --backend cuda only (not ref)"));
    assert_int_equal(dz_backend_create("cuda@x", &be, &err), DZ_ERR_INVALID);
    assert_non_null(strstr(err.msg, "'x' is not a GPU number"));
    assert_int_equal(dz_backend_create("cuda@-1", &be, &err), DZ_ERR_INVALID);
    assert_int_equal(dz_backend_create("cuda:fp16@1", &be, &err), DZ_ERR_INVALID); /* the mode still checked */
    assert_int_equal(dz_backend_create("cuda:fp32@1", &be, &err), DZ_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "--backend cuda: "));
    assert_int_equal(dz_backend_create("cuda@3", &be, &err), DZ_ERR_UNSUPPORTED);
    assert_null(be);
    assert_int_equal(dz_backend_create("cpu", &be, &err), DZ_OK); /* names without a GPU as before */
    dz_backend_free(be);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(all_gather_gives_every_device_every_slice),
        cmocka_unit_test(all_gather_misuse_fails),
        cmocka_unit_test(slices_cover_the_block_once),
        cmocka_unit_test(every_device_ends_with_the_host_block),
        cmocka_unit_test(uploads_overlap_compute_in_order),
        cmocka_unit_test(a_missing_wait_is_a_hazard),
        cmocka_unit_test(free_releases_all_after_a_failure),
        cmocka_unit_test(ranks_own_gpus_by_local_rank),
        cmocka_unit_test(the_gpu_travels_in_the_backend_name),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
