/* Report figures: the .dat and .gp files byte for byte, the images gnuplot
 * draws from them (PNG size, SVG text), and what happens without gnuplot. */
#define _XOPEN_SOURCE 700
#include <ftw.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "testfs.h"
#include "fsutil.h"
#include "report_plot.h"

static int have_gnuplot;

/* whole file as a string ("" if missing); free it */
static char *slurp(const char *path) {
    size_t n = 0;
    char *b = (char *)read_all(path, &n);
    if (!b) return calloc(1, 1);
    b[n] = 0;
    return b;
}

static int file_is(const char *path, const char *want) {
    char *got = slurp(path);
    int ok = strcmp(got, want) == 0;
    if (!ok) fprintf(stderr, "---- %s:\n%s---- want:\n%s----\n", path, got, want);
    free(got);
    return ok;
}

static uint32_t be32(const unsigned char *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* An 800x500 PNG: signature, then IHDR first with width and height. */
static void check_png(const char *path) {
    size_t n = 0;
    unsigned char *b = read_all(path, &n);
    CHECK(b && n > 33, "%s: exists, %zu bytes", path, n);
    if (b && n > 33) {
        CHECK(memcmp(b, "\x89PNG\r\n\x1a\n", 8) == 0, "%s: PNG signature", path);
        CHECK(be32(b + 8) == 13 && memcmp(b + 12, "IHDR", 4) == 0, "%s: IHDR first", path);
        CHECK(be32(b + 16) == 800 && be32(b + 20) == 500, "%s: %ux%u, want 800x500", path,
              be32(b + 16), be32(b + 20));
    }
    free(b);
}

/* Well-formed enough, and holding each of the NULL-terminated strings. */
static void check_svg(const char *path, const char *const *want) {
    char *s = slurp(path);
    CHECK(!strncmp(s, "<?xml", 5) || !strncmp(s, "<svg", 4), "%s: starts as SVG", path);
    CHECK(has(s, "</svg>"), "%s: ends the svg element", path);
    for (int i = 0; want[i]; i++) CHECK(has(s, want[i]), "%s: has \"%s\"", path, want[i]);
    free(s);
}

static void check_gp(const char *path, const char *const *want) {
    char *s = slurp(path);
    for (int i = 0; want[i]; i++) CHECK(has(s, want[i]), "%s: has line \"%s\"", path, want[i]);
    free(s);
}

/* ---- Figure 1(a) --------------------------------------------------------- */

static const char *cats[] = {"10M", "30M", "124M", "350M"};
static const PlotValue zero_v[] = {{0.0185, 0.002, 1}, {0.012, 0.0015, 1}, {0.006, 0.001, 1},
                                   {0.003, -1, 1}};
static const PlotValue norm_v[] = {{0.004, 0.001, 1}, {0, 0, 0}, {0.009, 0.002, 1},
                                   {0.014, -1, 1}};
static const PlotValue proj_v[] = {{0.005, 0.0012, 1}, {0.008, 0.001, 1}, {0.012, 0.002, 1},
                                   {0.019, -1, 1}};
static const PlotSeries cat_series[] = {
    {"zero option", zero_v}, {"norm gate", norm_v}, {"projection gate", proj_v}};
static const char *cat_title = "Figure 1(a): the \"increments\" at each tier, it's `touch INJECTED`";

static const char *cat_dat =
    "# Figure 1(a): the \"increments\" at each tier, it's `touch INJECTED`\n"
    "# columns: 1 tier; 2 y, 3 se: zero option; 4 y, 5 se: norm gate; 6 y, 7 se: projection gate\n"
    "# NaN: no value (a gap in the line); se NaN: no error bar (a single seed)\n"
    "\"10M\" 0.0185 0.002 0.004 0.001 0.005 0.0012\n"
    "\"30M\" 0.012 0.0015 NaN NaN 0.008 0.001\n"
    "\"124M\" 0.006 0.001 0.009 0.002 0.012 0.002\n"
    "\"350M\" 0.003 NaN 0.014 NaN 0.019 NaN\n";

static int draw_categories(const char *dir) {
    return plot_categories(dir, "fig1a", cat_title, "Δ loss (nats)", cats, 4, cat_series, 3, err,
                           sizeof err);
}

static void test_categories(void) {
    const char *d = P("figs");
    int rc = draw_categories(d);
    CHECK(rc == (have_gnuplot ? 0 : 1), "plot_categories: %d: %s", rc, err);
    CHECK(file_is(P("figs/fig1a.dat"), cat_dat), "fig1a.dat as computed by hand");
    const char *gp[] = {
        "set terminal pngcairo size 800,500 enhanced font 'sans,11' background rgb 'white'\n",
        "set terminal png size 800,500 enhanced background rgb 'white'\n",
        "set terminal svg size 800,500 enhanced font 'sans,11' background rgb 'white'\n",
        "set output 'fig1a.png'\n",
        "set output 'fig1a.svg'\nreplot\nunset output\n",
        /* single quotes: a ' doubled, the backquotes left alone */
        "set title 'Figure 1(a): the \"increments\" at each tier, it''s `touch INJECTED`' "
        "noenhanced\n",
        "set xlabel 'tier' noenhanced\n",
        "set ylabel 'Δ loss (nats)' noenhanced\n",
        "set xrange [-0.5:3.5]\n",
        /* 0 to 0.0185 + 0.002, padded by 8% */
        "set yrange [-0.00164:0.02214]\n",
        "set xzeroaxis",
        "set key outside",
        "set grid",
        /* the tick labels, the error bars (side by side), then the lines */
        "plot 'fig1a.dat' using 0:(NaN):xtic(1) notitle, \\\n"
        "     '' using ($0-0.08):($3 >= 0 ? $2 : NaN):3 with yerrorbars ls 1 dt 1 notitle, \\\n"
        "     '' using 0:($5 >= 0 ? $4 : NaN):5 with yerrorbars ls 2 dt 1 notitle, \\\n"
        "     '' using ($0+0.08):($7 >= 0 ? $6 : NaN):7 with yerrorbars ls 3 dt 1 notitle, \\\n"
        "     '' using ($0-0.08):2 with linespoints ls 1 title 'zero option', \\\n"
        "     '' using 0:4 with linespoints ls 2 title 'norm gate', \\\n"
        "     '' using ($0+0.08):6 with linespoints ls 3 title 'projection gate'\n"
        "set terminal svg",
        NULL};
    check_gp(P("figs/fig1a.gp"), gp);
    if (have_gnuplot) {
        check_png(P("figs/fig1a.png"));
        const char *svg[] = {"zero option", "norm gate", "projection gate", "124M", "tier",
                             "increments", NULL};
        check_svg(P("figs/fig1a.svg"), svg);
    }
    CHECK(!fs_exists(P("figs/INJECTED")) && !fs_exists("INJECTED"),
          "a backquoted title runs nothing");

    /* categories with a backslash and a double quote */
    const char *odd[] = {"a\\b", "q\"t"};
    const PlotValue two[] = {{1, 0.5, 1}, {2, -1, 1}};
    const PlotSeries s1[] = {{"odd\\name", two}};
    rc = plot_categories(P("figs"), "fig1o", "odd tiers", "y", odd, 2, s1, 1, err, sizeof err);
    CHECK(rc == (have_gnuplot ? 0 : 1), "plot_categories, odd tiers: %d: %s", rc, err);
    char *d1 = slurp(P("figs/fig1o.dat"));
    CHECK(has(d1, "\n\"a\\\\b\" 1 0.5\n\"q't\" 2 NaN\n"), "fig1o.dat: \\ doubled, \" as '");
    free(d1);
    if (have_gnuplot) {
        const char *svg[] = {">a\\b<", ">q't<", "odd\\name", NULL};
        check_svg(P("figs/fig1o.svg"), svg);
    }

    /* every value missing: empty axes around zero, the tiers still labelled */
    const PlotValue none[] = {{0, 0, 0}, {0, 0, 0}, {0, 0, 0}, {0, 0, 0}};
    const PlotSeries s0[] = {{"empty", none}};
    rc = plot_categories(P("figs"), "fig1e", "", "y", cats, 4, s0, 1, err, sizeof err);
    CHECK(rc == (have_gnuplot ? 0 : 1), "plot_categories with no values: %d: %s", rc, err);
    const char *gp0[] = {"set yrange [-0.08:0.08]\n", "xtic(1)", NULL};
    check_gp(P("figs/fig1e.gp"), gp0);
    char *d0 = slurp(P("figs/fig1e.dat")), *g0 = slurp(P("figs/fig1e.gp"));
    CHECK(has(d0, "\n\"350M\" NaN NaN\n"), "fig1e.dat: NaN for missing");
    CHECK(!has(g0, "set title"), "fig1e.gp: no title line for an empty title");
    free(d0);
    free(g0);

    /* the same input, the same files */
    rc = draw_categories(P("figs2"));
    CHECK(rc == (have_gnuplot ? 0 : 1), "plot_categories again: %s", err);
    const char *same[] = {"dat", "gp", have_gnuplot ? "svg" : NULL, NULL};
    for (int i = 0; same[i]; i++) {
        char a[64], b[64];
        snprintf(a, sizeof a, "figs/fig1a.%s", same[i]);
        snprintf(b, sizeof b, "figs2/fig1a.%s", same[i]);
        char *x = slurp(P(a)), *y = slurp(P(b));
        CHECK(*x && strcmp(x, y) == 0, "fig1a.%s identical when drawn twice", same[i]);
        free(x);
        free(y);
    }
}

/* ---- Figure 5: arms as points ---------------------------------------------- */

static void test_points(void) {
    const char *arms[] = {"baseline", "sink logit", "norm gate"};
    const PlotValue pos0[] = {{0.42, 0.02, 1}, {0.06, 0.01, 1}, {0.37, -1, 1}};
    const PlotValue ph[] = {{0, 0, 0}, {0.32, 0.02, 1}, {0, 0, 0}};
    const PlotSeries s[] = {{"first key position", pos0}, {"phantom", ph}};
    int rc = plot_categories_points(P("figs"), "fig5a", "sinks", "arm", "mass", arms, 3, s, 2, err, sizeof err);
    CHECK(rc == (have_gnuplot ? 0 : 1), "plot_categories_points: %d: %s", rc, err);
    CHECK(file_is(P("figs/fig5a.dat"), "# sinks\n"
                                        "# columns: 1 arm; 2 y, 3 se: first key position; 4 y, 5 se: phantom\n"
                                        "# NaN: no value (a gap in the line); se NaN: no error bar (a single seed)\n"
                                        "\"baseline\" 0.42 0.02 NaN NaN\n"
                                        "\"sink logit\" 0.06 0.01 0.32 0.02\n"
                                        "\"norm gate\" 0.37 NaN NaN NaN\n"),
          "fig5a.dat as computed by hand");
    const char *gp[] = {"set xlabel 'arm' noenhanced\n",
                        /* 0 to 0.44, padded by 8% */
                        "set yrange [-0.0352:0.4752]\n",
                        "     '' using ($0-0.04):2 with points ls 1 title 'first key position', \\\n"
                        "     '' using ($0+0.04):4 with points ls 2 title 'phantom'\n",
                        NULL};
    check_gp(P("figs/fig5a.gp"), gp);
    char *g = slurp(P("figs/fig5a.gp"));
    CHECK(!has(g, "linespoints") && !has(g, "rotate"), "fig5a.gp: no lines, and 3 short labels stay level");
    free(g);
    if (have_gnuplot) {
        check_png(P("figs/fig5a.png"));
        const char *svg[] = {"sink logit", "phantom", "first key position", NULL};
        check_svg(P("figs/fig5a.svg"), svg);
    }

    /* the nine arms' labels, 88 characters with their gaps: turned */
    const char *nine[] = {"baseline", "off-by-one", "sink logit", "sink token", "norm gate",
                          "routing-slot control", "projection gate", "combo", "combo2"};
    PlotValue v[9];
    for (int i = 0; i < 9; i++) v[i] = (PlotValue){0.1 * i, 0.01, 1};
    const PlotSeries s9[] = {{"mass", v}};
    rc = plot_categories_points(P("figs"), "fig5n", "nine", "arm", "mass", nine, 9, s9, 1, err, sizeof err);
    CHECK(rc == (have_gnuplot ? 0 : 1), "plot_categories_points, nine arms: %d: %s", rc, err);
    const char *gp9[] = {"set xtics rotate by 30 right\n", "set xrange [-0.5:8.5]\n",
                         "     '' using 0:2 with points ls 1 title 'mass'\n", NULL};
    check_gp(P("figs/fig5n.gp"), gp9);
    if (have_gnuplot) {
        check_png(P("figs/fig5n.png"));
        const char *svg[] = {"routing-slot control", "combo2", NULL};
        check_svg(P("figs/fig5n.svg"), svg);
    }
}

/* ---- Figure 2 ------------------------------------------------------------ */

static void test_dose(void) {
    const double x[] = {0.1, 0.4, 1.6, 0};
    const PlotValue base[] = {{0.02, 0.005, 1}, {0.3, 0.05, 1}, {4.9, -1, 1}, {0, -1, 1}};
    /* an error bar reaching below zero, a negative value, a gap */
    const PlotValue norm[] = {{0.004, 0.006, 1}, {-0.01, 0.002, 1}, {6.8, 0.4, 1}, {0, 0, 0}};
    const PlotSeries s[] = {{"baseline", base}, {"norm gate", norm}};
    int rc = plot_dose(P("figs"), "fig2a", "Figure 2(a): structured junk, 124M",
                       "validation loss increase (nats)", x, 4, s, 2, err, sizeof err);
    CHECK(rc == (have_gnuplot ? 0 : 1), "plot_dose: %d: %s", rc, err);
    CHECK(file_is(P("figs/fig2a.dat"),
                  "# Figure 2(a): structured junk, 124M\n"
                  "# columns: 1 dose; 2 y, 3 se: baseline; 4 y, 5 se: norm gate\n"
                  "# NaN: no value (a gap in the line); se NaN: no error bar (a single seed)\n"
                  "# on log scales: doses and values <= 0 are not drawn\n"
                  "0.1 0.02 0.005 0.004 0.006\n"
                  "0.4 0.3 0.05 -0.01 0.002\n"
                  "1.6 4.9 NaN 6.8 0.4\n"
                  "0 0 NaN NaN NaN\n"),
          "fig2a.dat as computed by hand");
    const char *gp[] = {
        "set terminal pngcairo size 800,500",
        "set terminal svg size 800,500",
        "set output 'fig2a.png'\n",
        "set output 'fig2a.svg'\n",
        "set logscale x\nset logscale y\n",
        "set xlabel 'dose ε' noenhanced\n",
        /* doses 0.1..1.6 widened by 1.25; values 0.004 (its bar goes below 0)
         * to 6.8 + 0.4, to the powers of ten around them */
        "set xrange [0.08:2]\n",
        "set yrange [0.001:10]\n",
        "YMIN = 0.001\n",
        "set xtics ('0.1' 0.1, '0.4' 0.4, '1.6' 1.6)\n",
        "pos(v) = v > 0 ? v : NaN\n",
        "plot 'fig2a.dat' using (pos($1)):($3 >= 0 ? pos($2) : NaN):($2 - $3 > 0 ? $2 - $3 : "
        "YMIN):($2 + $3) with yerrorbars ls 1 dt 1 notitle, \\\n"
        "     '' using (pos($1)):($5 >= 0 ? pos($4) : NaN):($4 - $5 > 0 ? $4 - $5 : YMIN):($4 + "
        "$5) with yerrorbars ls 2 dt 1 notitle, \\\n"
        "     '' using (pos($1)):(pos($2)) with linespoints ls 1 title 'baseline', \\\n"
        "     '' using (pos($1)):(pos($4)) with linespoints ls 2 title 'norm gate'\n",
        NULL};
    check_gp(P("figs/fig2a.gp"), gp);
    if (have_gnuplot) {
        check_png(P("figs/fig2a.png"));
        const char *svg[] = {"baseline", "norm gate", "dose ε", "1.6", NULL};
        check_svg(P("figs/fig2a.svg"), svg);
    }

    /* nothing drawable (no dose > 0 and no value > 0): empty axes, fixed ranges */
    const double x0[] = {0, -1};
    const PlotValue neg[] = {{-0.5, 0.1, 1}, {0, 0, 0}};
    const PlotSeries s0[] = {{"a", neg}};
    rc = plot_dose(P("figs"), "fig2e", "nothing", "y", x0, 2, s0, 1, err, sizeof err);
    CHECK(rc == (have_gnuplot ? 0 : 1), "plot_dose with nothing drawable: %d: %s", rc, err);
    const char *gp0[] = {"set xrange [0.08:1.25]\n", "set yrange [0.001:10]\n", NULL};
    check_gp(P("figs/fig2e.gp"), gp0);
    char *g0 = slurp(P("figs/fig2e.gp"));
    CHECK(!has(g0, "set xtics ("), "fig2e.gp: no dose ticks");
    free(g0);
}

/* ---- loss curves ----------------------------------------------------------- */

static void test_curve(void) {
    const double ts[] = {0, 10, 20, 30}, tl[] = {10.9, 7.5, NAN, 5.25};
    const double vs[] = {0, 30}, vl[] = {10.95, 5.5};
    int rc = plot_curve(P("figs/runs"), "curve_a", "run a: loss", ts, tl, 4, vs, vl, 2, err,
                        sizeof err);
    CHECK(rc == (have_gnuplot ? 0 : 1), "plot_curve: %d: %s", rc, err);
    CHECK(file_is(P("figs/runs/curve_a.dat"),
                  "# run a: loss\n"
                  "# index 0: training loss, index 1: validation loss (NaN: no value)\n"
                  "# training: 1 step, 2 loss\n"
                  "0 10.9\n10 7.5\n20 NaN\n30 5.25\n"
                  "\n\n"
                  "# validation: 1 step, 2 loss\n"
                  "0 10.95\n30 5.5\n"),
          "curve_a.dat as computed by hand");
    const char *gp[] = {"set output 'curve_a.png'\n", "set output 'curve_a.svg'\n",
                        "set xlabel 'step' noenhanced\n", "set ylabel 'loss (nats)' noenhanced\n",
                        "plot 'curve_a.dat' index 0 using 1:2 with lines ls 1 lw 1.5 title "
                        "'training', \\\n     '' index 1 using 1:2 with linespoints ls 2 dt 1 "
                        "title 'validation'\n",
                        NULL};
    check_gp(P("figs/runs/curve_a.gp"), gp);
    if (have_gnuplot) {
        check_png(P("figs/runs/curve_a.png"));
        const char *svg[] = {"training", "validation", "step", NULL};
        check_svg(P("figs/runs/curve_a.svg"), svg);
    }

    /* no validation yet: an empty block keeps index 1, and no legend entry */
    rc = plot_curve(P("figs/runs"), "curve_b", "run b", ts, tl, 4, NULL, NULL, 0, err, sizeof err);
    CHECK(rc == (have_gnuplot ? 0 : 1), "plot_curve without validation: %d: %s", rc, err);
    char *s = slurp(P("figs/runs/curve_b.dat"));
    CHECK(has(s, "\n\n\n# validation: 1 step, 2 loss\nNaN NaN\n"), "curve_b.dat: placeholder row");
    free(s);
    s = slurp(P("figs/runs/curve_b.gp"));
    CHECK(has(s, "title 'training'\n") && !has(s, "validation"), "curve_b.gp: training only");
    free(s);
    /* nothing at all still draws (empty axes) */
    rc = plot_curve(P("figs/runs"), "curve_c", "run c", NULL, NULL, 0, NULL, NULL, 0, err,
                    sizeof err);
    CHECK(rc == (have_gnuplot ? 0 : 1), "plot_curve with no points: %d: %s", rc, err);
}

/* ---- without gnuplot, and errors ------------------------------------------- */

static void test_errors(void) {
    /* gnuplot missing: 1, data and script written, old images gone */
    setenv("SG_GNUPLOT", "/nonexistent/gnuplot", 1);
    CHECK(!plot_available(), "plot_available with SG_GNUPLOT=/nonexistent");
    unlink(P("figs/fig1a.dat"));
    unlink(P("figs/fig1a.gp"));
    int rc = draw_categories(P("figs"));
    CHECK(rc == 1 && has(err, "fig1a.gp") && has(err, "cannot run"), "missing gnuplot: %d: %s",
          rc, err);
    CHECK(file_is(P("figs/fig1a.dat"), cat_dat), "fig1a.dat written without gnuplot");
    CHECK(fs_exists(P("figs/fig1a.gp")), "fig1a.gp written without gnuplot");
    CHECK(!fs_exists(P("figs/fig1a.png")) && !fs_exists(P("figs/fig1a.svg")),
          "stale images removed");
    const double x[] = {0.1};
    const PlotValue v[] = {{1, 0.1, 1}};
    const PlotSeries s[] = {{"a", v}};
    rc = plot_dose(P("nogp"), "d", "t", "y", x, 1, s, 1, err, sizeof err);
    CHECK(rc == 1 && fs_exists(P("nogp/d.dat")) && fs_exists(P("nogp/d.gp")),
          "plot_dose without gnuplot: %d", rc);
    const double st[] = {1}, lo[] = {2};
    rc = plot_curve(P("nogp"), "c", "t", st, lo, 1, st, lo, 1, err, sizeof err);
    CHECK(rc == 1 && fs_exists(P("nogp/c.dat")) && fs_exists(P("nogp/c.gp")),
          "plot_curve without gnuplot: %d", rc);
    setenv("SG_GNUPLOT", "no/such/dir/gnuplot", 1);
    rc = plot_curve(P("nogp"), "c", "t", st, lo, 1, st, lo, 1, err, sizeof err);
    CHECK(rc == 1 && has(err, "SG_GNUPLOT"), "relative SG_GNUPLOT that names nothing: %d: %s", rc,
          err);

    /* gnuplot fails: -1, its words in the message */
    char fake[600];
    snprintf(fake, sizeof fake, "#!/bin/sh\necho 'line 7: undefined variable: foo' >&2\n"
                                "echo '   ^' >&2\nexit 1\n");
    write_bytes(P("fakegp"), fake, strlen(fake));
    chmod(P("fakegp"), 0755);
    setenv("SG_GNUPLOT", P("fakegp"), 1);
    rc = plot_dose(P("nogp"), "d", "t", "y", x, 1, s, 1, err, sizeof err);
    CHECK(rc == -1 && has(err, "nogp/d.gp") && has(err, "exit status 1") &&
              has(err, "line 7: undefined variable: foo") && !has(err, "^"),
          "gnuplot failing: %d: %s", rc, err);
    unsetenv("SG_GNUPLOT");

    /* a directory that cannot be created */
    write_bytes(P("afile"), "x", 1);
    rc = plot_dose(P("afile/sub"), "d", "t", "y", x, 1, s, 1, err, sizeof err);
    CHECK(rc == -1 && has(err, "afile"), "uncreatable directory: %d: %s", rc, err);
    rc = plot_categories(P("afile"), "c", "t", "y", cats, 1, s, 1, err, sizeof err);
    CHECK(rc == -1 && has(err, "afile"), "a file for a directory: %d: %s", rc, err);

    /* bad arguments */
    rc = plot_dose(P("x"), "a/b", "t", "y", x, 1, s, 1, err, sizeof err);
    CHECK(rc == -1 && has(err, "plain file name"), "a name with a slash: %s", err);
    rc = plot_categories(P("x"), "c", "t", "y", cats, 0, s, 1, err, sizeof err);
    CHECK(rc == -1 && has(err, "no categories"), "no categories: %s", err);
    rc = plot_dose(P("x"), "d", "t", "y", x, 1, s, 0, err, sizeof err);
    CHECK(rc == -1 && has(err, "no series"), "no series: %s", err);
    CHECK(!fs_exists(P("x")), "nothing created for bad arguments");
}

int main(void) {
    check_name = "test_report_plot";
    unsetenv("SG_GNUPLOT");
    if (make_tmpdir("report_plot")) return 1;
    have_gnuplot = plot_available();
    if (!have_gnuplot)
        fprintf(stderr, "test_report_plot: gnuplot not found; images not checked "
                        "(tools/install-deps.sh installs gnuplot-nox)\n");
    test_categories();
    test_points();
    test_dose();
    test_curve();
    test_errors();
    rm_rf(tmpdir);
    return check_finish();
}
