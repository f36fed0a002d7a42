/* The seed log: RUN_DIR/seeds.log, the append-only record of every ZO step.
 *
 * With the perturbation RNG keyed by (run seed, step, sample), a step's update is fully
 * given by its lr and its q projected gradients g: the base model plus this log
 * reproduce the trajectory exactly. It is the source of truth past the last checkpoint:
 * resume loads the checkpoint at step S, replays records S+1..N, continues at N+1.
 *
 * File (little-endian):
 *   header, 104 bytes: "DZSEEDLG", u32 version (1), u32 q, u64 run seed, u32 perturbation
 *     distribution (low 16 bits) and ZO_RNG version - 1 (high 16 bits: 0 in logs of v1 and
 *     of builds before v2, which hence read as v1), f32 eps, u32 start step (the first record's step; the base model is
 *     the state before it), u8[64] base model fingerprint, u32 CRC32 of the 100 bytes before;
 *   records, 12 + 4q bytes each (16 for q = 1): u32 step, f32 lr, f32 g[q], u32 CRC32 of
 *     the record's bytes before it. Record i holds step start_step + i. An FZOO run
 *     (--estimator fzoo) has q = N, its directions, and g[j] = (l_j - l0) / (eps sigma):
 *     the update's division by q makes FZOO's coefficient (docs/ESTIMATORS.md, "FZOO").
 *
 * Crash safety: the header is written to a temp file, fsync'd and renamed into place, so
 * the file always has a whole header. Each append is one write() (a killed process loses
 * no appended record); fdatasync runs every sync_every records. A crash can leave a torn
 * tail (part of the last record) or, after a crash of the machine, an unwritten one
 * (zeros): the writer's open cuts it off (with a warning) and keeps the rest; a reader's
 * open leaves the file alone. Anything else that fails a CRC (a whole record of other
 * bytes, or a bad record followed by good ones) is damage, never a crash artefact: open
 * refuses it, naming the record and its byte offset. */
#ifndef DZ_RUN_SEEDLOG_H
#define DZ_RUN_SEEDLOG_H

#include <stddef.h>
#include <stdint.h>

#include "distzo/error.h"

#define DZ_SEEDLOG_VERSION 1u
#define DZ_SEEDLOG_HEADER_BYTES 104
#define DZ_SEEDLOG_MAX_Q 65536u
/* fdatasync every this many appends unless told otherwise: a crash of the machine (not of
 * the process) loses at most this many of the newest records, which resume recomputes. */
#define DZ_SEEDLOG_SYNC_EVERY_DEFAULT 64

typedef enum dz_seedlog_dist { DZ_SEEDLOG_RADEMACHER = 0, DZ_SEEDLOG_GAUSSIAN = 1 } dz_seedlog_dist;

typedef struct dz_seedlog_header {
    uint64_t run_seed;
    uint32_t q;          /* samples per step, 1..DZ_SEEDLOG_MAX_Q */
    uint32_t dist;       /* dz_seedlog_dist */
    uint32_t rng;        /* ZO_RNG version (docs/ZO_RNG.md): 1 or 2; 0 is taken as 1 */
    float eps;
    uint32_t start_step; /* step of the first record */
    uint8_t fingerprint[64]; /* of the base model; opaque bytes (zero-padded text is fine) */
} dz_seedlog_header;

typedef struct dz_seedlog_record {
    uint32_t step;
    float lr;
    const float *g; /* q values; valid until the next append, truncate or close */
} dz_seedlog_record;

typedef struct dz_seedlog dz_seedlog;

/* Bytes per record for q samples. */
size_t dz_seedlog_record_bytes(uint32_t q);
/* One record in the file's format (dz_seedlog_record_bytes(q) bytes, CRC included): what
 * append writes, and what a federated coordinator sends its workers (src/federated). */
void dz_seedlog_encode_record(uint32_t q, uint32_t step, float lr, const float *g, uint8_t *out);
/* The reverse: 0, or -1 when the record fails its CRC (nothing is then trusted). */
int dz_seedlog_decode_record(uint32_t q, const uint8_t *in, uint32_t *step, float *lr, float *g);

/* Creates path with header h and no records, atomically, then opens it for appending.
 * Fails if path exists (resume opens it instead). sync_every: fdatasync every that many
 * appends; 0 = only in dz_seedlog_sync / close. */
dz_status dz_seedlog_create(const char *path, const dz_seedlog_header *h, int sync_every, dz_seedlog **out,
                            dz_error *err);

/* Opens an existing log: checks the header (and, when expect is non-NULL, that it equals
 * expect field by field), reads and checks every record, truncates a torn tail (warning),
 * takes an exclusive lock (one writer per log). */
dz_status dz_seedlog_open(const char *path, const dz_seedlog_header *expect, int sync_every, dz_seedlog **out,
                          dz_error *err);

/* The same for reading only (export, replay, inspection): no lock, nothing written; a
 * crash's tail is ignored in memory and left for the writer to cut. */
dz_status dz_seedlog_open_read(const char *path, const dz_seedlog_header *expect, dz_seedlog **out, dz_error *err);
/* The same, silent about a torn tail: a look before the writer's open, which says it. */
dz_status dz_seedlog_peek(const char *path, const dz_seedlog_header *expect, dz_seedlog **out, dz_error *err);

/* The settings that shape every step's update (run seed, q, distribution, ZO_RNG version,
 * eps) are want's: DZ_ERR_INVALID naming path and the first that differs. Opening with an
 * expected header checks these, the start step and the fingerprint. */
dz_status dz_seedlog_check_settings(const char *path, const dz_seedlog_header *got, const dz_seedlog_header *want,
                                    dz_error *err);

/* Appends the record of step, which must be the next one (start_step + count). */
dz_status dz_seedlog_append(dz_seedlog *log, uint32_t step, float lr, const float *g, dz_error *err);
/* fdatasync now (call before writing a checkpoint: the log must reach the checkpoint). */
dz_status dz_seedlog_sync(dz_seedlog *log, dz_error *err);
/* Syncs and closes; NULL is fine. Returns the sync's status. */
dz_status dz_seedlog_close(dz_seedlog *log, dz_error *err);

const dz_seedlog_header *dz_seedlog_get_header(const dz_seedlog *log);
size_t dz_seedlog_count(const dz_seedlog *log);
/* The step the next append must carry: start_step + count. */
uint32_t dz_seedlog_next_step(const dz_seedlog *log);
/* Record i, 0 <= i < count (all records are held in memory: 8 + 4q bytes each). */
dz_seedlog_record dz_seedlog_get(const dz_seedlog *log, size_t i);

/* Resume from a checkpoint at ckpt_step (start_step - 1 = the base model): the records to
 * replay are first .. first + count - 1 (steps ckpt_step + 1 .. last). Fails, naming the
 * file, when the log does not reach ckpt_step (it was not synced before the checkpoint)
 * or the checkpoint is older than the log's start. */
dz_status dz_seedlog_replay_range(const dz_seedlog *log, int64_t ckpt_step, size_t *first, size_t *count,
                                  dz_error *err);

/* Drops records with step > step (durably; step = start_step - 1 drops all). Not part of
 * resume, which replays them: this is for deliberately branching a run off an earlier
 * checkpoint. */
dz_status dz_seedlog_truncate_after(dz_seedlog *log, int64_t step, dz_error *err);

/* CRC-32 (IEEE 802.3, as zlib's crc32): crc = 0 to start, pass the previous value to continue. */
uint32_t dz_crc32(uint32_t crc, const void *data, size_t len);

#endif
