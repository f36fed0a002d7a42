/* Test-only fault injection: faults a test script asks the trainer to cause, so that the
 * paths that must catch them (the replica check) can be shown to. Never part of a run's
 * settings or of the public API: scripts set DISTZO_TEST_CORRUPT=NODE:STEP[:TENSOR]
 * (tests/cli/mpi.sh), TENSOR a tensor's name (e.g. model.norm.weight) or "last"; by
 * default the first tensor. */
#ifndef DZ_RUN_FAULTS_H
#define DZ_RUN_FAULTS_H

typedef struct dz_faults {
    int corrupt_step;  /* after this step (0: never) ... */
    int corrupt_node;  /* ... flip one bit of this node's masters ... */
    char corrupt_tensor[96]; /* ... in this tensor ("" the first, "last" the last) */
} dz_faults;

/* The faults the environment asks for (none when unset or malformed). */
dz_faults dz_faults_get(void);

#endif
