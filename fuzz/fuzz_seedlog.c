/* libFuzzer target for the seed log's readers (src/run/seedlog.h): resume and export
 * rebuild weights from what they accept. Beyond "does not crash": a log the reader
 * accepts is its header and then whole records that the writer's encoder gives back
 * byte for byte, at consecutive steps from the start step; the writer's open (resume)
 * accepts the same log, with the reader's header as the expected one, keeps the same
 * records and leaves the file exactly header + records (a crash's tail cut off); a
 * checkpoint step's replay range lies inside the log. The last 8 input bytes, when
 * there are more than 104, also give the checkpoint step. */
#include "fuzz_input.h"

#include <string.h>
#include <sys/stat.h>

#include "distzo/log.h"
#include "run/seedlog.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    dz_log_set_level(DZ_LOG_ERROR); /* the torn-tail warnings */
    return 0;
}

/* The accepted log against the file's bytes: what the reader kept is what was written. */
static void check_records(const dz_seedlog *log, const uint8_t *data, size_t size) {
    const dz_seedlog_header *h = dz_seedlog_get_header(log);
    const size_t n = dz_seedlog_count(log), rb = dz_seedlog_record_bytes(h->q);
    if (h->q < 1 || h->q > DZ_SEEDLOG_MAX_Q || DZ_SEEDLOG_HEADER_BYTES + n * rb > size) abort();
    if (dz_seedlog_next_step(log) != h->start_step + (uint32_t)n) abort();
    uint8_t *again = malloc(rb);
    if (!again) abort();
    for (size_t i = 0; i < n; i++) {
        const dz_seedlog_record r = dz_seedlog_get(log, i);
        if (r.step != h->start_step + (uint32_t)i) abort();
        dz_seedlog_encode_record(h->q, r.step, r.lr, r.g, again);
        if (memcmp(again, data + DZ_SEEDLOG_HEADER_BYTES + i * rb, rb)) abort();
    }
    free(again);
}

static void check_replay(const dz_seedlog *log, int64_t ckpt) {
    size_t first, count;
    dz_error err;
    if (dz_seedlog_replay_range(log, ckpt, &first, &count, &err) != DZ_OK) return;
    if (first > dz_seedlog_count(log) || count > dz_seedlog_count(log) - first) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_file(0, data, size);
    dz_error err;
    dz_seedlog *reader = NULL, *writer = NULL;
    if (dz_seedlog_open_read(path, NULL, &reader, &err) != DZ_OK) {
        /* what the reader refuses, resume refuses too (it may only cut a crash's tail) */
        if (dz_seedlog_open(path, NULL, 0, &writer, &err) == DZ_OK) abort();
        return 0;
    }
    check_records(reader, data, size);
    int64_t ckpt = 0;
    if (size > DZ_SEEDLOG_HEADER_BYTES + 8) memcpy(&ckpt, data + size - 8, 8);
    check_replay(reader, ckpt);
    check_replay(reader, (int64_t)dz_seedlog_get_header(reader)->start_step - 1 + (int64_t)(ckpt & 7));

    const dz_seedlog_header h = *dz_seedlog_get_header(reader);
    if (dz_seedlog_open(path, &h, 0, &writer, &err) != DZ_OK) abort();
    const size_t n = dz_seedlog_count(writer);
    if (n != dz_seedlog_count(reader)) abort();
    check_records(writer, data, size);
    if (dz_seedlog_close(writer, &err) != DZ_OK) abort();
    struct stat st;
    if (stat(path, &st) != 0 || (size_t)st.st_size != DZ_SEEDLOG_HEADER_BYTES + n * dz_seedlog_record_bytes(h.q))
        abort();
    dz_seedlog_close(reader, &err);
    return 0;
}
