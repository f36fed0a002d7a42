/* Progress of a long operation (an evaluation, a seed log's replay). The library reports;
 * the program shows it (a bar, lines) through a sink it sets. Nothing is shown without a
 * sink, below the logger's info level (--quiet, ranks other than 0), or for an operation
 * that ends within the delay (2 s unless set), so short ones stay quiet. Each thread has
 * its own running operation: begin, add and end come from the thread that runs it. */
#ifndef DISTZO_PROGRESS_H
#define DISTZO_PROGRESS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dz_progress_report {
    const char *what, *unit; /* "evaluation", "examples" */
    int64_t done, total;
    double elapsed_s, eta_s; /* eta_s: NAN until something is done */
    int first;               /* the operation's first report */
    int final;               /* it ended (sent only after a first report) */
} dz_progress_report;

typedef void (*dz_progress_sink)(const dz_progress_report *r, void *user);

/* NULL: nothing is shown (the default). */
void dz_progress_set_sink(dz_progress_sink sink, void *user);
/* Seconds an operation runs before its first report (default 2). */
void dz_progress_set_delay(double seconds);

typedef struct dz_progress {
    const char *what, *unit;
    int64_t done, total;
    double t0, last_report;
    int shown, joined;
} dz_progress;

/* An operation begun while another one runs joins it: its adds count to the outer one
 * (an evaluation of dev and test is one operation, whichever set a scorer is on). */
void dz_progress_begin(dz_progress *p, const char *what, const char *unit, int64_t total);
/* n more units of the operation running now (none: nothing). */
void dz_progress_add(int64_t n);
void dz_progress_end(dz_progress *p);

#ifdef __cplusplus
}
#endif

#endif
