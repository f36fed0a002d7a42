/* The federated coordinator's state, shared by its files: coordinator.c (the rounds and
 * dz_fed_serve), coordinator_requests.c (the HTTP requests of workers: admission, round
 * polls, submissions, the log) and coordinator_start.c (the run folder and the replica at
 * the start or a resume). */
#ifndef DZ_FEDERATED_COORDINATOR_H
#define DZ_FEDERATED_COORDINATOR_H

#include <pthread.h>
#include <stdint.h>

#include "distzo/federated.h"
#include "distzo/setup.h"
#include "federated/admission.h"
#include "federated/http.h"
#include "federated/protocol.h"
#include "federated/settings.h"
#include "run/metrics.h"
#include "run/prepare.h"
#include "run/seed_pool.h"
#include "run/seedlog.h"

typedef struct machine {
    uint32_t id;                  /* 0: a free entry */
    char key[DZ_FED_KEY_CHARS + 1];
    char name[DZ_FED_MAX_NAME + 1];
    double last_seen;
    uint32_t applied;             /* records the worker says it has applied */
    int n_slots;                  /* its slots in the open round */
    uint32_t slots[DZ_FED_MAX_SLOTS];
    int submitted;
    int polling;                  /* a round request of it is waiting: it is alive */
    char addr[DZ_FED_ADDRESS_CHARS]; /* the client address it joined from */
    int proven;                   /* it has delivered a value: slots without the new workers' cap */
    uint32_t applied_asked;       /* `applied` of its latest round request as it came (applied: as it is answered,
                                   * which the linger at the end waits on) */
} machine;

/* --test: the replica set up as train's is (its settings, compute and test data). */
typedef struct evaluator {
    dz_train_config cfg;
    dz_compute comp;
    dz_run_data data;
} evaluator;

typedef struct coordinator {
    pthread_mutex_t mu;
    pthread_cond_t cv;            /* any change of the state below */
    dz_train_config train;
    dz_fed_settings fed;
    const char *run_dir;
    uint32_t q;
    uint64_t fingerprint;
    char model_table[17];   /* the base's table fingerprint, run.json's model_table */
    char lora_init_fp[17];  /* --adapter DIR's file when the adapter starts from it, run.json's lora_init_fingerprint */
    char *run_json;               /* run.json's text, sent to joining workers */
    dz_zo_setup *setup;
    dz_seedlog *log;
    dz_metrics *metrics;
    machine m[DZ_FED_MAX_MACHINES];
    uint32_t next_id;
    /* the state workers see */
    uint64_t version;             /* bumped at every change a worker may wait for */
    uint32_t round;               /* the open round, or the next one */
    int ready;                    /* 0 while the run is set up: requests get 503 (workers retry) */
    int open, finished;
    double deadline;
    uint32_t published;           /* records announced (appended and applied to the replica) */
    uint64_t checksum;            /* the replica after `published` records */
    /* the open round's contributions */
    int n_assigned, n_in;
    float g[DZ_FED_MAX_SLOTS];
    uint8_t present[DZ_FED_MAX_SLOTS];
    double loss_sum;
    int loss_n;
    /* a K-seed pool run (fed.seed_pool > 0; run/seed_pool.h) */
    uint32_t log_q;               /* values per log record: q, or 2q (g, then seed indices) in a pool run */
    dz_seed_pool pool;            /* the scalars of the records logged so far */
    dz_seed_pool_weights weights; /* the replica as a function of the pool's scalars */
    double *prob;                 /* [K] scratch of the importance draw */
    uint32_t seeds[DZ_FED_MAX_SLOTS]; /* the open round's seed of each slot */
    uint8_t *pool_state;          /* GET /v1/pool's body after `published` records */
    dz_tokenizer *tok;            /* the base model's, written into checkpoints (NULL: none found) */
    evaluator *eval;              /* --test: the replica set up to evaluate it (owns setup); NULL: none */
    dz_fed_admission admission;   /* joins per client address (--max-joins-per-client) */
} coordinator;

/* coordinator_requests.c: a worker's request (the server's handler; user = the coordinator). */
void dz_fed_coord_request(void *user, const dz_fed_http_request *req, dz_fed_http_response *r);

/* coordinator_start.c: a new run's folder and replica, or a resumed run's (steps: the
 * command line's --steps); lock_fd: the run lock held; strings: what the read settings
 * point into (the caller frees). */
dz_status dz_fed_coord_start_run(coordinator *c, int *lock_fd, dz_error *err);
dz_status dz_fed_coord_resume_run(coordinator *c, int steps, int *lock_fd, char **strings, dz_error *err);

#endif
