/* The progress sink: on a terminal one line redrawn with \r and cleared at the end; piped,
 * a line at each tenth done (or after 30 s without one) and one when the operation ends. */
#include "cli/progress_view.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "distzo/log.h"
#include "distzo/progress.h"

void dz_cli_fmt_duration(double secs, char *buf, size_t cap) {
    if (!isfinite(secs) || secs < 0) snprintf(buf, cap, "?");
    else if (secs < 90) snprintf(buf, cap, "%.0fs", secs);
    else if (secs < 5400) snprintf(buf, cap, "%.0fm", secs / 60);
    else snprintf(buf, cap, "%.1fh", secs / 3600);
}

void dz_cli_fmt_rate(double steps_per_s, char *buf, size_t cap) {
    if (steps_per_s > 0 && steps_per_s < 1) snprintf(buf, cap, "%.1f s/step", 1.0 / steps_per_s);
    else snprintf(buf, cap, "%.1f steps/s", steps_per_s);
}

static void show_bar(const dz_progress_report *r) {
    if (r->final) {
        fprintf(stderr, "\r\033[K");
    } else {
        const int width = 24, filled = r->total > 0 ? (int)((double)width * r->done / r->total) : 0;
        char bar[32], eta[16];
        for (int i = 0; i < width; i++) bar[i] = i < filled ? '#' : '.';
        bar[width] = '\0';
        dz_cli_fmt_duration(r->eta_s, eta, sizeof eta);
        fprintf(stderr, "\r[%s] %s %lld/%lld %s  ETA %s\033[K", bar, r->what, (long long)r->done,
                (long long)r->total, r->unit, eta);
    }
    fflush(stderr);
}

static void show_lines(const dz_progress_report *r) {
    static int last_tenth;
    static double last_line;
    char t[16];
    if (r->first) last_tenth = -1, last_line = 0;
    if (r->final) {
        dz_cli_fmt_duration(r->elapsed_s, t, sizeof t);
        fprintf(stderr, "distzo: %s: %lld %s in %s\n", r->what, (long long)r->done, r->unit, t);
        return;
    }
    const int tenth = r->total > 0 ? (int)(10 * r->done / r->total) : 0;
    if (r->done >= r->total || (tenth <= last_tenth && r->elapsed_s - last_line < 30)) return; /* the end says it */
    last_tenth = tenth, last_line = r->elapsed_s;
    dz_cli_fmt_duration(r->eta_s, t, sizeof t);
    fprintf(stderr, "distzo: %s: %lld/%lld %s (%d%%), ETA %s\n", r->what, (long long)r->done, (long long)r->total,
            r->unit, (int)(100 * r->done / r->total), t);
}

/* On a terminal a message first clears the line a bar may be drawn on. */
static void log_line(dz_log_level level, const char *msg, void *user) {
    (void)user;
    static const char *names[] = {"debug", "info", "warning", "error"};
    fprintf(stderr, "\r\033[Kdistzo: %s: %s\n", names[level], msg);
}

static void show(const dz_progress_report *r, void *tty) {
    if (*(const int *)tty) show_bar(r);
    else show_lines(r);
}

void dz_cli_progress_init(void) {
    const char *after = getenv("DISTZO_PROGRESS_AFTER");
    char *end = NULL;
    const double delay = after && *after ? strtod(after, &end) : NAN;
    if (end && !*end && delay >= 0) dz_progress_set_delay(delay);
    static int tty;
    tty = isatty(2);
    dz_progress_set_sink(show, &tty);
    if (tty) dz_log_set_sink(log_line, NULL);
}
