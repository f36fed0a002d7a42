/* Test-only fault injection: faults a test asks the trainer to cause, so that the paths
 * that must catch them (the replica check) can be shown to. Never part of a run's
 * settings: tests set them here, or scripts through DISTZO_TEST_CORRUPT=NODE:STEP. */
#ifndef DZ_RUN_FAULTS_H
#define DZ_RUN_FAULTS_H

typedef struct dz_faults {
    int corrupt_step;  /* after this step (0: never) ... */
    int corrupt_node;  /* ... flip one bit of this node's masters */
} dz_faults;

/* The faults in force: those dz_faults_set gave, else DISTZO_TEST_CORRUPT's (none when
 * unset or malformed). */
dz_faults dz_faults_get(void);
/* For tests; NULL: back to the environment's. */
void dz_faults_set(const dz_faults *f);

#endif
