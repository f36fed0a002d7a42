/* The library's only way to say anything: a leveled logger with a replaceable sink. */
#ifndef DISTZO_LOG_H
#define DISTZO_LOG_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum dz_log_level { DZ_LOG_DEBUG, DZ_LOG_INFO, DZ_LOG_WARN, DZ_LOG_ERROR } dz_log_level;
typedef void (*dz_log_sink)(dz_log_level level, const char *msg, void *user);

void dz_log_set_level(dz_log_level min_level);
/* NULL restores the default sink (stderr). */
void dz_log_set_sink(dz_log_sink sink, void *user);
/* 1 when messages of this level are shown (the level set is at or below it). */
int dz_log_enabled(dz_log_level level);
void dz_log(dz_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#ifdef __cplusplus
}
#endif

#endif
