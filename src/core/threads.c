/* The thread pool (see parallel.h for the model and the environment).
 *
 * One loop at a time: the caller owns the pool (busy), writes the job, opens it under a
 * new generation and hands that generation to each worker of the team through the
 * worker's futex word. Everyone inside the job runs its own share first, then any share
 * nobody has started; when none is left the caller closes the job and waits only for the
 * workers that are inside. A worker that arrives after that (it was asleep, or its core
 * was taken by another process) leaves the job alone, so a descheduled thread delays a
 * loop by at most the task it is running, never by a share it has not started.
 *
 * Every wait is a short spin on a word, then futex_wait; the thread that changes the word
 * wakes the waiter only when the waiter said it went to sleep. Both sides use sequentially
 * consistent atomics for "store mine, then load theirs", so at least one of them sees the
 * other: a wake-up is never lost and an unneeded one costs no system call. */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include "core/threads.h"

#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "distzo/log.h"

/* The idle spin before sleeping: long enough to catch the next of two back-to-back loops
 * (a row op after a row op), short enough that a thread with nothing to do gives its core
 * back to another process (or to OpenBLAS's threads) within microseconds; a longer gap
 * costs one futex wake-up. Measured in bench/README.md ("Thread pool under load"). */
enum { DEFAULT_SPIN_US = 20, MAX_SPIN_US = 1000000, PAUSES_PER_CLOCK_CHECK = 64 };

_Static_assert(sizeof(atomic_uint) == sizeof(unsigned), "a futex word is a plain 32-bit int");

/* A worker has its own futex word, so the caller wakes exactly the team it needs. */
typedef struct worker {
    _Alignas(64) atomic_uint go; /* the generation of the last job handed to this worker */
    atomic_int sleeping;         /* waits in the kernel on go: whoever changes it must wake it */
    pthread_t thread;
} worker;

/* The loop being run. Its fields change only while no worker is inside (active == 0
 * after the caller closed the job), so a worker that entered reads them unchanged. */
typedef struct job {
    dz_task_fn fn;
    void *ctx;
    int n_tasks, team, dynamic;
    _Alignas(64) atomic_uint state;  /* generation << 1 | closed */
    _Alignas(64) atomic_uint active; /* workers inside the job (futex word of the caller) */
    atomic_int caller_sleeping;      /* the caller waits in the kernel on active */
    _Alignas(64) atomic_int next;    /* dynamic: the next task nobody has taken */
    _Alignas(64) atomic_int taken[DZ_PARALLEL_MAX_THREADS]; /* static: share t has a runner */
} job;

static struct {
    atomic_int busy;    /* a loop, set_threads or shutdown owns the pool */
    atomic_int threads; /* the team size loops use; 0 until resolved */
    int started;        /* workers 1..started are running */
    int start_failed;   /* a worker could not start: loops stop trying until set_threads */
    unsigned generation; /* of the last job published */
    atomic_int stop;    /* shutdown: a woken worker returns */
    long spin_ns;
    int warned;
    _Alignas(64) atomic_uint naps; /* bumped by dz_parallel_stop_spinning */
    job job;
    worker workers[DZ_PARALLEL_MAX_THREADS]; /* [0] unused: thread 0 is the caller */
} pool;

static pthread_once_t settings_once = PTHREAD_ONCE_INIT;
static _Thread_local int tls_thread;  /* this thread's id in the pool (0 outside it) */
static _Thread_local int tls_in_task; /* running a task: a loop started here runs serially */

static void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long)t.tv_sec * 1000000000L + t.tv_nsec;
}

static void futex_wait(atomic_uint *word, unsigned value) {
    syscall(SYS_futex, (unsigned *)word, FUTEX_WAIT_PRIVATE, value, NULL, NULL, 0);
}

static void futex_wake(atomic_uint *word) { syscall(SYS_futex, (unsigned *)word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0); }

/* Spins up to pool.spin_ns while *word == value (reading the clock every few pauses, so
 * the bound is in time whatever a pause costs on this CPU), or until told to stop; 1 if
 * the word changed. */
static int spin_while_equal(atomic_uint *word, unsigned value) {
    if (pool.spin_ns <= 0) return 0;
    const long t0 = now_ns();
    const unsigned naps = atomic_load_explicit(&pool.naps, memory_order_relaxed);
    do {
        for (int i = 0; i < PAUSES_PER_CLOCK_CHECK; i++) {
            if (atomic_load_explicit(word, memory_order_acquire) != value) return 1;
            cpu_relax();
        }
    } while (now_ns() - t0 < pool.spin_ns && atomic_load_explicit(&pool.naps, memory_order_relaxed) == naps);
    return 0;
}

void dz_parallel_stop_spinning(void) { atomic_fetch_add_explicit(&pool.naps, 1, memory_order_relaxed); }

/* Returns once *word != value: a short spin, then sleep until woken. */
static void wait_while_equal(atomic_uint *word, unsigned value, atomic_int *sleeping) {
    if (spin_while_equal(word, value)) return;
    atomic_store(sleeping, 1);
    while (atomic_load(word) == value) futex_wait(word, value);
    atomic_store(sleeping, 0);
}

/* After changing *word: wakes its waiter if it sleeps. */
static void wake(atomic_uint *word, atomic_int *sleeping) {
    if (atomic_load(sleeping)) futex_wake(word);
}

/* A non-negative decimal number (capped at max) into *out; 0 if s is none. */
static int parse_count(const char *s, long max, long *out) {
    if (!s || !*s) return 0;
    char *end;
    errno = 0;
    const long v = strtol(s, &end, 10);
    if (end == s || errno || v < 0) return 0;
    *out = v > max ? max : v;
    return 1;
}

/* A child of fork() has only the thread that forked: it forgets the parent's workers
 * (joining them would wait forever) and any loop in flight; its next loop starts anew. */
static void forget_workers_after_fork(void) {
    pool.started = 0;
    pool.start_failed = 0;
    atomic_store(&pool.job.active, 0);
    atomic_store(&pool.job.state, 0);
    atomic_store(&pool.busy, 0);
}

static void read_settings_and_register_exit(void) {
    long us = DEFAULT_SPIN_US;
    const char *policy = getenv("OMP_WAIT_POLICY");
    if (policy && !strcasecmp(policy, "passive")) us = 0;
    parse_count(getenv("DISTZO_SPIN_US"), MAX_SPIN_US, &us);
    pool.spin_ns = us * 1000;
    atexit(dz_parallel_shutdown);
    pthread_atfork(NULL, NULL, forget_workers_after_fork);
}

int dz_parallel_cpus(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
    const long n = sysconf(_SC_NPROCESSORS_ONLN); /* more CPUs than a cpu_set_t holds */
    return n > 0 ? (int)(n < DZ_PARALLEL_MAX_THREADS ? n : DZ_PARALLEL_MAX_THREADS) : 1;
}

static int clamp_threads(long n) { return n < 1 ? 1 : n > DZ_PARALLEL_MAX_THREADS ? DZ_PARALLEL_MAX_THREADS : (int)n; }

/* OMP_NUM_THREADS ("4", or the first of a list "4,2"), else the CPUs we may use. */
static int default_threads(void) {
    long n;
    if (parse_count(getenv("OMP_NUM_THREADS"), DZ_PARALLEL_MAX_THREADS, &n) && n > 0) return (int)n;
    return clamp_threads(dz_parallel_cpus());
}

int dz_parallel_threads(void) {
    int n = atomic_load_explicit(&pool.threads, memory_order_relaxed);
    if (n > 0) return n;
    int unset = 0;
    n = default_threads();
    atomic_compare_exchange_strong(&pool.threads, &unset, n); /* a concurrent first call agrees */
    return atomic_load(&pool.threads);
}

int dz_parallel_thread_id(void) { return tls_thread; }

static int try_own_pool(void) {
    int idle = 0;
    return atomic_load_explicit(&pool.busy, memory_order_relaxed) == 0 &&
           atomic_compare_exchange_strong(&pool.busy, &idle, 1);
}

static void own_pool(void) {
    while (!try_own_pool()) sched_yield();
}

static void release_pool(void) { atomic_store_explicit(&pool.busy, 0, memory_order_release); }

/* Share t of a static job (tasks [n*t/T, n*(t+1)/T)), unless someone already runs it. */
static void run_share(job *j, int t) {
    if (atomic_load_explicit(&j->taken[t], memory_order_relaxed) || atomic_exchange(&j->taken[t], 1)) return;
    const int first = (int)((int64_t)j->n_tasks * t / j->team), end = (int)((int64_t)j->n_tasks * (t + 1) / j->team);
    for (int k = first; k < end; k++) j->fn(j->ctx, k, t);
}

/* What thread `self` does inside a job: its own share first, then any share nobody has
 * started (a descheduled thread's share is run by whoever is on a core); or, dynamic,
 * tasks one at a time while any are left. */
static void work_on(job *j, int self) {
    if (j->dynamic) {
        for (int k; (k = atomic_fetch_add_explicit(&j->next, 1, memory_order_relaxed)) < j->n_tasks;)
            j->fn(j->ctx, k, self);
        return;
    }
    run_share(j, self);
    for (int t = 0; t < j->team; t++) run_share(j, t);
}

/* A worker handed job generation g joins it only while it is still open: the caller does
 * not wait for a worker that has not arrived by the time every task has a runner. The
 * count goes up before the check (and the caller closes before reading it), so either the
 * caller sees the worker inside, or the worker sees the job closed and leaves it alone. */
static void join_job(job *j, unsigned g, int self) {
    atomic_fetch_add(&j->active, 1);
    if (atomic_load(&j->state) == g << 1) work_on(j, self);
    if (atomic_fetch_sub(&j->active, 1) == 1 && (atomic_load(&j->state) & 1u))
        wake(&j->active, &j->caller_sleeping);
}

static void *worker_main(void *arg) {
    worker *w = arg;
    tls_thread = (int)(w - pool.workers);
    tls_in_task = 1; /* a worker only runs tasks: any loop it starts is a nested one */
    unsigned seen = 0;
    for (;;) {
        wait_while_equal(&w->go, seen, &w->sleeping);
        seen = atomic_load_explicit(&w->go, memory_order_acquire);
        if (atomic_load(&pool.stop)) return NULL;
        join_job(&pool.job, seen, tls_thread);
    }
}

/* Starts workers up to id `last` (the pool is owned). Workers block every signal, so
 * asynchronous signals go to the program's own threads. */
static dz_status start_workers(int last, dz_error *err) {
    pthread_once(&settings_once, read_settings_and_register_exit);
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = 0;
    while (pool.started < last) {
        worker *w = &pool.workers[pool.started + 1];
        atomic_store(&w->go, 0); /* worker_main starts from seen = 0; generations start at 1 */
        atomic_store(&w->sleeping, 0);
        if ((rc = pthread_create(&w->thread, NULL, worker_main, w)) != 0) break;
        pool.started++;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pool.start_failed = rc != 0;
    if (rc)
        return dz_fail(err, DZ_ERR_NOMEM, "thread pool: cannot start thread %d of %d (%s); running with %d",
                       pool.started + 1, last + 1, strerror(rc), pool.started + 1);
    return DZ_OK;
}

/* The team of a loop of n tasks (the pool is owned): started lazily, warned once. */
static int team_for(int n_tasks) {
    const int want = dz_parallel_threads();
    if (pool.started + 1 < want && !pool.start_failed) {
        dz_error err = {0};
        if (start_workers(want - 1, &err) != DZ_OK && !pool.warned) {
            pool.warned = 1;
            dz_log(DZ_LOG_WARN, "%s", err.msg);
        }
    }
    int team = want < pool.started + 1 ? want : pool.started + 1;
    return team < n_tasks ? team : n_tasks;
}

static void run_serially(int n_tasks, dz_task_fn fn, void *ctx) {
    for (int k = 0; k < n_tasks; k++) fn(ctx, k, 0);
}

/* Publishes the job to the team (the pool is owned, no worker is inside a job), runs
 * the caller's part, closes the job and waits for the workers still inside. */
static void run_team(int n_tasks, dz_task_fn fn, void *ctx, int dynamic, int team) {
    job *j = &pool.job;
    pool.generation = (pool.generation + 1) & 0x7fffffffu; /* 31 bits: state holds g << 1 */
    if (pool.generation == 0) pool.generation = 1;           /* 0 is a new worker's "seen" */
    const unsigned g = pool.generation;
    j->fn = fn, j->ctx = ctx, j->n_tasks = n_tasks, j->team = team, j->dynamic = dynamic;
    atomic_store_explicit(&j->next, 0, memory_order_relaxed);
    for (int t = 0; t < team; t++) atomic_store_explicit(&j->taken[t], 0, memory_order_relaxed);
    atomic_store(&j->state, g << 1); /* open; publishes the fields above */
    for (int i = 1; i < team; i++) {
        atomic_store(&pool.workers[i].go, g);
        wake(&pool.workers[i].go, &pool.workers[i].sleeping);
    }
    tls_in_task = 1;
    work_on(j, 0);
    tls_in_task = 0;
    atomic_store(&j->state, g << 1 | 1u); /* every task has a runner: latecomers stay out */
    for (unsigned in; (in = atomic_load(&j->active)) != 0;) wait_while_equal(&j->active, in, &j->caller_sleeping);
}

static void run_loop(int n_tasks, dz_task_fn fn, void *ctx, int dynamic) {
    if (n_tasks <= 0) return;
    if (tls_in_task || n_tasks == 1 || !try_own_pool()) {
        run_serially(n_tasks, fn, ctx);
        return;
    }
    const int team = team_for(n_tasks);
    if (team < 2) {
        release_pool();
        run_serially(n_tasks, fn, ctx);
        return;
    }
    run_team(n_tasks, fn, ctx, dynamic, team);
    release_pool();
}

void dz_parallel_for(int n_tasks, dz_task_fn fn, void *ctx) { run_loop(n_tasks, fn, ctx, 0); }

void dz_parallel_for_dynamic(int n_tasks, dz_task_fn fn, void *ctx) { run_loop(n_tasks, fn, ctx, 1); }

dz_status dz_parallel_set_threads(int n, dz_error *err) {
    if (tls_in_task) return dz_fail(err, DZ_ERR_INVALID, "thread pool: the thread count cannot change inside a task");
    n = n > 0 ? clamp_threads(n) : default_threads();
    own_pool();
    atomic_store(&pool.threads, n);
    const dz_status st = start_workers(n - 1, err);
    release_pool();
    return st;
}

void dz_set_num_threads(int n) {
    dz_error err = {0};
    if (dz_parallel_set_threads(n, &err) != DZ_OK) dz_log(DZ_LOG_WARN, "%s", err.msg);
}

int dz_get_num_threads(void) { return dz_parallel_threads(); }

void dz_parallel_shutdown(void) {
    if (tls_in_task) return; /* exit() from inside a task: the team cannot be joined */
    own_pool();
    atomic_store(&pool.stop, 1);
    for (int i = 1; i <= pool.started; i++) {
        atomic_fetch_add(&pool.workers[i].go, 1); /* any change wakes it; it then sees stop */
        wake(&pool.workers[i].go, &pool.workers[i].sleeping);
    }
    for (int i = 1; i <= pool.started; i++) pthread_join(pool.workers[i].thread, NULL);
    pool.started = 0;
    atomic_store(&pool.stop, 0);
    release_pool();
}
