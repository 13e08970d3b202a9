/* What the report's files share (report.c assembles the report; the grid,
 * the text cells, each group of tables and the figures have a file each).
 * Not part of report.h: sgreport and the tests see report_write alone. */
#ifndef SG_REPORT_INTERNAL_H
#define SG_REPORT_INTERNAL_H

#include <json-c/json.h>
#include <stddef.h>

#include "arms.h"
#include "pairstat.h"
#include "report.h"
#include "runs.h"

/* ---- the grid: group x arm x seed -> final loss (report_grid.c) ---------- */

typedef struct {
    const RunSet *rs;
    int G, A, S;
    long *seeds;            /* S distinct seeds, ascending */
    double *loss;           /* [G][A][S] */
    unsigned char *has;     /* a done run is there */
    const RunRec **first;   /* the run shown in Table 5, any status */
    int base, ref;          /* arm indices */
} Grid;

#define AT(gr, g, a, s) ((((size_t)(g) * (gr)->A) + (size_t)(a)) * (gr)->S + (size_t)(s))

/* Sizes the grid and finds the baseline and reference arms (by name, or by
 * capability when O names none); every cell starts empty. */
int grid_build(Grid *gr, const RunSet *rs, const ReportOpts *o, char *err, size_t errlen);
void grid_free(Grid *gr);
int seed_index(const Grid *gr, long seed); /* -1: not in the grid */
int arm_index(const char *name);           /* -1: no such arm */
int arm_by_caps(ZeroOption z, FilterKind f, FilterSlot slot);
/* arm a's loss minus arm b's at tier g, paired over the seeds both have */
Paired pair_at(const Grid *gr, int g, int a, int b);
int arm_present(const Grid *gr, int a); /* some tier has a done run of it */
int cmp_double(const void *a, const void *b); /* qsort, ascending */

static inline const char *label_of(int a) { return arm_at(a)->label; }

/* ---- text (report_format.c) ----------------------------------------------- */

/* A growing string; after a failed allocation it keeps what it had and
 * sets oom, which put_file reports. */
typedef struct {
    char *p;
    size_t n, cap;
    int oom;
} Buf;

void bprintf(Buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void csv_str(Buf *b, const char *s);              /* quoted where CSV needs it */
void csv_num(Buf *b, double x, int present);      /* empty unless present and finite */
void md_paired(Buf *b, Paired p, int sign);       /* "-0.0185 ± 0.0033 (3/3)" */
json_object *j_mean(Paired p);                    /* {"n", "mean", "se"}; NULL for none */
json_object *j_paired(Paired p, int sign);        /* the same, signed, with "improved" */
char *path_cat(const char *a, const char *b);     /* "a/b", malloc'd */

/* ---- the loss tables (report_loss.c, report_throughput.c) ----------------- */

void table1(const Grid *gr, Buf *md, Buf *csv, json_object *js);
void table2(const Grid *gr, Buf *md, Buf *csv, json_object *js);
void table5(const Grid *gr, Buf *md, Buf *csv, json_object *js);
/* 0 where no run has a rate or a wall time (nothing written) */
int table_throughput(const Grid *gr, Buf *md, Buf *csv, json_object *js);

/* ---- analysis tables (report_analysis.c) ---------------------------------- */

typedef struct {
    int g, a, sub;   /* sub: index into Agg.subs (condition, override...) */
    double x;        /* column: a dose, or an index into Agg.cols */
    double *v;
    int n, cap;
} Cell;

typedef struct {
    Cell *c;
    int n, cap;
    char **subs, **cols;
    int nsubs, ncols;
    int oom;
} Agg;

/* Fill AG from every done run's analysis file of KIND.  Malformed entries
 * are counted in *bad and named in PROBLEMS. */
void agg_collect(const RunSet *rs, int kind, Agg *ag, int *bad, Buf *problems);
void agg_free(Agg *ag);
int agg_columns(const Agg *ag, double *xs); /* distinct column values, ascending */
Paired cell_stat(const Agg *ag, int g, int sub, int a, double x);
int row_exists(const Agg *ag, int g, int sub, int a);
void agg_table(const Grid *gr, const Agg *ag, const char *title, const char *note, const char *subhead,
               const char *colfmt, int signed_vals, Buf *md, Buf *csv, json_object *jrows);

/* ---- Tables 10 and 11 (report_zeroshot.c); 0 where no run has the files --- */

int table10(const Grid *gr, Buf *md, Buf *csv, json_object *js, Buf *problems);
int table11(const Grid *gr, Buf *md, Buf *csv, json_object *js, Buf *problems);

/* ---- figures (report_figures.c): each adds its caption to MD, or a line
 * to PROBLEMS when it could not be written ---------------------------------- */

void figure1(const Grid *gr, const char *figdir, Buf *md, ReportSummary *sum, Buf *problems);
void figure2(const Grid *gr, const Agg *ag, const char *figdir, Buf *md, ReportSummary *sum, Buf *problems);
void figure5(const Grid *gr, const Agg *ag, const char *figdir, Buf *md, ReportSummary *sum, Buf *problems);
/* column KEY of AG across the tiers, a series per arm that has it */
void tel_across_tiers(const Grid *gr, const Agg *ag, const char *key, const char *figdir, const char *file,
                      const char *title, const char *ylabel, const char *caption, Buf *md, ReportSummary *sum,
                      Buf *problems);
void curves(const RunSet *rs, const char *figdir, Buf *md, ReportSummary *sum, Buf *problems);

#endif
