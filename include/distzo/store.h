/* A disk parameter store (ZO2 streaming: the layer masters in a file, moved block by
 * block): what a program can see of one, e.g. a benchmark measuring its I/O. It is
 * opened by the setup path (distzo/setup.h: --store disk:PATH). */
#ifndef DISTZO_STORE_H
#define DISTZO_STORE_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dz_store dz_store;

typedef struct dz_store_stats {
    uint64_t bytes_read, bytes_written; /* sync calls and the I/O thread together */
    uint64_t reads, writes;             /* operations (a block or a row range each) */
    double thread_io_s;                 /* seconds the I/O thread spent in pread/pwrite/cache calls */
    double thread_busy_s;               /* seconds it spent serving requests: I/O plus queued callbacks */
    double caller_io_s;                 /* the same for synchronous calls on the caller's thread */
    double wait_s;                      /* seconds callers blocked in dz_store_wait or on a full queue */
} dz_store_stats;

dz_store_stats dz_store_get_stats(dz_store *s);
/* The store's file. */
const char *dz_store_path(const dz_store *s);

#ifdef __cplusplus
}
#endif

#endif
