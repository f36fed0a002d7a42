/* distzo: zeroth-order fine-tuning of language models. The public API. */
#ifndef DISTZO_H
#define DISTZO_H

#include "distzo/bench.h"
#include "distzo/data.h"
#include "distzo/dtype.h"
#include "distzo/error.h"
#include "distzo/log.h"
#include "distzo/metrics.h"
#include "distzo/model.h"
#include "distzo/parallel.h"
#include "distzo/plan.h"
#include "distzo/runtime.h"
#include "distzo/setup.h"
#include "distzo/store.h"
#include "distzo/task.h"
#include "distzo/tokenizer.h"
#include "distzo/train.h"
#include "distzo/util.h"
#include "distzo/zo.h"

#define DISTZO_VERSION "0.4.0"

#endif
