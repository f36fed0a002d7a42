/* distzo plot RUN_DIR [-o DIR]: loss.png (training loss and a moving average) and
 * accuracy.png (dev and test accuracy) from RUN_DIR/metrics.jsonl, drawn by gnuplot, into
 * RUN_DIR-plots unless -o says where (never into the run folder unless asked). */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/common.h"

/* Whether an executable named name is on PATH. */
static int on_path(const char *name) {
    const char *path = getenv("PATH");
    char dir[4096], full[4096];
    for (const char *p = path ? path : "/usr/bin:/bin"; *p;) {
        size_t n = strcspn(p, ":");
        snprintf(dir, sizeof dir, "%.*s", (int)n, n ? p : ".");
        if (dz_path_join(full, sizeof full, dir, name) == 0 && access(full, X_OK) == 0) return 1;
        p += n + (p[n] == ':');
    }
    return 0;
}

/* s as a gnuplot single-quoted string ('' stands for a quote). */
static void put_quoted(FILE *f, const char *s) {
    fputc('\'', f);
    for (; *s; s++) {
        if (*s == '\'') fputc('\'', f);
        fputc(*s, f);
    }
    fputc('\'', f);
}

/* Centered moving average of the rows with a finite loss, over up to 2 * half + 1 of them. */
static void smooth_loss(const dz_metrics_row *rows, size_t n, int half, double *out) {
    size_t m = 0;
    double *sum = malloc((n + 1) * sizeof *sum);
    size_t *idx = malloc((n + 1) * sizeof *idx);
    if (!sum || !idx) { /* plotting without the curve beats failing */
        for (size_t i = 0; i < n; i++) out[i] = NAN;
        free(sum);
        free(idx);
        return;
    }
    sum[0] = 0;
    for (size_t i = 0; i < n; i++)
        if (isfinite(rows[i].loss)) idx[m] = i, sum[m + 1] = sum[m] + rows[i].loss, m++;
    for (size_t i = 0; i < n; i++) out[i] = NAN;
    for (size_t k = 0; k < m; k++) {
        size_t lo = k > (size_t)half ? k - (size_t)half : 0, hi = k + (size_t)half + 1 < m ? k + (size_t)half + 1 : m;
        out[idx[k]] = (sum[hi] - sum[lo]) / (double)(hi - lo);
    }
    free(sum);
    free(idx);
}

static void terminal(FILE *g, const char *out_dir, const char *file) {
    /* pngcairo draws antialiased lines; the libgd png terminal is the fallback */
    fprintf(g, "if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {\n"
               "  set terminal pngcairo size 1100,650 noenhanced font 'sans,11'\n"
               "} else {\n"
               "  set terminal png size 1100,650 noenhanced\n"
               "}\n");
    char path[4096];
    dz_path_join(path, sizeof path, out_dir, file);
    fputs("set output ", g);
    put_quoted(g, path);
    fputs("\nset grid\nset key top right\nset xlabel 'step'\n", g);
}

static void loss_plot(FILE *g, const char *out_dir, const char *run, const dz_metrics_row *rows, size_t n,
                      const double *smooth, int window) {
    terminal(g, out_dir, "loss.png");
    fputs("set title ", g);
    put_quoted(g, run);
    fputs("\nset ylabel 'training loss'\n$loss << EOD\n", g);
    for (size_t i = 0; i < n; i++)
        if (isfinite(rows[i].loss)) fprintf(g, "%lld %.9g %.9g\n", (long long)rows[i].step, rows[i].loss, smooth[i]);
    fprintf(g, "EOD\nplot $loss using 1:2 with lines lw 1 lc rgb '#a6bddb' title 'loss',"
               " '' using 1:3 with lines lw 2.5 lc rgb '#08519c' title 'moving average (%d steps)'\n"
               "unset output\n",
            window);
}

static int has_accuracy(const dz_metrics_row *r) {
    return r->has_eval && (isfinite(r->dev_accuracy) || isfinite(r->test_accuracy));
}

static void accuracy_plot(FILE *g, const char *out_dir, const char *run, const dz_metrics_row *rows, size_t n) {
    terminal(g, out_dir, "accuracy.png");
    fputs("set title ", g);
    put_quoted(g, run);
    fputs("\nset ylabel 'accuracy'\nset key bottom right\n$acc << EOD\n", g);
    for (size_t i = 0; i < n; i++) /* a run without a dev set (federated, --dev-examples 0) has test alone */
        if (has_accuracy(&rows[i]))
            fprintf(g, "%lld %.9g %.9g %.9g\n", (long long)rows[i].step, rows[i].dev_accuracy,
                    isfinite(rows[i].best_dev_accuracy) ? rows[i].best_dev_accuracy : NAN,
                    isfinite(rows[i].test_accuracy) ? rows[i].test_accuracy : NAN);
    fputs("EOD\nplot $acc using 1:2 with linespoints pt 7 ps 0.8 lw 2 lc rgb '#238b45' title 'dev accuracy (model selection)',"
          " '' using 1:4 with linespoints pt 5 ps 0.8 lw 2 lc rgb '#cb181d' title 'test accuracy',"
          " '' using 1:3 with steps dt 2 lw 1.5 lc rgb '#737373' title 'best dev so far'\n"
          "unset output\n",
          g);
}

/* The plots gnuplot was to write, checked and named. */
static int report(const char *out_dir, const char *path, size_t n_loss, size_t n_eval, int window) {
    const char *files[2] = {n_loss ? "loss.png" : NULL, n_eval ? "accuracy.png" : NULL};
    for (int k = 0; k < 2; k++) {
        if (!files[k]) continue;
        char out[4096];
        struct stat st;
        dz_path_join(out, sizeof out, out_dir, files[k]);
        if (stat(out, &st) != 0 || st.st_size == 0) return dz_cli_failf("%s: gnuplot wrote nothing", out);
        if (k) printf("wrote %s (%zu evaluations)\n", out, n_eval);
        else printf("wrote %s (%zu steps, moving average over %d)\n", out, n_loss, window);
    }
    if (!n_loss) printf("no finite training loss in %s: loss.png not drawn\n", path);
    if (!n_eval) printf("no dev_accuracy or test_accuracy in %s: accuracy.png not drawn\n", path);
    return 0;
}

static const dz_cmd_spec plot_cmd = {
    .name = "plot", .usage = "RUN_DIR [-o DIR]", .min_positional = 1, .max_positional = 1,
    .summary = "Plots RUN_DIR/metrics.jsonl with gnuplot: loss.png (training loss and its moving\n"
               "average against the step) and accuracy.png (dev and test accuracy, when the run evaluated)."};

int dz_cmd_plot(int argc, char **argv) {
    const char *out_dir = NULL;
    const dz_opt opts[] = {
        {"out|o", DZ_OPT_STR, &out_dir, "folder for loss.png and accuracy.png (default RUN_DIR-plots beside the run: "
                                      "plot reads the run folder and writes nothing into it)"},
        {0},
    };
    const char *pos[1];
    int rc = dz_cli_parse(&plot_cmd, opts, argc, argv, pos);
    if (rc >= 0) return rc;
    const char *run = pos[0];
    char default_out[4200];
    if (!out_dir) { /* beside the run, never in it: plot is one of the run folder's readers */
        char real[PATH_MAX]; /* "." or "run/.." named by its real path: "./-plots" was inside the run */
        const char *named = realpath(run, real) ? real : run;
        size_t n = strlen(named);
        while (n > 1 && named[n - 1] == '/') n--;
        snprintf(default_out, sizeof default_out, "%.*s-plots", (int)n, named);
        out_dir = default_out;
    }

    char path[4096];
    if (dz_path_join(path, sizeof path, run, "metrics.jsonl") != 0) return dz_cli_failf("%s: path too long", run);
    dz_metrics_row *rows;
    size_t n;
    dz_error err = {0};
    if (dz_metrics_read(path, &rows, &n, &err) != DZ_OK) return dz_cli_fail(&err);
    size_t n_loss = 0, n_eval = 0;
    for (size_t i = 0; i < n; i++) {
        n_loss += isfinite(rows[i].loss) != 0;
        n_eval += has_accuracy(&rows[i]);
    }
    if (n_loss == 0 && n_eval == 0) {
        free(rows);
        return dz_cli_failf("%s: no data to plot (%zu lines, none with a finite loss or an accuracy)", path, n);
    }
    if (!on_path("gnuplot")) {
        free(rows);
        return dz_cli_failf("gnuplot not found on PATH: `distzo plot` draws with it (Debian/Ubuntu: apt-get install "
                            "gnuplot-nox)");
    }
    if (!dz_is_dir(out_dir) && mkdir(out_dir, 0755) != 0) {
        free(rows);
        return dz_cli_failf("%s: cannot create folder: %s", out_dir, strerror(errno));
    }

    int window = (int)(n_loss / 25);
    window = window < 1 ? 1 : window > 501 ? 501 : window | 1; /* odd: centered */
    double *smooth = malloc((n ? n : 1) * sizeof *smooth);
    if (!smooth) {
        free(rows);
        return dz_cli_failf("out of memory");
    }
    smooth_loss(rows, n, window / 2, smooth);

    signal(SIGPIPE, SIG_IGN); /* a gnuplot that dies early must not kill us: pclose reports it */
    FILE *g = popen("gnuplot", "w");
    if (!g) {
        free(rows);
        free(smooth);
        return dz_cli_failf("cannot run gnuplot: %s", strerror(errno));
    }
    if (n_loss) loss_plot(g, out_dir, run, rows, n, smooth, window);
    if (n_eval) accuracy_plot(g, out_dir, run, rows, n);
    int status = pclose(g);
    free(smooth);
    free(rows);
    if (status != 0) return dz_cli_failf("gnuplot failed (exit status %d); its messages are above", status);
    return report(out_dir, path, n_loss, n_eval, window);
}
