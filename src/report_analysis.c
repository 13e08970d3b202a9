/* Analysis tables (injection, probes, exposure, telemetry, incidence): values
 * aggregated over seeds per (tier, condition, arm, column). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report_internal.h"

static int name_index(char ***list, int *n, const char *s, int *oom) {
    for (int i = 0; i < *n; i++)
        if (!strcmp((*list)[i], s)) return i;
    char **l = realloc(*list, (size_t)(*n + 1) * sizeof *l);
    if (!l || !(l[*n] = strdup(s))) {
        *oom = 1;
        if (l) *list = l;
        return 0;
    }
    *list = l;
    return (*n)++;
}

static void agg_add(Agg *ag, int g, int a, int sub, double x, double v) {
    int i = ag->n - 1;
    while (i >= 0 && !(ag->c[i].g == g && ag->c[i].a == a && ag->c[i].sub == sub && ag->c[i].x == x)) i--;
    if (i < 0) {
        if (ag->n == ag->cap) {
            int c = ag->cap ? 2 * ag->cap : 64;
            Cell *nc = realloc(ag->c, (size_t)c * sizeof *nc);
            if (!nc) {
                ag->oom = 1;
                return;
            }
            ag->c = nc;
            ag->cap = c;
        }
        i = ag->n++;
        ag->c[i] = (Cell){g, a, sub, x, NULL, 0, 0};
    }
    Cell *c = &ag->c[i];
    if (c->n == c->cap) {
        int k = c->cap ? 2 * c->cap : 4;
        double *nv = realloc(c->v, (size_t)k * sizeof *nv);
        if (!nv) {
            ag->oom = 1;
            return;
        }
        c->v = nv;
        c->cap = k;
    }
    c->v[c->n++] = v;
}

void agg_free(Agg *ag) {
    for (int i = 0; i < ag->n; i++) free(ag->c[i].v);
    free(ag->c);
    for (int i = 0; i < ag->nsubs; i++) free(ag->subs[i]);
    for (int i = 0; i < ag->ncols; i++) free(ag->cols[i]);
    free(ag->subs);
    free(ag->cols);
    memset(ag, 0, sizeof *ag);
}

/* Distinct column values, ascending. */
int agg_columns(const Agg *ag, double *xs) {
    int n = 0;
    for (int i = 0; i < ag->n; i++) {
        int seen = 0;
        for (int k = 0; k < n && !seen; k++) seen = xs[k] == ag->c[i].x;
        if (!seen) xs[n++] = ag->c[i].x;
    }
    qsort(xs, (size_t)n, sizeof *xs, cmp_double);
    return n;
}

Paired cell_stat(const Agg *ag, int g, int sub, int a, double x) {
    for (int i = 0; i < ag->n; i++) {
        const Cell *c = &ag->c[i];
        if (c->g == g && c->sub == sub && c->a == a && c->x == x) {
            unsigned char has[c->n > 0 ? c->n : 1];
            memset(has, 1, sizeof has);
            return plain_mean(c->v, has, c->n);
        }
    }
    return (Paired){0, 0, 0, -1};
}

int row_exists(const Agg *ag, int g, int sub, int a) {
    for (int i = 0; i < ag->n; i++)
        if (ag->c[i].g == g && ag->c[i].sub == sub && ag->c[i].a == a) return 1;
    return 0;
}

static int json_num(json_object *o, const char *key, double *x) {
    json_object *v;
    if (!json_object_object_get_ex(o, key, &v)) return 0;
    if (!json_object_is_type(v, json_type_double) && !json_object_is_type(v, json_type_int)) return 0;
    *x = json_object_get_double(v);
    return isfinite(*x);
}

static const char *json_str(json_object *o, const char *key) {
    json_object *v;
    if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_string)) return NULL;
    return json_object_get_string(v);
}

void agg_collect(const RunSet *rs, int kind, Agg *ag, int *bad, Buf *problems) {
    for (size_t i = 0; i < rs->n; i++) {
        const RunRec *r = &rs->v[i];
        json_object *o = r->analysis[kind], *res;
        if (!o || r->group < 0) continue;
        int a = arm_index(r->arm);
        if (a < 0) continue;
        if (kind == AN_INJECTION || kind == AN_PROBES) {
            double clean = 0;
            if (kind == AN_INJECTION && !json_num(o, "clean_val_loss", &clean)) {
                (*bad)++;
                bprintf(problems, "- %s/analysis/injection.json: no finite \"clean_val_loss\"\n", r->dir);
                continue;
            }
            if (!json_object_object_get_ex(o, "results", &res) || !json_object_is_type(res, json_type_array)) {
                (*bad)++;
                bprintf(problems, "- %s/analysis/%s.json: no \"results\" array\n", r->dir, analysis_names[kind]);
                continue;
            }
            for (size_t k = 0; k < json_object_array_length(res); k++) {
                json_object *e = json_object_array_get_idx(res, k);
                double dose, loss;
                const char *s1 = json_str(e, kind == AN_INJECTION ? "junk" : "override");
                const char *s2 = kind == AN_INJECTION ? json_str(e, "cutoff") : "";
                if (!s1 || !s2 || !json_num(e, "dose", &dose) || !json_num(e, "val_loss", &loss)) {
                    (*bad)++;
                    bprintf(problems, "- %s/analysis/%s.json: result %zu lacks %s\n", r->dir,
                            analysis_names[kind], k,
                            kind == AN_INJECTION ? "junk, cutoff, dose or val_loss" : "override, dose or val_loss");
                    continue;
                }
                char sub[128];
                if (kind == AN_INJECTION) snprintf(sub, sizeof sub, "%s (%s)", s1, s2);
                else snprintf(sub, sizeof sub, "%s", s1);
                int si = name_index(&ag->subs, &ag->nsubs, sub, &ag->oom);
                agg_add(ag, r->group, a, si, dose, kind == AN_INJECTION ? loss - clean : loss);
            }
        } else {
            int si = name_index(&ag->subs, &ag->nsubs, "", &ag->oom);
            json_object_object_foreach(o, key, val) {
                if (!strcmp(key, "kind") || !strcmp(key, "version")) continue;
                if (!json_object_is_type(val, json_type_double) && !json_object_is_type(val, json_type_int)) continue;
                int ci = name_index(&ag->cols, &ag->ncols, key, &ag->oom);
                agg_add(ag, r->group, a, si, ci, json_object_get_double(val));
            }
        }
    }
}

/* One analysis table: rows (tier, sub, arm), columns XS (doses, or names). */
void agg_table(const Grid *gr, const Agg *ag, const char *title, const char *note, const char *subhead,
                      const char *colfmt, int signed_vals, Buf *md, Buf *csv, json_object *jrows) {
    double xs[ag->n > 0 ? ag->n : 1];
    int nx = agg_columns(ag, xs);
    bprintf(md, "## %s\n\n%s\n\n| Tier |", title, note);
    if (subhead) bprintf(md, " %s |", subhead);
    bprintf(md, " Arm |");
    for (int k = 0; k < nx; k++) {
        if (ag->ncols) bprintf(md, " %s |", ag->cols[(int)xs[k]]);
        else {
            bprintf(md, " ");
            bprintf(md, colfmt, xs[k]);
            bprintf(md, " |");
        }
    }
    bprintf(md, "\n|---|%s---|", subhead ? "---|" : "");
    for (int k = 0; k < nx; k++) bprintf(md, "---|");
    bprintf(md, "\n");
    bprintf(csv, "tier,%sarm,column,n,mean,se\n", subhead ? "condition," : "");
    for (int g = 0; g < gr->G; g++)
        for (int sub = 0; sub < (ag->nsubs ? ag->nsubs : 1); sub++)
            for (int a = 0; a < gr->A; a++) {
                if (!row_exists(ag, g, sub, a)) continue;
                bprintf(md, "| %s |", gr->rs->groups[g]);
                if (subhead) bprintf(md, " %s |", ag->subs[sub]);
                bprintf(md, " %s |", label_of(a));
                json_object *row = json_object_new_object(), *cells = json_object_new_object();
                json_object_object_add(row, "tier", json_object_new_string(gr->rs->groups[g]));
                if (subhead) json_object_object_add(row, "condition", json_object_new_string(ag->subs[sub]));
                json_object_object_add(row, "arm", json_object_new_string(arm_at(a)->name));
                for (int k = 0; k < nx; k++) {
                    Paired p = cell_stat(ag, g, sub, a, xs[k]);
                    char col[64];
                    if (ag->ncols) snprintf(col, sizeof col, "%s", ag->cols[(int)xs[k]]);
                    else snprintf(col, sizeof col, "%g", xs[k]);
                    if (!p.n) bprintf(md, " – |");
                    else if (p.n == 1) bprintf(md, signed_vals ? " %+.3f |" : " %.4f |", p.mean);
                    else bprintf(md, signed_vals ? " %+.3f ± %.3f (%d seeds) |" : " %.4f ± %.4f (%d seeds) |", p.mean, p.se, p.n);
                    if (!p.n) continue;
                    csv_str(csv, gr->rs->groups[g]);
                    bprintf(csv, ",");
                    if (subhead) {
                        csv_str(csv, ag->subs[sub]);
                        bprintf(csv, ",");
                    }
                    bprintf(csv, "%s,%s,%d,", arm_at(a)->name, col, p.n);
                    csv_num(csv, p.mean, 1);
                    bprintf(csv, ",");
                    csv_num(csv, p.se, p.n > 1);
                    bprintf(csv, "\n");
                    json_object_object_add(cells, col, j_paired(p, 1));
                }
                bprintf(md, "\n");
                json_object_object_add(row, "cells", cells);
                json_object_array_add(jrows, row);
            }
    bprintf(md, "\n");
}
