/* A stop asked for from outside the loop (dz_train_request_stop, a SIGINT handler's call). */
#ifndef DZ_RUN_STOP_H
#define DZ_RUN_STOP_H

/* 1 once when a stop was asked for since the last call (the request is then spent). */
int dz_trainer_take_stop(void);

#endif
