/* HiZOO's curvature state in a checkpoint: checkpoint-N/curvature.bin, written inside the
 * checkpoint's temporary folder (so it appears with the weights, by the folder's rename)
 * and read back on resume before the seed log's replay.
 *
 * File (little-endian): 32-byte header "DZCURV\0\1", u32 version (1), u32 dtype (0: f32),
 * u64 n_floats (one per trainable element, table order), u64 table_fingerprint (the
 * trained model's or adapter's tensor names and shapes, dz_compute_table_hash); then
 * n_floats f32; then u32 CRC32 of every byte before it. */
#ifndef DZ_RUN_CURVATURE_FILE_H
#define DZ_RUN_CURVATURE_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "distzo/error.h"

#define DZ_CURVATURE_FILE "curvature.bin"

/* dir/curvature.bin from h[0..n) (through a temporary file, fsync'd, renamed). */
dz_status dz_curvature_save(const char *dir, const float *h, size_t n, uint64_t table_fp, dz_error *err);
/* dir/curvature.bin into h[0..n), after checking every field against n and table_fp and
 * the CRC: an error names the file and the field. */
dz_status dz_curvature_load(const char *dir, float *h, size_t n, uint64_t table_fp, dz_error *err);

#endif
