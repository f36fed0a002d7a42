/* distzo's thread pool: parallel loops for the kernels and the ZO engine (pthreads).
 *
 * Why not OpenMP: libgomp's idle threads spin for about 300000 pause instructions
 * (GOMP_SPINCOUNT, several milliseconds) after every parallel region unless the user sets
 * OMP_WAIT_POLICY=PASSIVE. With one other busy process on the machine they fight it for
 * the cores and a training run became 3.7x slower. Here an idle thread spins only a few
 * microseconds (enough to catch the next loop of a forward pass) and then sleeps on a
 * futex, so a shared machine degrades gracefully and a quiet one stays as fast.
 *
 * The model: the pool has dz_parallel_threads() threads; the thread that calls
 * dz_parallel_for is thread 0 and runs its share, workers 1..n-1 run theirs, and the call
 * returns when every task has run. A share whose worker has not arrived when the others
 * are done is run by one of them, so a thread that another process keeps off its core
 * does not hold the loop up. The pool starts on first use (or at dz_parallel_set_threads)
 * and its workers are joined at exit. A call allocates nothing.
 *
 * Calls that run on the calling thread alone, in task order, with thread = 0:
 *  - a call from inside a task (nested loops run serially, they never deadlock);
 *  - a call while another thread's call holds the pool (one loop at a time);
 *  - one thread, or fewer than two tasks.
 * Tasks must not wait for one another: a task may run on any thread of the team.
 *
 * Environment, read when the pool starts:
 *  - OMP_NUM_THREADS: the default thread count when set to a positive number (as it was
 *    under OpenMP); else every CPU this process may run on (its affinity mask).
 *  - DISTZO_SPIN_US: how long an idle thread spins before sleeping (default 20 us);
 *    OMP_WAIT_POLICY=PASSIVE means 0 (sleep at once), like libgomp's. */
#ifndef DZ_CORE_THREADS_H
#define DZ_CORE_THREADS_H

#include "distzo/error.h"

/* More are clamped to this. */
#define DZ_PARALLEL_MAX_THREADS 1024

/* One task: `task` in [0, n_tasks); `thread` in [0, dz_parallel_threads()) is never the
 * same for two tasks running at the same time in one call, so it can index per-thread
 * scratch sized by dz_parallel_threads(). */
typedef void (*dz_task_fn)(void *ctx, int task, int thread);

/* Runs fn(ctx, k, t) for every k in [0, n_tasks), statically: with a team of T threads,
 * share t is the contiguous range [n*t/T, n*(t+1)/T), run in increasing order with
 * thread = t. The partition depends only on n_tasks and T, never on timing; a share
 * normally runs on pool thread t, but one whose thread is late (asleep, or descheduled on
 * a busy machine) is run by another thread that is done with its own. */
void dz_parallel_for(int n_tasks, dz_task_fn fn, void *ctx);

/* The same with tasks handed out one at a time, in increasing order, to whichever thread
 * is free (thread = that thread's id): for tasks of uneven cost. Results must then not
 * depend on which thread ran a task. */
void dz_parallel_for_dynamic(int n_tasks, dz_task_fn fn, void *ctx);

/* Sets the number of threads (n <= 0: the default above) and starts the missing workers
 * now. Fails with DZ_ERR_NOMEM when a worker cannot be started (loops then run on the
 * threads that did start; a loop that starts the pool lazily warns instead), and with
 * DZ_ERR_INVALID from inside a task. Waits for a loop another thread runs. */
dz_status dz_parallel_set_threads(int n, dz_error *err);

/* The number of threads a loop may use (the default until set). */
int dz_parallel_threads(void);

/* The thread count compute uses, as programs and tests set it: dz_parallel_set_threads
 * with a failure to start a worker logged (the work runs on the threads that did), not
 * returned. n <= 0: the default above. dz_get_num_threads is dz_parallel_threads. */
void dz_set_num_threads(int n);
int dz_get_num_threads(void);

/* The pool thread this code runs on: 0 for a caller (any thread outside the pool), i for
 * worker i. (In a static loop this may differ from the task's `thread`, its share.) */
int dz_parallel_thread_id(void);

/* CPUs this process may run on (its affinity mask), at least 1. */
int dz_parallel_cpus(void);

/* Idle workers stop spinning and sleep now (they wake for the next loop as usual). For
 * the caller to say that what comes next runs on other threads, which need the cores:
 * OpenBLAS's GEMM threads, say. */
void dz_parallel_stop_spinning(void);

/* Joins the workers (registered with atexit when the pool starts; harmless to call more
 * than once). A later loop starts the pool again. Skipped from inside a task. */
void dz_parallel_shutdown(void);

#endif
