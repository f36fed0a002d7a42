/* The attention's register tiles for one vector width: included by cpu_backend.c once per
 * ISA level, with ATTN_W (floats per vector: 16, 8 or 4) and ATTN_FN(name) (the level's
 * name for a function) defined; no include guard, on purpose.
 *
 * A tile is 16 lanes (16 keys of a score row, or 16 head dimensions of an output row) held
 * as ATTN_PARTS native vectors, for ATTN_ROWS query rows at once. The width is the level's
 * own so that the accumulators stay in registers: a 64-byte GCC vector on AVX2 or SSE is
 * split by the compiler through the stack and general registers, which made AVX2's
 * attention several times slower than its arithmetic. Each lane's arithmetic (a multiply,
 * then an add, in key or dimension order from 0) is the same at every width: the same bits. */

#define ATTN_PARTS (16 / ATTN_W)
typedef float ATTN_FN(vec) __attribute__((vector_size(4 * ATTN_W)));

/* Scores of the block's rows q[r] against keys [0, 16 * tiles) of kt[hd][kpad], into
 * sc + r * kpad: each score is the products summed over d in order, from 0. */
DZ_ISA_INLINE void ATTN_FN(block_scores)(float *sc, const float *const q[ATTN_ROWS], const float *kt, int kpad,
                                         int hd, int tiles) {
    for (int t = 0; t < tiles; t++) {
        ATTN_FN(vec) acc[ATTN_ROWS][ATTN_PARTS] = {{{0}}};
        for (int d = 0; d < hd; d++) {
            ATTN_FN(vec) k[ATTN_PARTS];
            for (int p = 0; p < ATTN_PARTS; p++) memcpy(&k[p], kt + (size_t)d * kpad + 16 * t + p * ATTN_W, sizeof k[p]);
            for (int r = 0; r < ATTN_ROWS; r++) {
                const float qd = q[r][d];
                for (int p = 0; p < ATTN_PARTS; p++) acc[r][p] += qd * k[p];
            }
        }
        for (int r = 0; r < ATTN_ROWS; r++)
            for (int p = 0; p < ATTN_PARTS; p++)
                memcpy(sc + (size_t)r * kpad + 16 * t + p * ATTN_W, &acc[r][p], sizeof acc[r][p]);
    }
}

/* Outputs o[r] = sum over keys j < nk0 + r of p[r][j] v_j, in key order, from 0 (nk0: the
 * keys of the block's first row; row r sees r more). v(j) is value row j of vs. */
DZ_ISA_INLINE void ATTN_FN(block_values)(float *const o[ATTN_ROWS], const float *sc, int kpad, int nr, int nk0,
                                         int hd, const key_source *vs) {
    int d0 = 0;
    for (; d0 + 16 <= hd; d0 += 16) {
        ATTN_FN(vec) acc[ATTN_ROWS][ATTN_PARTS] = {{{0}}};
        int j = 0;
        while (j < nk0) { /* the keys every row of the block sees */
            int end;
            for (const float *v = key_run(vs, j, nk0, &end) + d0; j < end; j++, v += vs->stride) {
                ATTN_FN(vec) vv[ATTN_PARTS];
                for (int p = 0; p < ATTN_PARTS; p++) memcpy(&vv[p], v + p * ATTN_W, sizeof vv[p]);
                for (int r = 0; r < ATTN_ROWS; r++) {
                    const float s = sc[(size_t)r * kpad + j];
                    for (int p = 0; p < ATTN_PARTS; p++) acc[r][p] += s * vv[p];
                }
            }
        }
        for (int r = 1; r < nr; r++) /* and each later row's own last keys */
            for (int jj = j; jj < nk0 + r; jj++) {
                const float *v = key_at(vs, jj) + d0, s = sc[(size_t)r * kpad + jj];
                for (int p = 0; p < ATTN_PARTS; p++) {
                    ATTN_FN(vec) vp;
                    memcpy(&vp, v + p * ATTN_W, sizeof vp);
                    acc[r][p] += s * vp;
                }
            }
        for (int r = 0; r < nr; r++)
            for (int p = 0; p < ATTN_PARTS; p++) memcpy(o[r] + d0 + p * ATTN_W, &acc[r][p], sizeof acc[r][p]);
    }
    for (int r = 0; r < nr; r++) /* a head dimension that is no multiple of 16: its last ones */
        for (int d = d0; d < hd; d++) {
            float acc = 0.0f;
            for (int j = 0, end; j < nk0 + r;)
                for (const float *v = key_run(vs, j, nk0 + r, &end) + d; j < end; j++, v += vs->stride)
                    acc += sc[(size_t)r * kpad + j] * *v;
            o[r][d] = acc;
        }
}

#undef ATTN_PARTS
