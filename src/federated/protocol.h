/* The federated protocol's messages (docs/FEDERATED.md): JSON bodies over HTTP/1.1, each
 * field bounded and checked on arrival. Every request carries "Authorization: Bearer
 * TOKEN". 64-bit values (fingerprints, checksums) travel as 16 lowercase hex digits, a
 * machine's key as 32.
 *
 *   GET  /v1/run     -> {"protocol": 1, "fingerprint": HEX16 (the base model), "q": SLOTS,
 *                        "code": "byte"|"f32", "g_clip": X, "run": {run.json}}
 *   POST /v1/join    {"protocol": 1, "fingerprint": HEX16, "name": STR}
 *                    -> {"machine": ID, "key": HEX32}
 *   GET  /v1/round?machine=ID&key=HEX32&applied=N[&version=V&wait_ms=MS]
 *                    (waits up to MS, at most 5000, while the state is still version V)
 *                    -> {"version": V, "round": R, "log_count": N, "open": B, "finished": B,
 *                        "checksum": HEX16 (the coordinator's replica after log_count records),
 *                        "slots": [S...] (this machine's, when open), "deadline_ms": MS}
 *   POST /v1/submit  {"machine": ID, "key": HEX32, "round": R, "slots": [S...],
 *                     "codes": [B...] (byte code) | "g_bits": [U32...] (f32), "loss": X|null}
 *                    -> {"accepted": N}
 *   GET  /v1/log?from=I&max=M  -> application/octet-stream: records I.. of the seed log in
 *                    its own record format (src/run/seedlog.h), at most M (<= 4096)
 *   GET  /v1/pool    -> application/octet-stream: a K-seed pool run's K accumulated scalars
 *                    (dz_fed_pool_state_encode)
 * A pool run's /v1/run adds "seed_pool": K, "seed_sampling": "uniform"|"importance"; its
 * /v1/round adds "seeds": [K...] beside "slots"; its log records hold 2q values.
 * Errors: a status >= 400 and {"error": "what went wrong"}. */
#ifndef DZ_FEDERATED_PROTOCOL_H
#define DZ_FEDERATED_PROTOCOL_H

#include <stddef.h>
#include <stdint.h>

#include "distzo/error.h"
#include "distzo/federated.h"
#include "distzo/zo.h"

enum {
    DZ_FED_PROTOCOL = 1,
    /* a K-seed pool run's: a worker that knew only protocol 1 would perturb along the wrong
     * z, so it is refused at GET /v1/run (and a join of protocol 1 at POST /v1/join) */
    DZ_FED_PROTOCOL_POOL = 2,
    DZ_FED_MAX_BODY = 16384,       /* request body bytes the coordinator reads */
    DZ_FED_MAX_RESPONSE = 1 << 24, /* response bytes a worker reads (a log page: 4096 x 268) */
    DZ_FED_MAX_MACHINES = 256,     /* workers connected at once */
    DZ_FED_MAX_SLOTS = DZ_ZO_MAX_Q,
    DZ_FED_MAX_LOG_PAGE = 4096,    /* records per /v1/log answer */
    DZ_FED_KEY_CHARS = 32,
    DZ_FED_MAX_NAME = 64,
    DZ_FED_MAX_WAIT_MS = 5000,     /* a round request waits at most this long for news */
    DZ_FED_MAX_POOL = 1 << 21,     /* seeds of a pool (DZ_SEED_POOL_MAX of run/seed_pool.h) */
};

typedef struct dz_fed_join_req {
    int protocol;
    uint64_t fingerprint;
    char name[DZ_FED_MAX_NAME + 1];
} dz_fed_join_req;

typedef struct dz_fed_run_info {
    uint64_t fingerprint;      /* "protocol" is 1, or 2 with seed_pool */
    uint32_t q;
    dz_fed_code code;
    float g_clip;
    uint32_t seed_pool;  /* K > 0: a K-seed pool run ("seed_pool", absent or 0: off) */
    int seed_sampling;   /* "seed_sampling": 0 uniform, 1 importance (with seed_pool) */
    char *run_json; /* run.json's object as text (malloc'd by the parser; the caller frees it) */
} dz_fed_run_info;

typedef struct dz_fed_join_resp {
    uint32_t machine;
    char key[DZ_FED_KEY_CHARS + 1];
} dz_fed_join_resp;

typedef struct dz_fed_round {
    uint64_t version;
    uint32_t round, log_count;
    int open, finished;
    uint64_t checksum;
    int n_slots;
    uint32_t slots[DZ_FED_MAX_SLOTS];
    uint32_t pool;                    /* K of a pool run (not sent: "seeds" is written when > 0) */
    uint32_t seeds[DZ_FED_MAX_SLOTS]; /* a pool run: the seed index of each slot ("seeds", as many as slots) */
    uint32_t deadline_ms;
} dz_fed_round;

typedef struct dz_fed_submit {
    uint32_t machine;
    char key[DZ_FED_KEY_CHARS + 1];
    uint32_t round;
    int n;
    uint32_t slots[DZ_FED_MAX_SLOTS];
    uint32_t values[DZ_FED_MAX_SLOTS]; /* byte codes (0..255), or the floats' bits */
    double loss;                        /* NaN: not given */
} dz_fed_submit;

/* Each *_json returns a malloc'd NUL-terminated text (NULL: out of memory). Each *_parse
 * reads len bytes (no NUL needed) and fails with DZ_ERR_FORMAT naming the field. */
char *dz_fed_run_info_json(const dz_fed_run_info *m);
dz_status dz_fed_run_info_parse(const char *body, size_t len, dz_fed_run_info *m, dz_error *err);
char *dz_fed_join_req_json(const dz_fed_join_req *m);
dz_status dz_fed_join_req_parse(const char *body, size_t len, dz_fed_join_req *m, dz_error *err);
char *dz_fed_join_resp_json(const dz_fed_join_resp *m);
dz_status dz_fed_join_resp_parse(const char *body, size_t len, dz_fed_join_resp *m, dz_error *err);
char *dz_fed_round_json(const dz_fed_round *m);
/* q: the run's slots per round (slot numbers are checked against it); pool: its K seeds
 * (0: not a pool run, "seeds" must be absent; else present, one per slot, each < K). */
dz_status dz_fed_round_parse(const char *body, size_t len, uint32_t q, uint32_t pool, dz_fed_round *m, dz_error *err);
char *dz_fed_submit_json(const dz_fed_submit *m, dz_fed_code code);
dz_status dz_fed_submit_parse(const char *body, size_t len, uint32_t q, dz_fed_code code, dz_fed_submit *m,
                              dz_error *err);
/* GET /v1/pool's body, the K-seed state a joining worker downloads instead of the log
 * (little-endian): "DZKSEED1", u32 log_count (the records it accumulates), u32 K,
 * f32 acc[K] (run/seed_pool.h), u32 CRC32 of the bytes before: 20 + 4K bytes. */
enum { DZ_FED_POOL_HEADER = 16 };
size_t dz_fed_pool_state_bytes(uint32_t k);
void dz_fed_pool_state_encode(uint32_t log_count, uint32_t k, const float *acc, uint8_t *out);
/* Checks magic, K (must be `k`), length and CRC, naming what is wrong. */
dz_status dz_fed_pool_state_decode(const uint8_t *in, size_t len, uint32_t k, uint32_t *log_count, float *acc,
                                   dz_error *err);

char *dz_fed_error_json(const char *message);
/* The "error" of an error body into msg (cap bytes); the body itself when it is not one. */
void dz_fed_error_message(const char *body, size_t len, char *msg, size_t cap);

const char *dz_fed_code_name(dz_fed_code c);
/* 0, or -1 for a name that is neither "byte" nor "f32". */
int dz_fed_code_parse(const char *name, dz_fed_code *c);

/* A key: 32 lowercase hex digits from /dev/urandom. 0, or -1 (errno). */
int dz_fed_new_key(char key[DZ_FED_KEY_CHARS + 1]);
/* The shared secret in path (--token-file): its first line, 16..256 printable bytes
 * without spaces; DZ_ERR_INVALID naming the file otherwise. */
enum { DZ_FED_TOKEN_MAX = 256 };
dz_status dz_fed_read_token(const char *path, char out[DZ_FED_TOKEN_MAX + 1], dz_error *err);
/* Equal strings, in time that depends only on their lengths. */
int dz_fed_secret_equal(const char *a, const char *b);

#endif
