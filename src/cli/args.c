#include "cli/args.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

void dz_args_usage(const dz_cmd_spec *spec, FILE *out) {
    fprintf(out, "usage: distzo %s %s\n\n%s\n\noptions:\n", spec->name, spec->usage, spec->summary);
    for (const dz_opt *o = spec->opts; o && o->name; o++) {
        const char *arg = o->type == DZ_OPT_STR ? " VALUE" : o->type == DZ_OPT_INT ? " N"
                        : o->type == DZ_OPT_FLOAT ? " X" : "";
        char left[64];
        const size_t n = strcspn(o->name, "|");
        if (o->name[n]) snprintf(left, sizeof left, "-%s, --%.*s%s", o->name + n + 1, (int)n, o->name, arg);
        else snprintf(left, sizeof left, "--%s%s", o->name, arg);
        fprintf(out, "  %-24s %s\n", left, o->help);
    }
    fprintf(out, "  %-24s %s\n", "--help", "show this help");
}

static const dz_opt *find_opt(const dz_cmd_spec *spec, const char *name, size_t len) {
    for (const dz_opt *o = spec->opts; o && o->name; o++)
        if (strcspn(o->name, "|") == len && strncmp(o->name, name, len) == 0) return o;
    return NULL;
}

static int set_value(const dz_cmd_spec *spec, const dz_opt *o, const char *v) {
    char *end = NULL;
    errno = 0;
    if (o->type == DZ_OPT_STR) {
        *(const char **)o->value = v;
    } else if (o->type == DZ_OPT_INT) {
        long x = strtol(v, &end, 10);
        if (errno || end == v || *end || x < -2147483647L || x > 2147483647L) {
            fprintf(stderr, "distzo %s: option --%.*s: '%s' is not an integer\n", spec->name, (int)strcspn(o->name, "|"), o->name, v);
            return -1;
        }
        *(int *)o->value = (int)x;
    } else {
        float x = strtof(v, &end);
        if (errno || end == v || *end || !isfinite(x)) {
            fprintf(stderr, "distzo %s: option --%.*s: '%s' is not a number\n", spec->name, (int)strcspn(o->name, "|"), o->name, v);
            return -1;
        }
        *(float *)o->value = x;
    }
    return 0;
}

int dz_args_parse(const dz_cmd_spec *spec, int argc, char **argv, const char **pos, int *n_pos) {
    *n_pos = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            dz_args_usage(spec, stdout);
            return 1;
        }
        const dz_opt *short_opt = NULL; /* "-o": the option whose short name is 'o' */
        for (const dz_opt *o = spec->opts; a[0] == '-' && a[1] && a[1] != '-' && !a[2] && o && o->name; o++) {
            const char *bar = strchr(o->name, '|');
            if (bar && bar[1] == a[1] && !bar[2]) short_opt = o;
        }
        if (short_opt) {
            if (short_opt->type == DZ_OPT_FLAG) {
                *(int *)short_opt->value = 1;
                continue;
            }
            if (i + 1 >= argc) {
                fprintf(stderr, "distzo %s: option %s needs a value\n", spec->name, a);
                return -1;
            }
            if (set_value(spec, short_opt, argv[++i]) != 0) return -1;
            continue;
        }
        if (strncmp(a, "--", 2) != 0 || a[2] == '\0') {
            if (*n_pos >= spec->max_positional) {
                fprintf(stderr, "distzo %s: unexpected argument '%s' (see --help)\n", spec->name, a);
                return -1;
            }
            pos[(*n_pos)++] = a;
            continue;
        }
        const char *name = a + 2, *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        const dz_opt *o = find_opt(spec, name, len);
        if (!o) {
            fprintf(stderr, "distzo %s: unknown option '--%.*s' (see --help)\n", spec->name, (int)len, name);
            return -1;
        }
        if (o->type == DZ_OPT_FLAG) {
            if (eq) {
                fprintf(stderr, "distzo %s: option --%.*s takes no value\n", spec->name, (int)strcspn(o->name, "|"), o->name);
                return -1;
            }
            *(int *)o->value = 1;
            continue;
        }
        const char *v = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
        if (!v) {
            fprintf(stderr, "distzo %s: option --%.*s needs a value\n", spec->name, (int)strcspn(o->name, "|"), o->name);
            return -1;
        }
        if (set_value(spec, o, v) != 0) return -1;
    }
    if (*n_pos < spec->min_positional) {
        fprintf(stderr, "distzo %s: missing argument\n", spec->name);
        dz_args_usage(spec, stderr);
        return -1;
    }
    return 0;
}
