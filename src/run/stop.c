/* The stop request: one flag a signal handler may set (sig_atomic_t, nothing else touched). */
#include "run/stop.h"

#include <signal.h>

#include "distzo/train.h"

static volatile sig_atomic_t g_stop;

void dz_train_request_stop(void) { g_stop = 1; }

int dz_trainer_take_stop(void) {
    if (!g_stop) return 0;
    g_stop = 0;
    return 1;
}
