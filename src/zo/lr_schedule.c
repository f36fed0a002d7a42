/* Learning-rate schedules: linear warmup, then constant, linear decay or cosine. */
#include <math.h>

#include "distzo/zo.h"

float dz_lr_at(dz_lr_schedule s, float lr, int warmup, int total, int step) {
    if (warmup > 0 && step < warmup) return lr * (float)(step + 1) / (float)warmup;
    if (s == DZ_LR_CONSTANT || total <= warmup) return lr;
    const double progress = (double)(step - warmup) / (double)(total - warmup);
    if (s == DZ_LR_LINEAR) return (float)(lr * (1.0 - progress));
    return (float)(lr * 0.5 * (1.0 + cos(3.14159265358979323846 * progress)));
}
