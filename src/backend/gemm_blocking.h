/* The cache blocking of distzo's GEMM (gemm.c), per instruction-set level and per machine.
 *
 * The blocking decides only which floats sit in which cache when: every output is still
 * one FMA chain over k in order (gemm.h), so any blocking gives the same bits. */
#ifndef DZ_BACKEND_GEMM_BLOCKING_H
#define DZ_BACKEND_GEMM_BLOCKING_H

#include "core/isa.h"

typedef struct dz_gemm_blocking {
    int mc; /* rows of x per block (a multiple of the micro-tile's rows), read from L2 */
    int kc; /* K per block: a panel of w (kc x NR) the block's tiles share */
    int nc; /* columns of w per packed block (kc x nc), from L2/L3 */
} dz_gemm_blocking;

/* The blocking of level isa's micro-kernel (mr rows a tile) on this machine, within max (the
 * packing buffers' sizes, and the blocking of every level but AVX2). AVX2's follows the L2
 * size, read once per process (sysconf, else /sys), which DISTZO_GEMM_L2 (bytes, or with
 * a K or M suffix) overrides: DISTZO_GEMM_L2=512K runs a Zen 2's blocking on any machine. */
dz_gemm_blocking dz_gemm_blocking_for(dz_isa isa, int mr, dz_gemm_blocking max);

/* The L2 size the blocking uses, in bytes (after any override). */
long dz_gemm_blocking_l2(void);

#endif
