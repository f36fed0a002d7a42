/* Federated ZO (docs/FEDERATED.md): a coordinator (`distzo serve`) that owns a run folder
 * and its seed log, and workers (`distzo join`) on other machines, each with its own data,
 * that compute projected gradients for the (machine, sample) slots a round assigns them
 * and send one byte per slot. A round closes at a quorum or a deadline and becomes one
 * seed-log record (step = round, q = slots per round, g of absent slots 0, lr scaled by
 * slots / contributions); every replica applies the records in log order, so all of them,
 * and `distzo export` of the run, hold bitwise the same weights. */
#ifndef DISTZO_FEDERATED_H
#define DISTZO_FEDERATED_H

#include <stdint.h>

#include "distzo/error.h"
#include "distzo/train.h"

#ifdef __cplusplus
extern "C" {
#endif

/* How a projected gradient crosses the network. */
typedef enum dz_fed_code {
    DZ_FED_CODE_BYTE = 0, /* one byte: sign + log-magnitude (src/federated/byte_code.h) */
    DZ_FED_CODE_F32 = 1,  /* the float's four bytes (full precision, for comparison) */
} dz_fed_code;

/* The federated settings of a run (RUN/federated.json), beside run.json's training ones. */
typedef struct dz_fed_settings {
    int samples_per_worker; /* slots a worker gets per round (default 1) */
    int quorum;             /* a round closes once this many slots are in (0: all assigned) */
    double round_timeout;   /* seconds: a round closes then with what it has (default 30) */
    int min_workers;        /* a round opens once this many workers are connected (default 1) */
    double worker_timeout;  /* seconds without a request after which a worker counts as gone (default 10) */
    dz_fed_code code;
    float g_clip;           /* the byte code's largest |g| (default 64) */
    float robust_clip;      /* > 0: each |g| of a round at most this many times the round's median |g| (0: off) */
    uint32_t seed_pool;     /* > 0: FedKSeed, perturbations only from this many seeds (0: off) */
    int seed_sampling;      /* the pool's: 0 uniform, 1 importance (FedKSeed-Pro) */
    int max_joins_per_client; /* joins per client address and minute; also the new workers per address given slots (default 8) */
} dz_fed_settings;

void dz_fed_settings_default(dz_fed_settings *s);

typedef struct dz_fed_serve_config {
    dz_train_config train;   /* model, task, optimizer (q = slots per round), out_dir; no training data */
    dz_fed_settings fed;
    const char *listen;      /* "HOST:PORT" (port 0: any free one) */
    const char *token_file;  /* the shared secret every request must carry */
    const char *tls_cert, *tls_key; /* PEM files: serve HTTPS (both or neither) */
    int resume;              /* continue the run in train.out_dir from its seed log */
    double linger;           /* seconds to keep serving after the last round, for workers to catch up */
} dz_fed_serve_config;

typedef struct dz_fed_round_info {
    int round, rounds;       /* rounds done, total */
    int contributions, slots;
    int workers;             /* connected when the round closed */
    double loss, seconds;    /* mean training loss of the contributions; seconds the round took */
    int replayed;            /* first call after a resume: rounds replayed from the log */
    const char *url;         /* first call: where the coordinator listens */
    int has_eval, lm;        /* --test: the replica was evaluated after this round (round 0: before the first) */
    double test_score;       /* its test accuracy (lm: loss) */
} dz_fed_round_info;

typedef void (*dz_fed_round_cb)(const dz_fed_round_info *r, void *user);

/* Runs the coordinator until every round is done (and workers had `linger` seconds to
 * fetch the last records). cb (may be NULL) after each round. */
dz_status dz_fed_serve(const dz_fed_serve_config *cfg, dz_fed_round_cb cb, void *user, dz_error *err);

typedef struct dz_fed_join_config {
    const char *url;         /* http://HOST:PORT */
    const char *token_file;
    const char *ca_file;     /* PEM: the certificate(s) to trust for an https URL (NULL: the system's) */
    const char *data;        /* this machine's training file (never sent) */
    const char *model;       /* the base model here (NULL: the path in the run's settings) */
    const char *name;        /* shown in the coordinator's log (NULL: none) */
    const char *save;        /* folder: the weights at the end, HF layout (NULL: not saved) */
    double retry_for;        /* seconds to keep retrying an unreachable coordinator (default 60) */
    const char *backend;     /* what the replica runs on (dz_backend_create; NULL: cpu) */
    int keep_quantized;      /* an adapter run (--peft): a GGUF base held quantized (DZ_LOAD_KEEP_QUANTIZED) */
    const char *tokenizer;   /* the tokenizer here (NULL: the run's, else the one beside the model) */
    const char *adapter;     /* an adapter run started from a PEFT folder: that folder here (NULL: the run's path) */
} dz_fed_join_config;

typedef struct dz_fed_join_event {
    enum { DZ_FED_JOINED, DZ_FED_COMPUTED, DZ_FED_SUBMITTED, DZ_FED_APPLIED, DZ_FED_RESYNC } kind;
    uint32_t machine;        /* this worker's id in the current session */
    int round;               /* the round concerned (APPLIED: records applied so far) */
    int slots;               /* COMPUTED / SUBMITTED: slots of the round */
} dz_fed_join_event;

typedef void (*dz_fed_join_cb)(const dz_fed_join_event *ev, void *user);

typedef struct dz_fed_join_result {
    int rounds_applied, contributions, resyncs, rejoins;
    uint64_t bytes_sent, bytes_received; /* HTTP, headers included */
    uint64_t checksum;                   /* the replica's weights at the end (dz_zo_checksum_slice) */
} dz_fed_join_result;

/* Runs a worker until the coordinator says the run is finished. */
dz_status dz_fed_join(const dz_fed_join_config *cfg, dz_fed_join_cb cb, void *user, dz_fed_join_result *res,
                      dz_error *err);

#ifdef __cplusplus
}
#endif

#endif
