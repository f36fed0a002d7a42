/* dz_train_config's defaults: MeZO's settings (run.json, read back by run_files.c, starts
 * from them too). */
#include "distzo/train.h"
#include "run/seedlog.h"

void dz_train_config_default(dz_train_config *c) {
    *c = (dz_train_config){
        .data = {.task = "sst2", .train_examples = 1000, .dev_examples = 500, .seed = 42, .share_prompts = 1},
        .optim = {.lr = 1e-5f, .eps = 1e-3f, .batch = 16, .steps = 4000, .q = 1, .fuse = 1,
                  .lr_schedule = DZ_LR_CONSTANT, .seed = 0, .max_bad_steps = 5},
        .store = {.master_dtype = DZ_F32},
        .schedule = {.eval_every = 500, .eval_batch = 64, .checkpoint_every = 1000, .keep_checkpoints = 1,
                     .log_sync_every = DZ_SEEDLOG_SYNC_EVERY_DEFAULT},
    };
}
