/* The rotary embedding's angle table (backend.h): computed once per forward instead of
 * once per row of every layer. */
#include <math.h>

#include "backend/backend.h"

void dz_rope_table_fill(float *cos_sin, int n_pos, int head_dim, float theta) {
    const int half = head_dim / 2;
    for (int i = 0; i < half; i++) {
        const double freq = pow((double)theta, -2.0 * i / head_dim);
        for (int p = 0; p < n_pos; p++) {
            const double ang = p * freq;
            cos_sin[(size_t)p * head_dim + i] = (float)cos(ang);
            cos_sin[(size_t)p * head_dim + half + i] = (float)sin(ang);
        }
    }
}
