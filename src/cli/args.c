#include "cli/args.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

void dz_args_usage(const dz_cmd_spec *spec, FILE *out) {
    fprintf(out, "usage: distzo %s %s\n\n%s\n\noptions:\n", spec->name, spec->usage, spec->summary);
    for (const dz_opt *o = spec->opts; o && o->name; o++) {
        const char *arg = o->type == DZ_OPT_STR ? " VALUE" : o->type == DZ_OPT_INT || o->type == DZ_OPT_SEED ? " N"
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

/* The name as the user types it: "quiet" of "quiet|q". */
static int name_len(const dz_opt *o) { return (int)strcspn(o->name, "|"); }

/* Whether v is written as an integer: an optional sign, then digits. */
static int integer_text(const char *v) {
    const char *p = v + (*v == '-' || *v == '+');
    return *p && strspn(p, "0123456789") == strlen(p);
}

/* Floats on the command line are decimal (1e-5, 0.25): strtof would also take hex
 * (0x10), inf and nan, which no learning rate or scale is written as. */
static int decimal_text(const char *v) { return *v && strspn(v, "0123456789+-.eE") == strlen(v); }

static int bad_value(const dz_cmd_spec *spec, const dz_opt *o, const char *v, const char *what) {
    fprintf(stderr, "distzo %s: option --%.*s: '%s' %s\n", spec->name, name_len(o), o->name, v, what);
    return -1;
}

static int set_int(const dz_cmd_spec *spec, const dz_opt *o, const char *v) {
    char *end = NULL;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (!integer_text(v) || end == v || *end) return bad_value(spec, o, v, "is not an integer");
    if (errno || x < -2147483647LL || x > 2147483647LL) return bad_value(spec, o, v, "is outside -2147483647..2147483647");
    *(int *)o->value = (int)x;
    return 0;
}

/* A seed: 0..2^63-1 exactly (a double would round those above 2^53). */
static int set_seed(const dz_cmd_spec *spec, const dz_opt *o, const char *v) {
    if (!integer_text(v)) return bad_value(spec, o, v, "is not an integer");
    const int negative = *v == '-' && strspn(v + 1, "0") != strlen(v + 1); /* "-0" is 0 */
    errno = 0;
    const unsigned long long x = negative ? 0 : strtoull(v + (*v == '-'), NULL, 10);
    if (negative || errno || x > (unsigned long long)DZ_OPT_SEED_MAX) {
        fprintf(stderr, "distzo %s: option --%.*s: '%s' is outside 0..%lld (a seed is a 63-bit integer)\n", spec->name,
                name_len(o), o->name, v, (long long)DZ_OPT_SEED_MAX);
        return -1;
    }
    *(uint64_t *)o->value = (uint64_t)x;
    return 0;
}

static int set_value(const dz_cmd_spec *spec, const dz_opt *o, const char *v) {
    if (o->type == DZ_OPT_STR) {
        *(const char **)o->value = v;
        return 0;
    }
    if (o->type == DZ_OPT_INT) return set_int(spec, o, v);
    if (o->type == DZ_OPT_SEED) return set_seed(spec, o, v);
    char *end = NULL;
    errno = 0;
    float x = strtof(v, &end);
    if (decimal_text(v) && end != v && !*end && (errno == ERANGE || !isfinite(x)) && fabs(strtod(v, NULL)) > 1.0)
        return bad_value(spec, o, v, "is out of a float's range (about 3.4e38)");
    if (decimal_text(v) && end != v && !*end && errno == ERANGE && strtod(v, NULL) != 0.0) /* a float's 0 or denormal */
        return bad_value(spec, o, v, "is below a float's smallest normal value (about 1.2e-38)");
    if (!decimal_text(v) || errno || end == v || *end || !isfinite(x)) return bad_value(spec, o, v, "is not a decimal number");
    *(float *)o->value = x;
    return 0;
}

/* Edit distance with adjacent transpositions (a typo's "stpes" is one edit from "steps"). */
static size_t edit_distance(const char *a, size_t n, const char *b, size_t m) {
    enum { MAX = 64 };
    if (n >= MAX || m >= MAX) return (size_t)-1;
    size_t d[MAX][MAX];
    for (size_t i = 0; i <= n; i++) d[i][0] = i;
    for (size_t j = 0; j <= m; j++) d[0][j] = j;
    for (size_t i = 1; i <= n; i++)
        for (size_t j = 1; j <= m; j++) {
            size_t best = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            if (d[i - 1][j] + 1 < best) best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best) best = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    return d[n][m];
}

const char *dz_args_closest(const char *typed, size_t len, const char *const *names, size_t n_names) {
    const size_t limit = len <= 3 ? 1 : 2; /* more than that is another word, not a typo */
    const char *best = NULL;
    size_t best_d = limit + 1;
    for (size_t i = 0; i < n_names; i++) {
        const size_t d = edit_distance(typed, len, names[i], strcspn(names[i], "|"));
        if (d < best_d) best_d = d, best = names[i];
    }
    return best;
}

static void unknown_option(const dz_cmd_spec *spec, const char *name, size_t len) {
    const char *names[128];
    size_t n = 0;
    for (const dz_opt *o = spec->opts; o && o->name && n < 127; o++) names[n++] = o->name;
    names[n++] = "help";
    const char *near = dz_args_closest(name, len, names, n);
    if (near)
        fprintf(stderr, "distzo %s: unknown option '--%.*s' (did you mean --%.*s?)\n", spec->name, (int)len, name,
                (int)strcspn(near, "|"), near);
    else
        fprintf(stderr, "distzo %s: unknown option '--%.*s' (see --help)\n", spec->name, (int)len, name);
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
            unknown_option(spec, name, len);
            return -1;
        }
        if (o->type == DZ_OPT_FLAG) {
            if (eq) {
                fprintf(stderr, "distzo %s: option --%.*s takes no value\n", spec->name, name_len(o), o->name);
                return -1;
            }
            *(int *)o->value = 1;
            continue;
        }
        const char *v = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
        if (!v) {
            fprintf(stderr, "distzo %s: option --%.*s needs a value\n", spec->name, name_len(o), o->name);
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
