/* The parameter store on disk (ZO2 streaming): a model's weights in one file, moved to
 * and from memory one block at a time, optionally by a background I/O thread.
 *
 * The file is an ordinary safetensors file (HF names, the model's dtype) written by
 * dz_safetensors_write with the tensors in parameter-table order. With one dtype the
 * writer keeps input order and leaves no gaps, so each block (a layer, or the global
 * block, which comes last) is one contiguous byte range: a block moves with one
 * pread/pwrite, and a tensor sits at a fixed offset inside its block's buffer.
 * dz_store_open checks this layout rather than trusting it, so a file written by anyone
 * else (or by a later writer that reorders) is refused instead of misread.
 *
 * Threads: one I/O thread per store runs the caller's queued functions (a block's
 * transfers and deferred update, so they overlap compute) in order. The queue is a fixed
 * ring of DZ_STORE_QUEUE requests (a full queue makes dz_store_start_call wait for room);
 * no block operation allocates. Synchronous calls (ranges, rows) run on the caller's
 * thread and may run while the queue is busy, but the caller must not touch a block (or a
 * buffer) that a queued call still uses: dz_store_wait first. Buffers passed to
 * dz_store_start_call must stay valid until dz_store_wait.
 *
 * Page cache (flag DZ_STORE_DROP_CACHE): without it the kernel caches the whole file,
 * which is what makes a store of a model that fits in RAM fast, but counts against a
 * container's memory limit and evicts everything else once the model does not fit. With
 * it, a read drops its range from the cache (POSIX_FADV_DONTNEED) once copied, and a
 * write is pushed to disk first (sync_file_range, waiting: DONTNEED skips dirty pages)
 * and then dropped, so the cache holds about one block per request in flight. The cost
 * is that writes wait for the disk; with the I/O thread that wait overlaps compute.
 * Durability is dz_store_sync (fdatasync); sync_file_range writes data, not metadata. */
#ifndef DZ_STORE_STORE_H
#define DZ_STORE_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "distzo/error.h"
#include "distzo/model.h"
#include "distzo/store.h" /* dz_store, dz_store_stats, dz_store_get_stats, dz_store_path */

enum { DZ_STORE_QUEUE = 16 };

enum { DZ_STORE_DROP_CACHE = 1u << 0 };

/* A --store option: "ram" (path NULL), "disk:PATH" or "disk-nocache:PATH" (flags get
 * DZ_STORE_DROP_CACHE). *path points into spec. DZ_ERR_INVALID for anything else. */
dz_status dz_store_parse_spec(const char *spec, const char **path, unsigned *flags, dz_error *err);

/* Writes m's tensors (HF names, table order) to path atomically in dtype, each tensor
 * converted as it is written, then opens it as a store: a model loaded in place (mapped)
 * becomes a store of another dtype without a converted copy in memory. A tied head is
 * written once (the table has no lm_head then). */
dz_status dz_store_create_as(const char *path, const dz_model *m, dz_dtype dtype, unsigned flags, dz_store **out,
                             dz_error *err);
/* Loads the model at path for dz_store_create_as(..., dtype): in place (mapped) when its
 * tensors are all f32 or all bf16, whatever dtype is, so the store is written tensor by
 * tensor without a converted copy of the model; else converted to dtype at load. */
dz_status dz_store_load_model(const char *path, dz_dtype dtype, dz_model **out, dz_error *err);
/* Opens an existing store file for reading and writing: every tensor of the table must be
 * present with dtype, shape and a byte range in table order with no gaps (DZ_ERR_FORMAT
 * otherwise, naming the file and tensor). The file keeps the layout dz_store_create gave
 * it: a checkpoint copied from a store re-opens as one. */
dz_status dz_store_open(const char *path, const dz_param_table *t, dz_dtype dtype, unsigned flags, dz_store **out,
                        dz_error *err);
/* Drains the queue (errors there are lost: dz_store_wait first to see them), stops the
 * thread, closes the file. NULL is fine. */
void dz_store_close(dz_store *s);

int dz_store_n_blocks(const dz_store *s);   /* n_layers + 1; the global block is last */
dz_dtype dz_store_dtype(const dz_store *s);
size_t dz_store_block_bytes(const dz_store *s, int block);
uint64_t dz_store_block_offset(const dz_store *s, int block); /* in the file */
/* Where tensor id starts inside its block's buffer, in bytes (a multiple of the element size). */
size_t dz_store_tensor_offset_in_block(const dz_store *s, int id);

/* Rows [row0, row0+nrows) of tensor id in the store's dtype (a vector has one row). */
dz_status dz_store_read_rows(dz_store *s, int id, int64_t row0, int64_t nrows, void *buf, dz_error *err);
/* Writes the tensors m still holds (a resident global block) into the store, then
 * dz_store_sync: the file is then the whole model (a checkpoint copies it). */
dz_status dz_store_save_resident(dz_store *s, const dz_model *m, dz_error *err);
/* Waits for the queue, then fdatasync: everything written so far is on disk. */
dz_status dz_store_sync(dz_store *s, dz_error *err);

/* Bytes [off, off+len) of a block (offsets inside the block), synchronously. */
dz_status dz_store_read_range(dz_store *s, int block, uint64_t off, size_t len, void *buf, dz_error *err);
dz_status dz_store_write_range(dz_store *s, int block, uint64_t off, size_t len, const void *buf, dz_error *err);

/* Work the I/O thread runs for the caller (a deferred update, so it overlaps compute).
 * It may call the synchronous transfers above; a failure is reported by dz_store_wait. */
typedef dz_status (*dz_store_fn)(void *user, int arg, void *buf, dz_error *err);
/* fn(user, arg, buf) on the I/O thread, in queue order. */
dz_status dz_store_start_call(dz_store *s, dz_store_fn fn, void *user, int arg, void *buf, dz_error *err);
/* Waits until every queued request has finished. Returns the first error since the last
 * wait (requests queued after a failure are skipped and their buffers left undefined),
 * then clears it. */
dz_status dz_store_wait(dz_store *s, dz_error *err);

#endif
