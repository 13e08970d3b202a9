/* Tables 1, 2 and 5: final validation losses and their paired differences. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report_internal.h"

void table1(const Grid *gr, Buf *md, Buf *csv, json_object *js) {
    int G = gr->G;
    bprintf(md, "## Table 1: final validation loss and paired improvements\n\n"
                "Differences are arm minus reference in nats (negative is better), the mean over the "
                "seeds trained for both arms ± its standard error, then (k/n): k of the n paired seeds "
                "improved. A single pair is marked (1 seed).\n\n| Arm |");
    for (int g = 0; g < G; g++) bprintf(md, " %s |", gr->rs->groups[g]);
    bprintf(md, "\n|---|");
    for (int g = 0; g < G; g++) bprintf(md, "---|");
    bprintf(csv, "block,arm,reference,tier,n,improved,mean,se\n");
    json_object *jg = json_object_new_array();
    for (int g = 0; g < G; g++) json_object_array_add(jg, json_object_new_string(gr->rs->groups[g]));
    json_object_object_add(js, "tiers", jg);

    bprintf(md, "\n| **%s loss** |", label_of(gr->base));
    for (int g = 0; g < G; g++) bprintf(md, " |");
    bprintf(md, "\n| %s |", label_of(gr->base));
    json_object *jb = json_object_new_object();
    for (int g = 0; g < G; g++) {
        Paired p = plain_mean(&gr->loss[AT(gr, g, gr->base, 0)], &gr->has[AT(gr, g, gr->base, 0)], gr->S);
        if (!p.n) bprintf(md, " – |");
        else bprintf(md, " %.4f (%d seed%s) |", p.mean, p.n, p.n > 1 ? "s" : "");
        bprintf(csv, "loss,%s,,", arm_at(gr->base)->name);
        csv_str(csv, gr->rs->groups[g]);
        bprintf(csv, ",%d,,", p.n);
        csv_num(csv, p.mean, p.n > 0);
        bprintf(csv, ",");
        csv_num(csv, p.se, p.n > 1);
        bprintf(csv, "\n");
        json_object_object_add(jb, gr->rs->groups[g], j_mean(p));
    }
    json_object_object_add(js, "baseline_loss", jb);

    for (int block = 0; block < 2; block++) {
        int ref = block == 0 ? gr->base : gr->ref;
        if (block == 0)
            bprintf(md, "\n| **Improvement over %s (paired per seed)** |", label_of(ref));
        else
            bprintf(md, "\n| **Improvement over %s (filtering with abstention held fixed)** |", label_of(ref));
        for (int g = 0; g < G; g++) bprintf(md, " |");
        json_object *rows = json_object_new_array();
        for (int a = 0; a < gr->A; a++) {
            const Arm *arm = arm_at(a);
            if (a == ref || !arm_present(gr, a)) continue;
            if (block == 1 && !(arm->filter != FILTER_NONE && arm->slot == FSLOT_VALUE)) continue;
            bprintf(md, "\n| %s |", arm->label);
            json_object *row = json_object_new_object(), *cells = json_object_new_object();
            json_object_object_add(row, "arm", json_object_new_string(arm->name));
            json_object_object_add(row, "label", json_object_new_string(arm->label));
            for (int g = 0; g < G; g++) {
                Paired p = pair_at(gr, g, a, ref);
                md_paired(md, p, 1);
                bprintf(csv, "%s,%s,%s,", block ? "vs_reference" : "vs_baseline", arm->name, arm_at(ref)->name);
                csv_str(csv, gr->rs->groups[g]);
                bprintf(csv, ",%d,%d,", p.n, p.improved);
                csv_num(csv, p.mean, p.n > 0);
                bprintf(csv, ",");
                csv_num(csv, p.se, p.n > 1);
                bprintf(csv, "\n");
                json_object_object_add(cells, gr->rs->groups[g], j_paired(p, 1));
            }
            json_object_object_add(row, "cells", cells);
            json_object_array_add(rows, row);
        }
        json_object_object_add(js, block ? "vs_reference" : "vs_baseline", rows);
    }
    json_object_object_add(js, "baseline", json_object_new_string(arm_at(gr->base)->name));
    json_object_object_add(js, "reference", json_object_new_string(arm_at(gr->ref)->name));
    bprintf(md, "\n\n");
}

/* ---- Table 2 ------------------------------------------------------------------ */

void table2(const Grid *gr, Buf *md, Buf *csv, json_object *js) {
    bprintf(md, "## Table 2: two-by-two decomposition\n\n"
                "Improvements over %s in nats (positive is better), paired per seed, mean ± SE. "
                "Sink, gate and both: %s, the gate alone and the combined arm against %s. "
                "Overlap = sink + gate − both. Filter: the combined arm against %s, paired per seed.\n\n"
                "| Form | Tier | Sink | Gate | Both | Overlap | Filter |\n|---|---|---|---|---|---|---|\n",
                label_of(gr->base), label_of(gr->ref), label_of(gr->base), label_of(gr->ref));
    bprintf(csv, "form,tier,quantity,n,mean,se\n");
    json_object *rows = json_object_new_array();
    static const struct {
        FilterKind f;
        const char *name;
    } forms[] = {{FILTER_NORM, "norm"}, {FILTER_PROJ, "projection"}};
    for (int fi = 0; fi < 2; fi++) {
        int gate = arm_by_caps(ZERO_NONE, forms[fi].f, FSLOT_VALUE);
        int both = arm_by_caps(arm_at(gr->ref)->zero, forms[fi].f, FSLOT_VALUE);
        if (gate < 0 || both < 0) continue;
        int first = 1;
        for (int g = 0; g < gr->G; g++) {
            Paired q[5];
            q[0] = pair_at(gr, g, gr->ref, gr->base);
            q[1] = pair_at(gr, g, gate, gr->base);
            q[2] = pair_at(gr, g, both, gr->base);
            q[4] = pair_at(gr, g, both, gr->ref);
            if (!q[0].n && !q[1].n && !q[2].n && !q[4].n) continue;
            int ov = q[0].n && q[1].n && q[2].n;
            /* improvements are positive: minus the differences */
            double overlap = ov ? -q[0].mean - q[1].mean + q[2].mean : 0;
            bprintf(md, "| %s | %s |", first ? forms[fi].name : "", gr->rs->groups[g]);
            first = 0;
            static const char *qn[5] = {"sink", "gate", "both", "overlap", "filter"};
            json_object *row = json_object_new_object();
            json_object_object_add(row, "form", json_object_new_string(forms[fi].name));
            json_object_object_add(row, "tier", json_object_new_string(gr->rs->groups[g]));
            json_object_object_add(row, "gate_arm", json_object_new_string(arm_at(gate)->name));
            json_object_object_add(row, "both_arm", json_object_new_string(arm_at(both)->name));
            for (int k = 0; k < 5; k++) {
                bprintf(csv, "%s,", forms[fi].name);
                csv_str(csv, gr->rs->groups[g]);
                if (k == 3) {
                    bprintf(md, ov ? " %.4f |" : " – |", overlap);
                    bprintf(csv, ",overlap,,");
                    csv_num(csv, overlap, ov);
                    bprintf(csv, ",\n");
                    json_object_object_add(row, "overlap", ov ? json_object_new_double(overlap) : NULL);
                    continue;
                }
                Paired p = q[k];
                if (!p.n) bprintf(md, " – |");
                else if (p.n == 1) bprintf(md, " %.4f (1 seed) |", -p.mean);
                else bprintf(md, " %.4f ± %.4f |", -p.mean, p.se);
                bprintf(csv, ",%s,%d,", qn[k], p.n);
                csv_num(csv, -p.mean, p.n > 0);
                bprintf(csv, ",");
                csv_num(csv, p.se, p.n > 1);
                bprintf(csv, "\n");
                json_object_object_add(row, qn[k], j_paired(p, -1));
            }
            bprintf(md, "\n");
            json_object_array_add(rows, row);
        }
    }
    json_object_object_add(js, "rows", rows);
    bprintf(md, "\n");
}

/* ---- Table 5 ------------------------------------------------------------------ */

void table5(const Grid *gr, Buf *md, Buf *csv, json_object *js) {
    bprintf(md, "## Table 5: final validation loss of every run\n\n"
                "– : no run directory for that seed. Runs that did not finish show their state.\n\n| Tier | Arm |");
    for (int s = 0; s < gr->S; s++) bprintf(md, " seed %ld |", gr->seeds[s]);
    bprintf(md, " mean |\n|---|---|");
    for (int s = 0; s <= gr->S; s++) bprintf(md, "---|");
    bprintf(md, "\n");
    bprintf(csv, "tier,arm,seed,status,final_val_loss,run\n");
    json_object *rows = json_object_new_array();
    static const char *st[] = {"done", "failed", "unfinished", "corrupt"};
    for (int g = 0; g < gr->G; g++) {
        int first = 1;
        for (int a = 0; a < gr->A; a++) {
            int any = 0;
            for (int s = 0; s < gr->S; s++) any |= gr->first[AT(gr, g, a, s)] != NULL;
            if (!any) continue;
            bprintf(md, "| %s | %s |", first ? gr->rs->groups[g] : "", label_of(a));
            first = 0;
            json_object *row = json_object_new_object(), *seeds = json_object_new_object();
            json_object_object_add(row, "tier", json_object_new_string(gr->rs->groups[g]));
            json_object_object_add(row, "arm", json_object_new_string(arm_at(a)->name));
            for (int s = 0; s < gr->S; s++) {
                const RunRec *r = gr->first[AT(gr, g, a, s)];
                char key[32];
                snprintf(key, sizeof key, "%ld", gr->seeds[s]);
                if (!r) {
                    bprintf(md, " – |");
                    continue;
                }
                if (gr->has[AT(gr, g, a, s)]) bprintf(md, " %.4f |", gr->loss[AT(gr, g, a, s)]);
                else if (r->status == RUN_FAILED) bprintf(md, " failed at %ld |", r->step);
                else bprintf(md, " %s %ld/%ld |", st[r->status], r->step, r->iters);
                int done = gr->has[AT(gr, g, a, s)];
                csv_str(csv, gr->rs->groups[g]);
                bprintf(csv, ",%s,%ld,%s,", arm_at(a)->name, gr->seeds[s], done ? "done" : st[r->status]);
                csv_num(csv, gr->loss[AT(gr, g, a, s)], done);
                bprintf(csv, ",");
                csv_str(csv, r->dir);
                bprintf(csv, "\n");
                json_object_object_add(seeds, key, done ? json_object_new_double(gr->loss[AT(gr, g, a, s)])
                                                        : json_object_new_string(st[r->status]));
            }
            Paired m = plain_mean(&gr->loss[AT(gr, g, a, 0)], &gr->has[AT(gr, g, a, 0)], gr->S);
            if (m.n) bprintf(md, " %.4f |\n", m.mean);
            else bprintf(md, " – |\n");
            json_object_object_add(row, "seeds", seeds);
            json_object_object_add(row, "mean", m.n ? json_object_new_double(m.mean) : NULL);
            json_object_object_add(row, "n", json_object_new_int(m.n));
            json_object_array_add(rows, row);
        }
    }
    json_object_object_add(js, "seeds", json_object_new_array());
    for (int s = 0; s < gr->S; s++)
        json_object_array_add(json_object_object_get(js, "seeds"), json_object_new_int64(gr->seeds[s]));
    json_object_object_add(js, "rows", rows);
    bprintf(md, "\n");
}
