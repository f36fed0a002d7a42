/* The one-byte code of a projected gradient (format in byte_code.h). */
#include "federated/byte_code.h"

#include <math.h>

uint8_t dz_fed_byte_encode(float g, float clip) {
    if (!isfinite(g)) return DZ_FED_BYTE_NONE;
    const double a = fabs((double)g);
    if (a == 0.0) return 0;
    double k = 127.0 + nearbyint(16.0 * log(a / (double)clip));
    if (k > 127.0) k = 127.0;
    if (k < 1.0) return 0; /* below the smallest magnitude: nothing to say */
    return (uint8_t)((g < 0 ? 0x80 : 0) | (int)k);
}

float dz_fed_byte_decode(uint8_t b, float clip) {
    if (b == DZ_FED_BYTE_NONE) return NAN;
    const int k = b & 0x7F;
    if (k == 0) return 0.0f;
    const float m = (float)((double)clip * exp((double)(k - 127) / 16.0));
    return b & 0x80 ? -m : m;
}
