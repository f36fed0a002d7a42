/* HiZOO's curvature state in a checkpoint: checkpoint-N/curvature.bin, written inside the
 * checkpoint's temporary folder (so it appears with the weights, by the folder's rename)
 * and read back on resume before the seed log's replay.
 *
 * File (little-endian): header "DZCURV\0\1", u32 version, u32 dtype (0: f32), u64 n_floats
 * (table order), u64 table_fingerprint (the trained model's or adapter's tensor names and
 * shapes, dz_compute_table_hash); version 2 adds u32 layout and u32 reserved (0); then
 * n_floats f32; then u32 CRC32 of every byte before it. Layout 0 (HiZOO, --hizoo-rank 0)
 * is written as version 1 (32-byte header): one float per trainable element. Layout 1
 * (HiZOO-L, --hizoo-rank 1) is version 2 (40-byte header): per tensor in table order, a
 * 2-D tensor's rows + cols + 1 factors (src/pipeline/hessian_factors.c), a vector's one
 * float per element. */
#ifndef DZ_RUN_CURVATURE_FILE_H
#define DZ_RUN_CURVATURE_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "distzo/error.h"

#define DZ_CURVATURE_FILE "curvature.bin"

/* dir/curvature.bin from h[0..n) (through a temporary file, fsync'd, renamed). */
dz_status dz_curvature_save(const char *dir, const float *h, size_t n, uint64_t table_fp, int layout,
                            dz_error *err);
/* dir/curvature.bin into h[0..n), after checking every field against n and table_fp and
 * layout and the CRC: an error names the file and the field. */
dz_status dz_curvature_load(const char *dir, float *h, size_t n, uint64_t table_fp, int layout, dz_error *err);
/* CRC-32 of h[0..n): trainer_state.json's curvature_checksum, which ties curvature.bin to
 * its checkpoint (a file of another checkpoint of the same run passes every other check). */
uint32_t dz_curvature_checksum(const float *h, size_t n);

#endif
