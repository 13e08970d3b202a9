/* The grid of a report: (tier, arm, seed) -> the run shown and its final loss. */
#include <stdlib.h>
#include <string.h>

#include "report_internal.h"
#include "errmsg.h"

static int cmp_long(const void *a, const void *b) {
    long x = *(const long *)a, y = *(const long *)b;
    return (x > y) - (x < y);
}

int seed_index(const Grid *gr, long seed) {
    int lo = 0, hi = gr->S - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (gr->seeds[mid] == seed) return mid;
        if (gr->seeds[mid] < seed) lo = mid + 1;
        else hi = mid - 1;
    }
    return -1;
}

int arm_index(const char *name) {
    for (int i = 0; i < arm_count(); i++)
        if (!strcmp(arm_at(i)->name, name)) return i;
    return -1;
}

int arm_by_caps(ZeroOption z, FilterKind f, FilterSlot slot) {
    for (int i = 0; i < arm_count(); i++) {
        const Arm *a = arm_at(i);
        if (a->zero == z && a->filter == f && a->slot == slot) return i;
    }
    return -1;
}

int grid_build(Grid *gr, const RunSet *rs, const ReportOpts *o, char *err, size_t errlen) {
    memset(gr, 0, sizeof *gr);
    gr->rs = rs;
    gr->G = rs->n_groups;
    gr->A = arm_count();
    gr->base = o->baseline ? arm_index(o->baseline) : arm_by_caps(ZERO_NONE, FILTER_NONE, FSLOT_VALUE);
    gr->ref = o->reference ? arm_index(o->reference) : arm_by_caps(ZERO_PHANTOM_LEARNED, FILTER_NONE, FSLOT_VALUE);
    if (gr->base < 0) return sg_fail(err, errlen, "--baseline %s: unknown arm (known: %s)", o->baseline, arm_names());
    if (gr->ref < 0) return sg_fail(err, errlen, "--reference %s: unknown arm (known: %s)", o->reference, arm_names());
    gr->seeds = malloc((rs->n + 1) * sizeof *gr->seeds);
    if (!gr->seeds) return sg_fail(err, errlen, "out of memory");
    for (size_t i = 0; i < rs->n; i++)
        if (rs->v[i].group >= 0 && rs->v[i].seed >= 0) gr->seeds[gr->S++] = rs->v[i].seed;
    qsort(gr->seeds, (size_t)gr->S, sizeof *gr->seeds, cmp_long);
    int k = 0;
    for (int i = 0; i < gr->S; i++)
        if (i == 0 || gr->seeds[i] != gr->seeds[k - 1]) gr->seeds[k++] = gr->seeds[i];
    gr->S = k;
    size_t cells = (size_t)gr->G * gr->A * (gr->S ? gr->S : 1);
    gr->loss = calloc(cells, sizeof *gr->loss);
    gr->has = calloc(cells, 1);
    gr->first = calloc(cells, sizeof *gr->first);
    if (!gr->loss || !gr->has || !gr->first) return sg_fail(err, errlen, "out of memory");
    return 0;
}

void grid_free(Grid *gr) {
    free(gr->seeds);
    free(gr->loss);
    free(gr->has);
    free(gr->first);
}

Paired pair_at(const Grid *gr, int g, int a, int b) {
    return paired_diff(&gr->loss[AT(gr, g, a, 0)], &gr->has[AT(gr, g, a, 0)], &gr->loss[AT(gr, g, b, 0)],
                       &gr->has[AT(gr, g, b, 0)], gr->S);
}

int arm_present(const Grid *gr, int a) {
    for (int g = 0; g < gr->G; g++)
        for (int s = 0; s < gr->S; s++)
            if (gr->has[AT(gr, g, a, s)]) return 1;
    return 0;
}

int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}
