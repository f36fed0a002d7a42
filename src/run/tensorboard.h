/* TensorBoard event files, written by hand: scalars only, no protobuf library.
 *
 * File: RUN_DIR/events.out.tfevents.<unix seconds>.<host>.<pid>, one per process start
 * (TensorBoard reads every file of a folder whose name holds "tfevents"). The file is a
 * sequence of TFRecord records:
 *
 *   uint64 length             little-endian, the byte count of data
 *   uint32 masked_crc(length) CRC32C (Castagnoli) of those 8 bytes, masked
 *   byte   data[length]       one serialized tensorflow.Event
 *   uint32 masked_crc(data)
 *
 * masked_crc(x) = ((c >> 15) | (c << 17)) + 0xa282ead8 (mod 2^32), c = crc32c(x).
 * Each Event is protobuf, encoded field by field (tag = field number << 3 | wire type):
 *
 *   Event:   1 wall_time double  (0x09, 8 bytes LE: seconds since the Unix epoch)
 *            2 step      int64   (0x10, varint)
 *            3 file_version string (0x1a, length-delimited) "brain.Event:2": first record only
 *            5 summary   Summary (0x2a, length-delimited)
 *   Summary: 1 value     Value   (0x0a, length-delimited), one per event here
 *   Value:   1 tag       string  (0x0a, length-delimited), e.g. "train/loss"
 *            2 simple_value float (0x15, 4 bytes LE)
 *
 * Records are queued whole and written with one write() per metrics row (dz_tb_flush), so
 * a killed process leaves whole records (at worst a torn last one, where readers stop):
 * every prefix stays readable. A resumed run starts a new file; TensorBoard merges a
 * folder's files by step.
 * tools/check_tensorboard_events.py reads a file with TensorBoard's own reader; the test
 * tests/test_tensorboard.c checks the CRC against published vectors and decodes the
 * records on its own. */
#ifndef DZ_RUN_TENSORBOARD_H
#define DZ_RUN_TENSORBOARD_H

#include <stddef.h>
#include <stdint.h>

#include "distzo/error.h"

typedef struct dz_tb_writer dz_tb_writer;

/* CRC32C (Castagnoli, reflected polynomial 0x82f63b78), and TFRecord's masked form. */
uint32_t dz_crc32c(const void *data, size_t n);
uint32_t dz_crc32c_masked(const void *data, size_t n);

/* One framed record of a scalar event into buf (cap bytes); returns its size, or 0 when
 * cap is too small (a tag of up to 200 bytes needs under 256). */
size_t dz_tb_scalar_record(uint8_t *buf, size_t cap, double wall_time, int64_t step, const char *tag, float value);

/* Creates path (atomically, holding the file_version record stamped wall_time) and opens
 * it for appending; dz_tb_open_in names a new file in dir as above. */
dz_status dz_tb_open(const char *path, double wall_time, dz_tb_writer **out, dz_error *err);
dz_status dz_tb_open_in(const char *dir, dz_tb_writer **out, dz_error *err);
/* Queues one scalar event (no I/O; records queue in a fixed buffer, flushed when full). */
dz_status dz_tb_scalar(dz_tb_writer *w, double wall_time, int64_t step, const char *tag, float value,
                       dz_error *err);
/* Writes the queued records (whole records per write()); sync: then fsync. */
dz_status dz_tb_flush(dz_tb_writer *w, int sync, dz_error *err);
/* Flushes, syncs and closes; NULL is fine. */
dz_status dz_tb_close(dz_tb_writer *w, dz_error *err);
/* Seconds since the Unix epoch (an event's wall_time). */
double dz_tb_wall_time(void);

#endif
