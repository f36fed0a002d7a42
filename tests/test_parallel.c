/* The thread pool (src/core/threads.h): every task runs once, static shares are the
 * documented ranges, `thread` is never shared by two running tasks, nested loops and
 * concurrent callers run serially without deadlock, the thread count can change and the
 * pool restarts after a shutdown. Many tiny loops in a row check that no wake-up is lost
 * (CTest's timeout catches a hang), and a forked child neither hangs nor loses work.
 * CTest runs this once sleeping at once and once spinning (DISTZO_SPIN_US). */
#include <pthread.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "core/threads.h"

enum { MAX_TASKS = 5000 };

typedef struct record {
    atomic_int runs[MAX_TASKS];   /* how often each task ran */
    int thread_of[MAX_TASKS];     /* the `thread` it ran with */
    atomic_int in_use[DZ_PARALLEL_MAX_THREADS]; /* a task with this `thread` is running */
    atomic_int clashes;           /* two tasks ran at once with one `thread` */
    atomic_int bad_thread;        /* `thread` outside [0, threads) */
    int threads;
} record;

static void record_task(void *ctx, int task, int thread) {
    record *r = ctx;
    if (thread < 0 || thread >= r->threads) {
        atomic_fetch_add(&r->bad_thread, 1);
        return;
    }
    if (atomic_exchange(&r->in_use[thread], 1)) atomic_fetch_add(&r->clashes, 1);
    atomic_fetch_add(&r->runs[task], 1);
    r->thread_of[task] = thread;
    for (volatile int spin = 0; spin < 200; spin++) {
    }
    atomic_store(&r->in_use[thread], 0);
}

static record *run_recorded(int n, int dynamic) {
    static record r;
    memset(&r, 0, sizeof r);
    r.threads = dz_parallel_threads();
    (dynamic ? dz_parallel_for_dynamic : dz_parallel_for)(n, record_task, &r);
    return &r;
}

static void check_each_once(const record *r, int n) {
    for (int k = 0; k < n; k++) assert_int_equal(atomic_load(&r->runs[k]), 1);
    assert_int_equal(atomic_load(&r->clashes), 0);
    assert_int_equal(atomic_load(&r->bad_thread), 0);
}

static void every_task_runs_once(void **state) {
    (void)state;
    const int threads[] = {1, 2, 3, 4, 7};
    const int sizes[] = {0, 1, 2, 3, 5, 64, 1000, MAX_TASKS};
    for (size_t t = 0; t < sizeof threads / sizeof threads[0]; t++) {
        assert_int_equal(dz_parallel_set_threads(threads[t], NULL), DZ_OK);
        assert_int_equal(dz_parallel_threads(), threads[t]);
        for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
            for (int dynamic = 0; dynamic < 2; dynamic++) check_each_once(run_recorded(sizes[s], dynamic), sizes[s]);
    }
    assert_int_equal(dz_parallel_set_threads(0, NULL), DZ_OK);
}

/* Share t of n tasks over T threads is [n*t/T, n*(t+1)/T), whoever runs it. */
static void static_shares_are_the_documented_ranges(void **state) {
    (void)state;
    assert_int_equal(dz_parallel_set_threads(3, NULL), DZ_OK);
    const int n = 1000;
    for (int rep = 0; rep < 20; rep++) {
        const record *r = run_recorded(n, 0);
        check_each_once(r, n);
        for (int k = 0; k < n; k++) {
            const int t = r->thread_of[k];
            assert_true((int64_t)n * t / 3 <= k && k < (int64_t)n * (t + 1) / 3);
        }
    }
    assert_int_equal(dz_parallel_set_threads(0, NULL), DZ_OK);
}

typedef struct nested {
    atomic_int inner_runs, inner_nonzero_thread, set_threads_refused;
} nested;

static void inner_task(void *ctx, int task, int thread) {
    nested *n = ctx;
    atomic_fetch_add(&n->inner_runs, 1);
    if (thread != 0) atomic_fetch_add(&n->inner_nonzero_thread, 1);
}

static void outer_task(void *ctx, int task, int thread) {
    nested *n = ctx;
    dz_parallel_for(10, inner_task, n);
    dz_parallel_for_dynamic(10, inner_task, n);
    dz_error err = {0};
    if (dz_parallel_set_threads(1, &err) == DZ_ERR_INVALID) atomic_fetch_add(&n->set_threads_refused, 1);
}

/* A loop inside a task runs on that thread alone (thread = 0), and the count cannot change. */
static void nested_loops_run_serially(void **state) {
    (void)state;
    assert_int_equal(dz_parallel_set_threads(4, NULL), DZ_OK);
    nested n = {0};
    dz_parallel_for(8, outer_task, &n);
    assert_int_equal(atomic_load(&n.inner_runs), 8 * 20);
    assert_int_equal(atomic_load(&n.inner_nonzero_thread), 0);
    assert_int_equal(atomic_load(&n.set_threads_refused), 8);
    assert_int_equal(dz_parallel_threads(), 4);
    assert_int_equal(dz_parallel_set_threads(0, NULL), DZ_OK);
}

typedef struct sum_job {
    atomic_llong sum;
} sum_job;

/* A few microseconds each, so that the workers arrive and join (a trivial task would be
 * done by the caller alone before a sleeping worker wakes). */
static void add_task(void *ctx, int task, int thread) {
    for (volatile int spin = 0; spin < 3000; spin++) {
    }
    atomic_fetch_add(&((sum_job *)ctx)->sum, task);
}

/* Loops of 2..9 tasks back to back: a lost wake-up would hang here. */
static void *many_small_loops(void *arg) {
    long long *bad = arg;
    for (int i = 0; i < 10000; i++) {
        sum_job s = {0};
        const int n = 2 + i % 8;
        (i % 3 ? dz_parallel_for : dz_parallel_for_dynamic)(n, add_task, &s);
        if (atomic_load(&s.sum) != (long long)n * (n - 1) / 2) ++*bad;
    }
    return NULL;
}

static void many_small_loops_lose_no_wakeup(void **state) {
    (void)state;
    assert_int_equal(dz_parallel_set_threads(3, NULL), DZ_OK);
    long long bad = 0;
    many_small_loops(&bad);
    assert_int_equal(bad, 0);
    assert_int_equal(dz_parallel_set_threads(0, NULL), DZ_OK);
}

/* Two threads outside the pool loop at once: one owns the pool, the other runs serially. */
static void concurrent_callers_both_finish(void **state) {
    (void)state;
    assert_int_equal(dz_parallel_set_threads(2, NULL), DZ_OK);
    long long bad[2] = {0, 0};
    pthread_t other;
    assert_int_equal(pthread_create(&other, NULL, many_small_loops, &bad[1]), 0);
    many_small_loops(&bad[0]);
    pthread_join(other, NULL);
    assert_int_equal(bad[0] + bad[1], 0);
    assert_int_equal(dz_parallel_set_threads(0, NULL), DZ_OK);
}

static void shutdown_then_reuse(void **state) {
    (void)state;
    assert_int_equal(dz_parallel_set_threads(4, NULL), DZ_OK);
    check_each_once(run_recorded(100, 0), 100);
    dz_parallel_shutdown();
    dz_parallel_shutdown(); /* twice is harmless */
    check_each_once(run_recorded(100, 1), 100); /* restarts lazily */
    assert_int_equal(dz_parallel_set_threads(0, NULL), DZ_OK);
}

/* A child of fork() has no workers: its loops still run every task, and its exit (which
 * joins the pool) returns instead of waiting for the parent's threads. */
static void fork_child_loops_and_exits(void **state) {
    (void)state;
    assert_int_equal(dz_parallel_set_threads(3, NULL), DZ_OK);
    check_each_once(run_recorded(100, 0), 100);
    const pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        const record *r = run_recorded(1000, 0);
        int ok = 1;
        for (int k = 0; k < 1000; k++) ok &= atomic_load(&r->runs[k]) == 1;
        exit(ok ? 0 : 1);
    }
    int status = 0;
    assert_int_equal(waitpid(child, &status, 0), child);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    check_each_once(run_recorded(100, 1), 100);
    assert_int_equal(dz_parallel_set_threads(0, NULL), DZ_OK);
}

static void thread_ids_and_cpus(void **state) {
    (void)state;
    assert_int_equal(dz_parallel_thread_id(), 0);
    assert_true(dz_parallel_cpus() >= 1);
    assert_true(dz_parallel_threads() >= 1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(thread_ids_and_cpus),
        cmocka_unit_test(every_task_runs_once),
        cmocka_unit_test(static_shares_are_the_documented_ranges),
        cmocka_unit_test(nested_loops_run_serially),
        cmocka_unit_test(many_small_loops_lose_no_wakeup),
        cmocka_unit_test(concurrent_callers_both_finish),
        cmocka_unit_test(shutdown_then_reuse),
        cmocka_unit_test(fork_child_loops_and_exits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
