/* Shared pieces of the data layer: a growable dataset, a line reader over a file held in
 * memory, and UTF-8 validation. Internal to src/data. */
#ifndef DZ_DATA_INTERNAL_H
#define DZ_DATA_INTERNAL_H

#include <stddef.h>

#include "distzo/data.h"

/* Index of the first byte of s[0..n) that is not part of well-formed UTF-8 (overlongs,
 * surrogates, code points above U+10FFFF and NUL bytes are rejected), or n if all is well. */
size_t dz_utf8_invalid_at(const char *s, size_t n);

/* Whole-file line reader. Lines are NUL-terminated in place (the buffer is modified),
 * a trailing CR is dropped, a UTF-8 BOM at the start of the file is skipped, and each
 * line is checked for length (DZ_DATA_MAX_LINE) and UTF-8 before it is handed out. */
typedef struct dz_line_reader {
    const char *path;
    char *buf;          /* owned: dz_read_file's buffer */
    size_t len, pos;
    int lineno;         /* 1-based number of the line last returned */
} dz_line_reader;

dz_status dz_lines_open(dz_line_reader *r, const char *path, dz_error *err);
/* Sets *line (and *n, its length) to the next line, or *line = NULL at end of file. */
dz_status dz_lines_next(dz_line_reader *r, char **line, size_t *n, dz_error *err);
void dz_lines_close(dz_line_reader *r);

/* Zeroes *out and records path (copied). */
dz_status dz_dataset_init(dz_dataset *out, const char *path, dz_error *err);
/* Appends a copy of text[0..n) with label, from line `line` of the source (0: none);
 * *cap is the caller's running capacity. */
dz_status dz_dataset_push(dz_dataset *ds, int *cap, const char *text, size_t n, int label, int line,
                          dz_error *err);

/* 1 if s[0..n) is empty or only ASCII whitespace. */
int dz_is_blank(const char *s, size_t n);

#endif
