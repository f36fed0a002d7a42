/* Command-line options: a table per command, parsed in one place with clear errors. */
#ifndef DZ_CLI_ARGS_H
#define DZ_CLI_ARGS_H

#include <stdio.h>

typedef enum dz_opt_type { DZ_OPT_STR, DZ_OPT_INT, DZ_OPT_FLOAT, DZ_OPT_FLAG } dz_opt_type;

typedef struct dz_opt {
    const char *name; /* without the leading "--"; "out|o" also takes the short form -o */
    dz_opt_type type;
    void *value;      /* const char **, int *, float *, int * (flag) */
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

#endif
