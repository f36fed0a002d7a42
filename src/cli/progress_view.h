/* How the command line shows what takes long: the library's progress reports (distzo/progress.h)
 * on stderr, a bar redrawn in place on a terminal, occasional lines when piped; rates and
 * durations as a person reads them. */
#ifndef DZ_CLI_PROGRESS_VIEW_H
#define DZ_CLI_PROGRESS_VIEW_H

#include <stddef.h>

/* The sink for every command: a bar when stderr is a terminal (the logger's messages then
 * clear its line first), else lines. The delay before anything shows: 2 s, or
 * $DISTZO_PROGRESS_AFTER seconds (tests set 0). */
void dz_cli_progress_init(void);

/* "45s", "12m", "1.5h"; "?" for an unknown (NaN, negative) duration. */
void dz_cli_fmt_duration(double secs, char *buf, size_t cap);
/* "3.2 steps/s", or below one step a second "4.2 s/step". */
void dz_cli_fmt_rate(double steps_per_s, char *buf, size_t cap);

#endif
