/* Figures of a report, drawn by gnuplot: every figure is written as
 * DIR/NAME.dat (the numbers), DIR/NAME.gp (the script, runnable again by
 * hand: cd DIR && gnuplot NAME.gp), DIR/NAME.png (800x500) and DIR/NAME.svg.
 * gnuplot is found on PATH (or $SG_GNUPLOT); without it the .dat and .gp
 * files are still written and the functions return 1 so the caller can say
 * the images are missing.
 *
 * DIR is created if needed; NAME is a plain file name (no '/').  Images
 * left from an earlier call are removed before gnuplot runs, so they never
 * disagree with NAME.dat.  The same input gives byte-identical files.
 * Titles, labels, legend and category names are printed as given (quotes,
 * backquotes, _ ^ @ included; only a " in a category prints as ').  Returns: 0 drawn; 1 gnuplot missing or not
 * runnable (err says why); -1 error (err names the file; a failing gnuplot's
 * own message included). */
#ifndef SG_REPORT_PLOT_H
#define SG_REPORT_PLOT_H

#include <stddef.h>

/* One value with its standard error; present = 0 leaves a gap. se < 0: none
 * (a single seed), drawn without an error bar. */
typedef struct {
    double y, se;
    int present;
} PlotValue;

typedef struct {
    const char *name;      /* legend entry */
    const PlotValue *v;    /* one per category (or per x) */
} PlotSeries;

/* 1 if gnuplot can be run. */
int plot_available(void);

/* Figure 1(a) style: categories along x (tiers, in order, x label "tier"),
 * one line with error bars per series (side by side), a line at zero; the y
 * range always includes 0.  Returns 0 drawn, 1 gnuplot missing (data and
 * script written), -1 error. */
int plot_categories(const char *dir, const char *name, const char *title, const char *ylabel,
                    const char *const *cats, int ncat, const PlotSeries *series, int nseries,
                    char *err, size_t errlen);

/* The same with another x label (e.g. "load N/d"). */
int plot_categories_x(const char *dir, const char *name, const char *title, const char *xlabel,
                      const char *ylabel, const char *const *cats, int ncat, const PlotSeries *series,
                      int nseries, char *err, size_t errlen);

/* Figure 5 style: the same, each series as points without a line, for
 * categories that are not an axis (arms).  Tick labels that would crowd
 * are turned by 30 degrees. */
int plot_categories_points(const char *dir, const char *name, const char *title, const char *xlabel,
                           const char *ylabel, const char *const *cats, int ncat, const PlotSeries *series,
                           int nseries, char *err, size_t errlen);

/* Figure 2 style: x = doses (log scale, a tick at each dose, x label
 * "dose ε"), y on a log scale (values <= 0 and doses <= 0 are not drawn; an
 * error bar reaching 0 runs to the bottom), one line per series. */
int plot_dose(const char *dir, const char *name, const char *title, const char *ylabel,
              const double *x, int nx, const PlotSeries *series, int nseries, char *err,
              size_t errlen);

/* A run's loss curves: training loss per step and validation loss at its
 * steps, same axes (y label "loss (nats)").  Either may be empty (n = 0,
 * pointers may be NULL); a NaN leaves a gap. */
int plot_curve(const char *dir, const char *name, const char *title, const double *train_step,
               const double *train_loss, int ntrain, const double *val_step,
               const double *val_loss, int nval, char *err, size_t errlen);

#endif
