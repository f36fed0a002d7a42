/* Command-line options: a table per command, parsed in one place with clear errors. */
#ifndef DZ_CLI_ARGS_H
#define DZ_CLI_ARGS_H

#include <limits.h>
#include <stdint.h>
#include <stdio.h>

/* DZ_OPT_SEED: a 64-bit seed, 0..2^63-1 (uint64_t). */
typedef enum dz_opt_type { DZ_OPT_STR, DZ_OPT_INT, DZ_OPT_FLOAT, DZ_OPT_FLAG, DZ_OPT_SEED } dz_opt_type;

/* "Not given" for an int option: the parser never produces it (it takes -2147483647 and up),
 * so every value a user types is checked as a value, never taken for the default. */
#define DZ_OPT_UNSET INT_MIN
#define DZ_OPT_SEED_MAX INT64_MAX

typedef struct dz_opt {
    const char *name; /* without the leading "--"; "out|o" also takes the short form -o */
    dz_opt_type type;
    void *value;      /* const char **, int *, float *, int * (flag), uint64_t * (seed) */
    const char *help;
} dz_opt;

typedef struct dz_cmd_spec {
    const char *name;       /* "eval" */
    const char *usage;      /* "MODEL --task sst2 --data FILE [options]" */
    const char *summary;
    int min_positional, max_positional;
    const dz_opt *opts;     /* terminated by {0} */
} dz_cmd_spec;

/* Parses argv[1..argc) (argv[0] is the command name). Positional arguments go to pos
 * (at most spec->max_positional). Returns 0 on success, 1 if --help was printed, -1 on
 * error (message printed to stderr). */
int dz_args_parse(const dz_cmd_spec *spec, int argc, char **argv, const char **pos, int *n_pos);
void dz_args_usage(const dz_cmd_spec *spec, FILE *out);
/* The option name (of spec, or of names when spec is NULL) closest to the mistyped one,
 * within an edit distance that a typo makes; NULL when none is. */
const char *dz_args_closest(const char *typed, size_t len, const char *const *names, size_t n_names);

#endif
