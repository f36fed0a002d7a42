/* Test-only fault injection: faults a test script asks the trainer to cause, so that the
 * paths that must catch them (the replica check) can be shown to. Never part of a run's
 * settings or of the public API: scripts set DISTZO_TEST_CORRUPT=NODE:STEP
 * (tests/cli/mpi.sh). */
#ifndef DZ_RUN_FAULTS_H
#define DZ_RUN_FAULTS_H

typedef struct dz_faults {
    int corrupt_step;  /* after this step (0: never) ... */
    int corrupt_node;  /* ... flip one bit of this node's masters */
} dz_faults;

/* The faults the environment asks for (none when unset or malformed). */
dz_faults dz_faults_get(void);

#endif
