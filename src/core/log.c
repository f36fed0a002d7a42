#include "distzo/log.h"

#include <stdarg.h>
#include <stdio.h>

static dz_log_level g_min_level = DZ_LOG_INFO;
static dz_log_sink g_sink;
static void *g_sink_user;

void dz_log_set_level(dz_log_level min_level) { g_min_level = min_level; }

void dz_log_set_sink(dz_log_sink sink, void *user) {
    g_sink = sink;
    g_sink_user = user;
}

int dz_log_enabled(dz_log_level level) { return level >= g_min_level; }

void dz_log(dz_log_level level, const char *fmt, ...) {
    if (level < g_min_level) return;
    char buf[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (g_sink) {
        g_sink(level, buf, g_sink_user);
        return;
    }
    static const char *names[] = {"debug", "info", "warning", "error"};
    fprintf(stderr, "distzo: %s: %s\n", names[level], buf);
}
