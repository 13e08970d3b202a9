/* Figures of a report, drawn by gnuplot (report_plot.h).
 *
 * Every figure is two text files we write and two images gnuplot draws:
 *   DIR/NAME.dat  the numbers, whitespace-separated, with a header comment;
 *                 "NaN" where a value is missing (gnuplot breaks the line)
 *   DIR/NAME.gp   a complete script drawing NAME.png (pngcairo, or gd's png
 *                 where gnuplot lacks cairo) and NAME.svg, with file names
 *                 relative to DIR: `cd DIR && gnuplot NAME.gp` redraws them
 *   DIR/NAME.png, DIR/NAME.svg
 * The .dat and .gp are written atomically and hold nothing but the inputs
 * (no dates, no paths), so the same input gives the same files.
 *
 * Text from the caller (titles, axis and legend names, categories) goes into
 * the script as gnuplot single-quoted strings: inside double quotes gnuplot
 * runs `backquoted` text as a shell command, inside single quotes nothing is
 * interpreted but '' (a quote).  Control characters become spaces.  All of it
 * is drawn noenhanced, so _ ^ @ & { } print as themselves.  Categories live
 * in the .dat as double-quoted data strings, where a backslash is doubled
 * and a " cannot be escaped: it becomes a '.
 *
 * gnuplot runs as `gnuplot -d ./NAME.gp` (-d: no ~/.gnuplot, so a user's
 * settings don't change the images) with DIR as its working directory,
 * started with posix_spawnp; its stdout and stderr are captured for the
 * error message. */
#include "report_plot.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "errmsg.h"
#include "fsutil.h"

extern char **environ;

#define PLOT_W 800
#define PLOT_H 500
#define FONT "sans,11"

/* ---- text -------------------------------------------------------------- */

/* A gnuplot single-quoted string of S then SUFFIX: ' doubled, control
 * characters as spaces. */
static void put_str(FILE *f, const char *s, const char *suffix) {
    fputc('\'', f);
    for (int k = 0; k < 2; k++)
        for (const unsigned char *p = (const unsigned char *)(k ? suffix : s ? s : ""); *p; p++) {
            if (*p == '\'') fputs("''", f);
            else if (*p < 0x20 || *p == 0x7f) fputc(' ', f);
            else fputc(*p, f);
        }
    fputc('\'', f);
}

/* Text in a # comment line: control characters as spaces. */
static void put_comment(FILE *f, const char *s) {
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++)
        fputc(*p < 0x20 || *p == 0x7f ? ' ' : *p, f);
}

/* A category in the .dat: one double-quoted column.  gnuplot reads a
 * backslash there as an escape (so it is doubled) but has no escape for a
 * double quote (it becomes a single one). */
static void put_datastr(FILE *f, const char *s) {
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '\\') fputs("\\\\", f);
        else fputc(*p == '"' ? '\'' : *p < 0x20 || *p == 0x7f ? ' ' : *p, f);
    }
    fputc('"', f);
}

/* A number in the .dat or .gp; NaN for anything not finite. */
static void put_num(FILE *f, double v) {
    if (isfinite(v)) fprintf(f, "%.8g", v);
    else fputs("NaN", f);
}

/* ---- files ------------------------------------------------------------- */

typedef struct {
    FILE *f;
    char *buf;
    size_t len;
} Buf;

static int buf_open(Buf *b) {
    b->buf = NULL;
    b->len = 0;
    b->f = open_memstream(&b->buf, &b->len);
    return b->f ? 0 : -1;
}

/* Closes the buffer and writes it to PATH atomically. */
static int buf_save(Buf *b, const char *path, char *err, size_t errlen) {
    int bad = ferror(b->f);
    if (fclose(b->f) != 0) bad = 1;
    b->f = NULL;
    int rc = bad ? sg_fail(err, errlen, "%s: out of memory", path)
                 : fs_write_atomic(path, b->buf, b->len, err, errlen);
    free(b->buf);
    b->buf = NULL;
    return rc;
}

static void buf_drop(Buf *b) {
    if (b->f) fclose(b->f);
    free(b->buf);
    b->f = NULL;
    b->buf = NULL;
}

/* DIR/NAME.EXT, malloc'd */
static char *path_of(const char *dir, const char *name, const char *ext) {
    size_t n = strlen(dir) + strlen(name) + strlen(ext) + 3;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s.%s", dir, name, ext);
    return p;
}

/* NAME is a file name in DIR: not empty, no '/', no control characters. */
static int check_target(const char *dir, const char *name, char *err, size_t errlen) {
    if (!dir || !*dir) return sg_fail(err, errlen, "plot: no output directory");
    if (!name || !*name || !strcmp(name, ".") || !strcmp(name, ".."))
        return sg_fail(err, errlen, "%s: plot: no figure name", dir);
    for (const unsigned char *p = (const unsigned char *)name; *p; p++)
        if (*p == '/' || *p < 0x20 || *p == 0x7f)
            return sg_fail(err, errlen, "%s/%s: plot: a figure name must be a plain file name", dir,
                           name);
    return 0;
}

/* ---- running gnuplot --------------------------------------------------- */

/* gnuplot to run: $SG_GNUPLOT or "gnuplot" (looked up on PATH).  A relative
 * path with a '/' is made absolute, since gnuplot runs inside DIR.  NULL (with
 * a message) if it names nothing. */
static char *gnuplot_path(char *err, size_t errlen) {
    const char *g = getenv("SG_GNUPLOT");
    if (!g || !*g) g = "gnuplot";
    if (g[0] == '/' || !strchr(g, '/')) return strdup(g);
    char *abs = realpath(g, NULL);
    if (!abs) sg_fail(err, errlen, "gnuplot (SG_GNUPLOT=%s): %s", g, strerror(errno));
    return abs;
}

/* Runs ARGV (argv[0] looked up on PATH) in DIR (NULL: here), stdin from
 * /dev/null, stdout and stderr into OUT (NUL-terminated; its last OUTLEN-1
 * bytes when longer).  0: it ran, *status as from waitpid; 1: it could not
 * be started (errno-like code in *status); -1: no pipe/spawn resources. */
static int spawn_capture(const char *dir, char *const argv[], char *out, size_t outlen,
                         int *status) {
    int fd[2];
    if (pipe2(fd, O_CLOEXEC) != 0) return -1;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, fd[1], 1);
    posix_spawn_file_actions_adddup2(&fa, fd[1], 2);
    if (dir) posix_spawn_file_actions_addchdir_np(&fa, dir);
    pid_t pid;
    int rc = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(fd[1]);
    if (rc != 0) {
        close(fd[0]);
        *status = rc;
        return 1;
    }
    /* Keep the tail: gnuplot's error is its last words. */
    size_t len = 0;
    char chunk[4096];
    for (;;) {
        ssize_t r = read(fd[0], chunk, sizeof chunk);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        if (!outlen) continue;
        size_t n = (size_t)r, cap = outlen - 1;
        if (n >= cap) {
            memcpy(out, chunk + n - cap, cap);
            len = cap;
        } else {
            size_t keep = len + n > cap ? cap - n : len;
            memmove(out, out + len - keep, keep);
            memcpy(out + keep, chunk, n);
            len = keep + n;
        }
    }
    close(fd[0]);
    if (outlen) out[len] = 0;
    while (waitpid(pid, status, 0) < 0)
        if (errno != EINTR) {
            *status = 0;
            break;
        }
    return 0;
}

int plot_available(void) {
    char e[256], out[256];
    char *g = gnuplot_path(e, sizeof e);
    if (!g) return 0;
    char *argv[] = {g, "--version", NULL};
    int st = 0, rc = spawn_capture(NULL, argv, out, sizeof out, &st);
    free(g);
    return rc == 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

/* gnuplot's output as one line: blank lines and its "    ^" markers dropped,
 * lines joined with " / ". */
static void one_line(char *s) {
    char *w = s, *line = s;
    while (*line) {
        char *end = strchr(line, '\n');
        size_t n = end ? (size_t)(end - line) : strlen(line);
        size_t a = 0;
        while (a < n && (line[a] == ' ' || line[a] == '\t')) a++;
        while (n > a && (line[n - 1] == ' ' || line[n - 1] == '\t' || line[n - 1] == '\r')) n--;
        int marker = n > a && strspn(line + a, "^ ") >= n - a;
        if (n > a && !marker) {
            if (w != s) {
                memcpy(w, " / ", 3);
                w += 3;
            }
            memmove(w, line + a, n - a); /* w <= line + a: the text only shrinks */
            w += n - a;
        }
        if (!end) break;
        line = end + 1;
    }
    *w = 0;
}

/* Removes stale images, runs gnuplot on DIR/NAME.gp, checks both images
 * are there.  0 drawn, 1 gnuplot missing, -1 error. */
static int run_gnuplot(const char *dir, const char *name, char *err, size_t errlen) {
    char *png = path_of(dir, name, "png"), *svg = path_of(dir, name, "svg");
    char *gp = path_of(dir, name, "gp");
    char *script = malloc(strlen(name) + 6);
    char *g = NULL, msg[1024];
    int ret = -1;
    if (!png || !svg || !gp || !script) {
        sg_fail(err, errlen, "%s/%s: out of memory", dir, name);
        goto out;
    }
    sprintf(script, "./%s.gp", name);
    /* Images from an earlier run no longer match NAME.dat. */
    const char *img[2] = {png, svg};
    for (int i = 0; i < 2; i++)
        if (unlink(img[i]) != 0 && errno != ENOENT) {
            sg_fail(err, errlen, "%s: cannot remove the old image: %s", img[i], strerror(errno));
            goto out;
        }
    g = gnuplot_path(msg, sizeof msg);
    if (!g) {
        sg_fail(err, errlen, "%s: %s (the .dat and .gp are written)", gp, msg);
        ret = 1;
        goto out;
    }
    char *argv[] = {g, "-d", script, NULL};
    int st = 0;
    int rc = spawn_capture(dir, argv, msg, sizeof msg, &st);
    if (rc < 0) {
        sg_fail(err, errlen, "%s: cannot start gnuplot: %s", gp, strerror(errno));
    } else if (rc == 1) {
        sg_fail(err, errlen, "%s: gnuplot (%s) cannot run: %s (the .dat and .gp are written)",
                gp, g, strerror(st));
        ret = 1;
    } else if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        one_line(msg);
        if (WIFSIGNALED(st))
            sg_fail(err, errlen, "%s: gnuplot killed by signal %d: %s", gp, WTERMSIG(st), msg);
        else
            sg_fail(err, errlen, "%s: gnuplot failed (exit status %d): %s", gp,
                    WIFEXITED(st) ? WEXITSTATUS(st) : -1, msg);
    } else {
        struct stat sb;
        if (stat(png, &sb) != 0 || sb.st_size == 0)
            sg_fail(err, errlen, "%s: gnuplot wrote no %s", gp, png);
        else if (stat(svg, &sb) != 0 || sb.st_size == 0)
            sg_fail(err, errlen, "%s: gnuplot wrote no %s", gp, svg);
        else
            ret = 0;
    }
out:
    free(png);
    free(svg);
    free(gp);
    free(script);
    free(g);
    return ret;
}

/* ---- the script -------------------------------------------------------- */

/* Colour-blind-safe colours (Okabe and Ito, then two more), a point type and
 * a dash type each; series past the tenth reuse them. */
#define NSTYLE 10
static const struct {
    const char *rgb;
    int pt, dt;
} style[NSTYLE] = {
    {"#0072B2", 7, 1},  {"#D55E00", 5, 2}, {"#009E73", 9, 3}, {"#CC79A7", 11, 4},
    {"#E69F00", 13, 5}, {"#56B4E9", 6, 1}, {"#000000", 4, 2}, {"#8C564B", 8, 3},
    {"#999999", 12, 4}, {"#A0A000", 10, 5},
};
static int ls_of(int i) { return i % NSTYLE + 1; }

/* Everything before the axes' own settings: terminal, labels, key, grid,
 * line styles. */
static void gp_begin(FILE *f, const char *name, const char *title, const char *xlabel,
                     const char *ylabel, int key_below) {
    fputs("# ", f);
    put_comment(f, name);
    fputs(".gp: draws the .png and .svg of the same name from the .dat.\n", f);
    fputs("# Redraw by hand from this directory: gnuplot ", f);
    put_comment(f, name);
    fputs(".gp\n", f);
    fputs("reset\nset encoding utf8\n", f);
    fprintf(f,
            "if (strstrt(' '.GPVAL_TERMINALS.' ', ' pngcairo ') > 0) {\n"
            "    set terminal pngcairo size %d,%d enhanced font '%s' background rgb 'white'\n"
            "} else {\n"
            "    set terminal png size %d,%d enhanced background rgb 'white'\n"
            "}\n",
            PLOT_W, PLOT_H, FONT, PLOT_W, PLOT_H);
    if (title && *title) {
        fputs("set title ", f);
        put_str(f, title, "");
        fputs(" noenhanced\n", f);
    }
    fputs("set xlabel ", f);
    put_str(f, xlabel, "");
    fputs(" noenhanced\n", f);
    if (ylabel && *ylabel) {
        fputs("set ylabel ", f);
        put_str(f, ylabel, "");
        fputs(" noenhanced\n", f);
    }
    /* The legend never covers data: right of the plot, or under it where
     * the names are long enough to squeeze the plot. */
    if (key_below)
        fputs("set key below center horizontal Left reverse noenhanced samplen 3 spacing 1.2 "
              "height 1\n", /* height: clear of the x label */
              f);
    else
        fputs("set key outside right top vertical Left reverse noenhanced samplen 3 spacing 1.2\n",
              f);
    fputs("set grid xtics ytics back lt 1 lw 1 lc rgb '#dddddd'\n", f);
    fputs("set xtics noenhanced nomirror\nset ytics nomirror\n", f);
    fputs("set bars 1\n", f);
    for (int i = 0; i < NSTYLE; i++)
        fprintf(f, "set style line %d lc rgb '%s' lw 2 pt %d ps 1.3 dt %d\n", i + 1, style[i].rgb,
                style[i].pt, style[i].dt);
}

/* The PNG output, the plot command, then the SVG by replot. */
static void gp_draw(FILE *f, const char *name, const char *plot) {
    fputs("set output ", f);
    put_str(f, name, ".png");
    fputc('\n', f);
    fputs(plot, f);
    fprintf(f, "set terminal svg size %d,%d enhanced font '%s' background rgb 'white'\n", PLOT_W,
            PLOT_H, FONT);
    fputs("set output ", f);
    put_str(f, name, ".svg");
    fputs("\nreplot\nunset output\n", f);
}

/* The three buffers a figure is composed in: the .dat, the script's
 * settings, and its plot command (the ranges are known only after the
 * data). */
typedef struct {
    Buf dat, gp, plot;
} Fig;

static int fig_open(Fig *g, const char *dir, const char *name, char *err, size_t errlen) {
    memset(g, 0, sizeof *g);
    if (buf_open(&g->dat) || buf_open(&g->gp) || buf_open(&g->plot)) {
        buf_drop(&g->dat);
        buf_drop(&g->gp);
        buf_drop(&g->plot);
        return sg_fail(err, errlen, "%s/%s: out of memory", dir, name);
    }
    return 0;
}

/* Writes DIR/NAME.dat and DIR/NAME.gp, then draws.  Releases G. */
static int fig_finish(Fig *g, const char *dir, const char *name, char *err, size_t errlen) {
    char *pd = path_of(dir, name, "dat"), *pg = path_of(dir, name, "gp");
    int rc = -1;
    int bad = ferror(g->plot.f);
    if (fclose(g->plot.f) != 0) bad = 1;
    g->plot.f = NULL;
    if (bad || !g->plot.buf || !pd || !pg) {
        sg_fail(err, errlen, "%s/%s: out of memory", dir, name);
    } else {
        gp_draw(g->gp.f, name, g->plot.buf);
        if (fs_mkdir_p(dir, err, errlen) == 0 && buf_save(&g->dat, pd, err, errlen) == 0 &&
            buf_save(&g->gp, pg, err, errlen) == 0)
            rc = run_gnuplot(dir, name, err, errlen);
    }
    buf_drop(&g->dat);
    buf_drop(&g->gp);
    buf_drop(&g->plot);
    free(pd);
    free(pg);
    return rc;
}

static const char *series_name(const PlotSeries *s) { return s->name ? s->name : ""; }

/* Legend names longer than this (in characters) go under the plot. */
#define KEY_RIGHT_MAX 22

/* characters: UTF-8 lead bytes */
static int utf8_len(const char *s) {
    int n = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) n += (*p & 0xC0) != 0x80;
    return n;
}

static int key_below(const PlotSeries *series, int nseries) {
    for (int s = 0; s < nseries; s++)
        if (utf8_len(series_name(&series[s])) > KEY_RIGHT_MAX) return 1;
    return 0;
}

/* The .dat header: the title, then what each column holds. */
static void dat_header(FILE *f, const char *title, const char *first, const PlotSeries *series,
                       int nseries) {
    fputs("# ", f);
    put_comment(f, title);
    fprintf(f, "\n# columns: 1 %s", first);
    for (int s = 0; s < nseries; s++) {
        fprintf(f, "; %d y, %d se: ", 2 + 2 * s, 3 + 2 * s);
        put_comment(f, series_name(&series[s]));
    }
    fputs("\n# NaN: no value (a gap in the line); se NaN: no error bar (a single seed)\n", f);
}

static int has_y(const PlotValue *v) { return v->present && isfinite(v->y); }
static int has_se(const PlotValue *v) { return has_y(v) && v->se >= 0 && isfinite(v->se); }

static void dat_value(FILE *f, const PlotValue *v) {
    fputc(' ', f);
    put_num(f, has_y(v) ? v->y : NAN);
    fputc(' ', f);
    put_num(f, has_se(v) ? v->se : NAN);
}

static int check_series(const char *dir, const char *name, const PlotSeries *series, int nseries,
                        int npoints, const char *what, char *err, size_t errlen) {
    if (npoints < 1) return sg_fail(err, errlen, "%s/%s: plot: no %s", dir, name, what);
    if (nseries < 1 || !series) return sg_fail(err, errlen, "%s/%s: plot: no series", dir, name);
    for (int s = 0; s < nseries; s++)
        if (!series[s].v)
            return sg_fail(err, errlen, "%s/%s: plot: series %d has no values", dir, name, s);
    return 0;
}

/* ---- Figure 1(a): categories ------------------------------------------- */

int plot_categories(const char *dir, const char *name, const char *title, const char *ylabel,
                    const char *const *cats, int ncat, const PlotSeries *series, int nseries,
                    char *err, size_t errlen) {
    return plot_categories_x(dir, name, title, "tier", ylabel, cats, ncat, series, nseries, err, errlen);
}

/* Tick labels longer than this in all (characters) are turned, so that
 * neighbours do not run into each other. */
#define TICKS_FLAT_MAX 60

/* LINES: each series a line through its categories (tiers, in order), or
 * bare points where the categories are not an axis (arms). */
static int categories(const char *dir, const char *name, const char *title, const char *xlabel,
                      const char *ylabel, const char *const *cats, int ncat, const PlotSeries *series,
                      int nseries, int lines, char *err, size_t errlen) {
    if (check_target(dir, name, err, errlen)) return -1;
    if (check_series(dir, name, series, nseries, ncat, "categories", err, errlen)) return -1;
    if (!cats) return sg_fail(err, errlen, "%s/%s: plot: no categories", dir, name);
    for (int c = 0; c < ncat; c++)
        if (!cats[c])
            return sg_fail(err, errlen, "%s/%s: plot: category %d has no name", dir, name, c);
    Fig g;
    if (fig_open(&g, dir, name, err, errlen)) return -1;

    /* the data, one row per category; the y range holds every value with
     * its error bar, and zero */
    dat_header(g.dat.f, title, xlabel, series, nseries);
    double lo = 0, hi = 0;
    for (int c = 0; c < ncat; c++) {
        put_datastr(g.dat.f, cats[c]);
        for (int s = 0; s < nseries; s++) {
            const PlotValue *v = &series[s].v[c];
            dat_value(g.dat.f, v);
            if (!has_y(v)) continue;
            double e = has_se(v) ? v->se : 0;
            if (v->y - e < lo) lo = v->y - e;
            if (v->y + e > hi) hi = v->y + e;
        }
        fputc('\n', g.dat.f);
    }
    double pad = 0.08 * (hi > lo ? hi - lo : 1);

    gp_begin(g.gp.f, name, title, xlabel, ylabel, key_below(series, nseries));
    int ticks = 0;
    for (int c = 0; c < ncat; c++) ticks += utf8_len(cats[c]) + 2;
    if (ticks > TICKS_FLAT_MAX) fputs("set xtics rotate by 30 right\n", g.gp.f);
    fprintf(g.gp.f, "set xrange [-0.5:%.8g]\n", ncat - 0.5);
    fputs("set yrange [", g.gp.f);
    put_num(g.gp.f, lo - pad);
    fputc(':', g.gp.f);
    put_num(g.gp.f, hi + pad);
    fputs("]\nset xzeroaxis lt 1 lw 1.5 lc rgb '#444444'\n", g.gp.f);

    /* The tick labels come from a clause of their own, so that the series
     * can sit side by side around each category (their error bars would
     * hide each other otherwise).  The error bars go first: gnuplot blanks
     * a disc around an error bar's point, which must not cover the markers
     * drawn by linespoints. */
    FILE *p = g.plot.f;
    double dodge = nseries > 1 ? (0.3 / nseries < 0.08 ? 0.3 / nseries : 0.08) : 0;
    fputs("plot ", p);
    put_str(p, name, ".dat");
    fputs(" using 0:(NaN):xtic(1) notitle", p);
    for (int pass = 0; pass < 2; pass++)
        for (int s = 0; s < nseries; s++) {
            int yc = 2 + 2 * s, ec = 3 + 2 * s, ls = ls_of(s);
            char x[64];
            snprintf(x, sizeof x, "($0%+.8g)", (s - (nseries - 1) / 2.0) * dodge);
            if (!strcmp(x, "($0+0)") || !strcmp(x, "($0-0)")) strcpy(x, "0");
            if (pass == 0) {
                fprintf(p,
                        ", \\\n     '' using %s:($%d >= 0 ? $%d : NaN):%d with yerrorbars ls %d "
                        "dt 1 notitle",
                        x, ec, yc, ec, ls);
            } else {
                fprintf(p, ", \\\n     '' using %s:%d with %s ls %d title ", x, yc, lines ? "linespoints" : "points",
                        ls);
                put_str(p, series_name(&series[s]), "");
            }
        }
    fputc('\n', p);
    return fig_finish(&g, dir, name, err, errlen);
}

int plot_categories_x(const char *dir, const char *name, const char *title, const char *xlabel,
                      const char *ylabel, const char *const *cats, int ncat, const PlotSeries *series,
                      int nseries, char *err, size_t errlen) {
    return categories(dir, name, title, xlabel, ylabel, cats, ncat, series, nseries, 1, err, errlen);
}

int plot_categories_points(const char *dir, const char *name, const char *title, const char *xlabel,
                           const char *ylabel, const char *const *cats, int ncat, const PlotSeries *series,
                           int nseries, char *err, size_t errlen) {
    return categories(dir, name, title, xlabel, ylabel, cats, ncat, series, nseries, 0, err, errlen);
}

/* ---- Figure 2: dose-response ------------------------------------------- */

int plot_dose(const char *dir, const char *name, const char *title, const char *ylabel,
              const double *x, int nx, const PlotSeries *series, int nseries, char *err,
              size_t errlen) {
    if (check_target(dir, name, err, errlen)) return -1;
    if (check_series(dir, name, series, nseries, nx, "doses", err, errlen)) return -1;
    if (!x) return sg_fail(err, errlen, "%s/%s: plot: no doses", dir, name);
    Fig g;
    if (fig_open(&g, dir, name, err, errlen)) return -1;

    /* the data, one row per dose; the ranges hold the drawable points
     * (dose and value > 0) with the positive part of their error bars */
    dat_header(g.dat.f, title, "dose", series, nseries);
    fputs("# on log scales: doses and values <= 0 are not drawn\n", g.dat.f);
    double xmin = INFINITY, xmax = -INFINITY, ymin = INFINITY, ymax = -INFINITY;
    for (int i = 0; i < nx; i++) {
        put_num(g.dat.f, x[i]);
        int xok = isfinite(x[i]) && x[i] > 0;
        if (xok && x[i] < xmin) xmin = x[i];
        if (xok && x[i] > xmax) xmax = x[i];
        for (int s = 0; s < nseries; s++) {
            const PlotValue *v = &series[s].v[i];
            dat_value(g.dat.f, v);
            if (!xok || !has_y(v) || v->y <= 0) continue;
            double e = has_se(v) ? v->se : 0;
            double l = v->y - e > 0 ? v->y - e : v->y;
            if (l < ymin) ymin = l;
            if (v->y + e > ymax) ymax = v->y + e;
        }
        fputc('\n', g.dat.f);
    }
    if (!(xmin <= xmax)) xmin = 0.1, xmax = 1;
    if (!(ymin <= ymax)) ymin = 0.01, ymax = 1;
    /* y from a power of ten below every point to one above */
    double ylo = pow(10, floor(log10(ymin))), yhi = pow(10, ceil(log10(ymax)));
    if (ylo >= ymin * 0.999999) ylo /= 10;
    if (yhi <= ymax * 1.000001) yhi *= 10;

    gp_begin(g.gp.f, name, title, "dose ε", ylabel, key_below(series, nseries));
    fputs("set logscale x\nset logscale y\n", g.gp.f);
    fputs("set xrange [", g.gp.f);
    put_num(g.gp.f, xmin / 1.25);
    fputc(':', g.gp.f);
    put_num(g.gp.f, xmax * 1.25);
    fputs("]\nset yrange [", g.gp.f);
    put_num(g.gp.f, ylo);
    fputc(':', g.gp.f);
    put_num(g.gp.f, yhi);
    fputs("]\nset format y '%g'\n", g.gp.f);
    /* a labelled tick at every dose */
    int ntic = 0;
    for (int i = 0; i < nx; i++) {
        if (!(isfinite(x[i]) && x[i] > 0)) continue;
        char lab[32];
        snprintf(lab, sizeof lab, "%g", x[i]);
        fputs(ntic++ ? ", " : "set xtics (", g.gp.f);
        put_str(g.gp.f, lab, "");
        fputc(' ', g.gp.f);
        put_num(g.gp.f, x[i]);
    }
    if (ntic) fputs(")\n", g.gp.f);
    fputs("# not drawn on a log scale: values <= 0; an error bar reaching 0 or below runs to the "
          "bottom\n",
          g.gp.f);
    fputs("pos(v) = v > 0 ? v : NaN\nYMIN = ", g.gp.f);
    put_num(g.gp.f, ylo);
    fputc('\n', g.gp.f);

    /* error bars first (see plot_categories) */
    FILE *p = g.plot.f;
    fputs("plot ", p);
    put_str(p, name, ".dat");
    for (int pass = 0; pass < 2; pass++)
        for (int s = 0; s < nseries; s++) {
            int yc = 2 + 2 * s, ec = 3 + 2 * s, ls = ls_of(s);
            if (pass || s) fputs(", \\\n     ''", p);
            if (pass == 0) {
                fprintf(p,
                        " using (pos($1)):($%d >= 0 ? pos($%d) : NaN):($%d - $%d > 0 ? $%d - $%d "
                        ": YMIN):($%d + $%d) with yerrorbars ls %d dt 1 notitle",
                        ec, yc, yc, ec, yc, ec, yc, ec, ls);
            } else {
                fprintf(p, " using (pos($1)):(pos($%d)) with linespoints ls %d title ", yc, ls);
                put_str(p, series_name(&series[s]), "");
            }
        }
    fputc('\n', p);
    return fig_finish(&g, dir, name, err, errlen);
}

/* ---- a run's loss curves ----------------------------------------------- */

static void dat_block(FILE *f, const char *what, const double *step, const double *loss, int n) {
    fprintf(f, "# %s: 1 step, 2 loss\n", what);
    for (int i = 0; i < n; i++) {
        put_num(f, step[i]);
        fputc(' ', f);
        put_num(f, loss[i]);
        fputc('\n', f);
    }
    if (n == 0) fputs("NaN NaN\n", f); /* an empty block would shift the index */
}

static int any_point(const double *x, const double *y, int n) {
    for (int i = 0; i < n; i++)
        if (isfinite(x[i]) && isfinite(y[i])) return 1;
    return 0;
}

int plot_curve(const char *dir, const char *name, const char *title, const double *train_step,
               const double *train_loss, int ntrain, const double *val_step,
               const double *val_loss, int nval, char *err, size_t errlen) {
    if (check_target(dir, name, err, errlen)) return -1;
    if (ntrain < 0 || nval < 0 || (ntrain && (!train_step || !train_loss)) ||
        (nval && (!val_step || !val_loss)))
        return sg_fail(err, errlen, "%s/%s: plot: bad curve arguments", dir, name);
    Fig g;
    if (fig_open(&g, dir, name, err, errlen)) return -1;

    fputs("# ", g.dat.f);
    put_comment(g.dat.f, title);
    fputs("\n# index 0: training loss, index 1: validation loss (NaN: no value)\n", g.dat.f);
    dat_block(g.dat.f, "training", train_step, train_loss, ntrain);
    fputs("\n\n", g.dat.f);
    dat_block(g.dat.f, "validation", val_step, val_loss, nval);

    gp_begin(g.gp.f, name, title, "step", "loss (nats)", 0);
    int tr = any_point(train_step, train_loss, ntrain), va = any_point(val_step, val_loss, nval);
    if (!tr && !va) fputs("set xrange [0:1]\nset yrange [0:1]\n", g.gp.f);
    /* the data's own range with a margin, so no marker sits on the border */
    else fputs("set autoscale fix\nset offsets graph 0.02, graph 0.02, graph 0.05, graph 0.05\n", g.gp.f);

    /* a set with no points gets no legend entry, unless both are empty */
    FILE *p = g.plot.f;
    fputs("plot ", p);
    put_str(p, name, ".dat");
    if (tr || !va) fputs(" index 0 using 1:2 with lines ls 1 lw 1.5 title 'training'", p);
    if (va || !tr)
        fprintf(p, "%s index 1 using 1:2 with linespoints ls 2 dt 1 title 'validation'",
                tr || !va ? ", \\\n     ''" : "");
    fputc('\n', p);
    return fig_finish(&g, dir, name, err, errlen);
}
