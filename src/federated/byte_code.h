/* The one-byte projected gradient (docs/FEDERATED.md, "The one-byte code").
 *
 * A byte b holds a sign (bit 7: 1 = negative) and a 7-bit log-magnitude k = b & 0x7F:
 *   k = 0           g = 0 (b = 0x00); b = 0x80 means "no value" (a non-finite g)
 *   k = 1 .. 127    |g| = clip * exp((k - 127) / 16)
 * so |g| runs from clip * e^-7.875 (clip * 3.8e-4) to clip in steps of e^(1/16) (6.5%,
 * the resolution of justonebyte's round(16 ln|g|)). Encoding rounds 16 ln(|g| / clip) to
 * the nearest integer: |g| above clip is clipped to it, |g| below half the smallest step
 * becomes 0. Only the coordinator decodes (once, into the float it logs), so replicas never
 * depend on two machines' exp agreeing. */
#ifndef DZ_FEDERATED_BYTE_CODE_H
#define DZ_FEDERATED_BYTE_CODE_H

#include <stdint.h>

enum { DZ_FED_BYTE_NONE = 0x80 };

uint8_t dz_fed_byte_encode(float g, float clip);
/* The value of b; NaN for DZ_FED_BYTE_NONE. */
float dz_fed_byte_decode(uint8_t b, float clip);

#endif
