/* distzo: zeroth-order fine-tuning of language models. The public API. */
#ifndef DISTZO_H
#define DISTZO_H

#include "distzo/data.h"
#include "distzo/dtype.h"
#include "distzo/error.h"
#include "distzo/log.h"
#include "distzo/model.h"
#include "distzo/task.h"
#include "distzo/tokenizer.h"

#define DISTZO_VERSION "0.1.0"

#endif
