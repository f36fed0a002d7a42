/* The textbook bitwise CRC loop, the tests' independent reference for the table-driven
 * CRCs of the seed log (CRC-32, IEEE 802.3: poly 0xEDB88320) and the TensorBoard event
 * files (CRC-32C, Castagnoli: poly 0x82F63B78), both reflected, init and final xor ~0. */
#ifndef DZ_TESTS_REF_CRC_H
#define DZ_TESTS_REF_CRC_H

#include <stddef.h>
#include <stdint.h>

static inline uint32_t ref_crc_bitwise(uint32_t poly, const uint8_t *p, size_t n) {
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++) c = (c >> 1) ^ (poly & (0u - (c & 1)));
    }
    return ~c;
}

#endif
