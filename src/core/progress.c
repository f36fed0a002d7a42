/* The running operation's progress, handed to the program's sink at most ten times a second
 * once it has run the delay. */
#include "distzo/progress.h"

#include <math.h>
#include <stddef.h>

#include "distzo/log.h"
#include "distzo/util.h"

static dz_progress_sink g_sink;
static void *g_user;
static double g_delay = 2.0;
static _Thread_local dz_progress *g_current; /* the outermost operation running, or NULL */

void dz_progress_set_sink(dz_progress_sink sink, void *user) { g_sink = sink, g_user = user; }

void dz_progress_set_delay(double seconds) { g_delay = seconds >= 0 ? seconds : 0; }

static void report(dz_progress *p, double now, int final) {
    const double elapsed = now - p->t0;
    const dz_progress_report r = {
        .what = p->what, .unit = p->unit, .done = p->done, .total = p->total, .elapsed_s = elapsed,
        .eta_s = p->done > 0 && p->total >= p->done ? elapsed / (double)p->done * (double)(p->total - p->done) : NAN,
        .first = !p->shown, .final = final,
    };
    p->shown = 1, p->last_report = now;
    g_sink(&r, g_user);
}

void dz_progress_begin(dz_progress *p, const char *what, const char *unit, int64_t total) {
    *p = (dz_progress){.what = what, .unit = unit, .total = total, .joined = g_current != NULL};
    if (p->joined) return;
    p->t0 = dz_now();
    g_current = p;
}

void dz_progress_add(int64_t n) {
    dz_progress *p = g_current;
    if (!p) return;
    p->done += n;
    if (!g_sink || !dz_log_enabled(DZ_LOG_INFO)) return;
    const double now = dz_now();
    if (now - p->t0 >= g_delay && (!p->shown || now - p->last_report >= 0.1 || p->done >= p->total))
        report(p, now, 0);
}

void dz_progress_end(dz_progress *p) {
    if (p->joined || g_current != p) return;
    g_current = NULL;
    if (p->shown && g_sink) report(p, dz_now(), 1);
}
