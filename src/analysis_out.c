/* The analyses' JSON files (docs/formats.md, "Analysis outputs") and the
 * summary printed at the end.  Top-level numbers of exposure.json and
 * telemetry.json are measurements (sgreport tabulates every one); the
 * settings go under "setup" and per-layer values under "layers". */
#include <json-c/json.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analysis_out.h"
#include "fsutil.h"
#include "ops.h"
#include "run_vocab.h"
#include "utf8.h"

static json_object *jnum(double x) { return isfinite(x) ? json_object_new_double(x) : json_object_new_null(); }

static void put(json_object *o, const char *k, json_object *v) { json_object_object_add(o, k, v); }

/* Mean over batches of a condition's loss minus the clean loss, and the
 * standard error of that paired difference. */
static void increase(const AnRun *r, const AnCond *c, double *mean, double *se) {
    const int n = r->o->batches;
    double s = 0, s2 = 0;
    for (int b = 0; b < n; b++) s += c->loss[b] - r->cond[0].loss[b];
    *mean = s / n;
    for (int b = 0; b < n; b++) {
        const double e = c->loss[b] - r->cond[0].loss[b] - *mean;
        s2 += e * e;
    }
    *se = n > 1 ? sqrt(s2 / (n - 1) / n) : NAN;
}

static double mean_loss(const AnRun *r, const AnCond *c) {
    double s = 0;
    for (int b = 0; b < r->o->batches; b++) s += c->loss[b];
    return s / r->o->batches;
}

static const AnCond *find(const AnRun *r, int ovr, int junk, int cut, double eps) {
    for (int i = 0; i < r->ncond; i++) {
        const AnCond *c = &r->cond[i];
        if (c->override == ovr && c->junk == junk && (junk < 0 || (c->cut == cut && c->eps == eps))) return c;
    }
    return NULL;
}

static json_object *setup_json(const AnRun *r) {
    const AnalysisOpts *o = r->o;
    json_object *s = json_object_new_object();
    put(s, "source", json_object_new_string(o->src));
    put(s, "arm", json_object_new_string(r->m.arm->name));
    put(s, "tier", json_object_new_string(r->cfg.tier));
    put(s, "run_seed", json_object_new_int64(r->cfg.seed));
    put(s, "step", json_object_new_int64(r->step));
    put(s, "data", json_object_new_string(r->data_dir));
    put(s, "val_seed", json_object_new_int64(r->cfg.val_seed));
    put(s, "batches", json_object_new_int(o->batches));
    put(s, "batch_size", json_object_new_int(o->batch_size));
    put(s, "seq_len", json_object_new_int(r->m.T));
    put(s, "tokens", json_object_new_int64((int64_t)o->batches * o->batch_size * r->m.T));
    put(s, "seed", json_object_new_int64((int64_t)o->seed));
    put(s, "backend", json_object_new_string(op_backend()));
    put(s, "threads", json_object_new_int(op_threads()));
    put(s, "seconds", json_object_new_double(r->seconds));
    return s;
}

static json_object *new_file(const char *kind) {
    json_object *o = json_object_new_object();
    put(o, "kind", json_object_new_string(kind));
    put(o, "version", json_object_new_int(1));
    return o;
}

static int write_json(const AnRun *r, const char *kind, json_object *o, char *err, size_t errlen) {
    if (!json_object_object_get_ex(o, "setup", NULL)) put(o, "setup", setup_json(r));
    char path[1200];
    snprintf(path, sizeof path, "%s/%s.json", r->out_dir, kind);
    const char *s = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE);
    size_t n = strlen(s);
    char *buf = malloc(n + 2);
    if (!buf) abort();
    memcpy(buf, s, n);
    buf[n] = '\n';
    int rc = fs_write_atomic(path, buf, n + 1, err, errlen);
    free(buf);
    json_object_put(o);
    return rc;
}

static int write_injection(const AnRun *r, char *err, size_t errlen) {
    json_object *o = new_file("injection"), *res = json_object_new_array();
    put(o, "clean_val_loss", jnum(mean_loss(r, &r->cond[0])));
    for (int i = 1; i < r->ncond; i++) {
        const AnCond *c = &r->cond[i];
        if (!c->in_battery) continue;
        double inc, se;
        increase(r, c, &inc, &se);
        json_object *e = json_object_new_object();
        put(e, "junk", json_object_new_string(junk_name(c->junk)));
        put(e, "cutoff", json_object_new_string(cutoff_name(c->cut)));
        put(e, "dose", json_object_new_double(c->eps));
        put(e, "val_loss", jnum(mean_loss(r, c)));
        put(e, "increase", jnum(inc));
        put(e, "increase_se", jnum(se));
        put(e, "corrupted_share", jnum(c->reads ? (double)c->corrupted / c->reads : 0));
        put(e, "seconds", json_object_new_double(c->seconds));
        json_object_array_add(res, e);
    }
    put(o, "results", res);
    return write_json(r, "injection", o, err, errlen);
}

static int write_probes(const AnRun *r, char *err, size_t errlen) {
    const AnalysisOpts *o = r->o;
    json_object *f = new_file("probes"), *res = json_object_new_array();
    put(f, "junk", json_object_new_string(junk_name(o->probe_junk)));
    put(f, "cutoff", json_object_new_string(cutoff_name(o->probe_cut)));
    put(f, "clean_val_loss", jnum(mean_loss(r, &r->cond[0])));
    const double doses[2] = {0, o->probe_dose};
    for (int v = 0; v < OVR_KINDS; v++)
        for (int k = 0; k < (o->probe_dose > 0 ? 2 : 1); k++) {
            const AnCond *c = find(r, v, k ? o->probe_junk : -1, o->probe_cut, doses[k]);
            if (!c) continue;
            double inc, se;
            increase(r, c, &inc, &se);
            json_object *e = json_object_new_object();
            put(e, "override", json_object_new_string(override_name(v)));
            put(e, "dose", json_object_new_double(doses[k]));
            put(e, "val_loss", jnum(mean_loss(r, c)));
            put(e, "increase", jnum(inc));
            put(e, "increase_se", jnum(se));
            json_object_array_add(res, e);
        }
    put(f, "results", res);
    return write_json(r, "probes", f, err, errlen);
}

/* ---- exposure and telemetry ------------------------------------------------ */

static double kurtosis_layer(const AnStats *s, int l) {
    const double n = s->tokens[l];
    double sum = 0;
    int cnt = 0;
    for (int k = 0; k < s->C; k++) {
        const double *p = s->mom + ((long)l * s->C + k) * 4;
        const double m1 = p[0] / n, e2 = p[1] / n, e3 = p[2] / n, e4 = p[3] / n;
        const double m2 = e2 - m1 * m1, m4 = e4 - 4 * m1 * e3 + 6 * m1 * m1 * e2 - 3 * m1 * m1 * m1 * m1;
        if (m2 <= 0) continue;
        sum += m4 / (m2 * m2) - 3;
        cnt++;
    }
    return cnt ? sum / cnt : NAN;
}

static int cmp_dbl(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median over heads (of layer l, or of all layers when l < 0) of the
 * position-0 read norm relative to the median of the others. */
static double pos0_ratio(const AnStats *s, int l) {
    const int l0 = l < 0 ? 0 : l, l1 = l < 0 ? s->L : l + 1;
    double *x = malloc(sizeof(double) * (size_t)(l1 - l0) * s->H);
    if (!x) abort();
    int n = 0;
    for (int i = l0 * s->H; i < l1 * s->H; i++)
        if (s->rmed[i] > 0) x[n++] = s->r0[i] / s->rmed[i];
    qsort(x, (size_t)n, sizeof *x, cmp_dbl);
    double m = n ? (n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2])) : NAN;
    free(x);
    return m;
}

static double sum_of(const double *x, int n) {
    double s = 0;
    for (int i = 0; i < n; i++) s += x[i];
    return s;
}

static int write_exposure(const AnRun *r, char *err, size_t errlen) {
    const AnStats *s = &r->stats;
    const Arm *arm = r->m.arm;
    const double rows = sum_of(s->rows, s->L);
    json_object *o = new_file("exposure"), *layers = json_object_new_array();
    put(o, "quiet_median", jnum(sum_of(s->quiet_med, s->L) / rows));
    put(o, "quiet_q25", jnum(sum_of(s->quiet_q25, s->L) / rows));
    if (arm_has_phantom(arm)) put(o, "phantom", jnum(sum_of(s->phantom, s->L) / rows));
    if (arm_has_sink_token(arm)) put(o, "sink_token", jnum(sum_of(s->pos0, s->L) / rows));
    for (int l = 0; l < s->L; l++) {
        json_object *e = json_object_new_object();
        put(e, "layer", json_object_new_int(l));
        put(e, "quiet_median", jnum(s->quiet_med[l] / s->rows[l]));
        put(e, "quiet_q25", jnum(s->quiet_q25[l] / s->rows[l]));
        if (arm_has_phantom(arm)) put(e, "phantom", jnum(s->phantom[l] / s->rows[l]));
        if (arm_has_sink_token(arm)) put(e, "sink_token", jnum(s->pos0[l] / s->rows[l]));
        json_object_array_add(layers, e);
    }
    put(o, "layers", layers);
    return write_json(r, "exposure", o, err, errlen);
}

/* Token bytes as JSON text (a GPT-2 token may be part of a character). */
static json_object *token_text(const Tokenizer *t, uint32_t id) {
    size_t n;
    const uint8_t *p = t ? tok_token_bytes(t, id, &n) : NULL;
    if (!p) return json_object_new_null();
    char *out = malloc(4 * n + 1);
    if (!out) abort();
    json_object *o = json_object_new_string_len(out, (int)utf8_escape_invalid(p, n, out));
    free(out);
    return o;
}

typedef struct {
    double mean;
    uint32_t id;
} TokMean;

static int cmp_tok(const void *a, const void *b) {
    const TokMean *x = a, *y = b;
    if (x->mean != y->mean) return (x->mean > y->mean) - (x->mean < y->mean);
    return (x->id > y->id) - (x->id < y->id);
}

static json_object *token_list(const AnRun *r, const TokMean *v, int n, int from_top) {
    json_object *a = json_object_new_array();
    const int k = n < r->o->top_tokens ? n : r->o->top_tokens;
    for (int i = 0; i < k; i++) {
        const TokMean *t = &v[from_top ? n - 1 - i : i];
        json_object *e = json_object_new_object();
        put(e, "id", json_object_new_int((int)t->id));
        put(e, "text", token_text(r->tok, t->id));
        put(e, "mean_gate", jnum(t->mean));
        put(e, "count", json_object_new_int64((int64_t)llround(r->stats.tok_n[t->id] / ((double)r->stats.L * r->stats.H))));
        json_object_array_add(a, e);
    }
    return a;
}

static int write_telemetry(const AnRun *r, char *err, size_t errlen) {
    const AnStats *s = &r->stats;
    const Arm *arm = r->m.arm;
    const int gated = arm->filter != FILTER_NONE;
    const double rows = sum_of(s->rows, s->L), grows = sum_of(s->gate_rows, s->L);
    json_object *o = new_file("telemetry"), *layers = json_object_new_array();
    if (arm_has_phantom(arm)) put(o, "phantom_mass", jnum(sum_of(s->phantom, s->L) / rows));
    put(o, "pos0_mass", jnum(sum_of(s->pos0, s->L) / rows));
    put(o, "pos0_norm_ratio", jnum(pos0_ratio(s, -1)));
    double ks = 0;
    for (int l = 0; l < s->L; l++) ks += kurtosis_layer(s, l);
    put(o, "value_excess_kurtosis", jnum(ks / s->L));
    if (gated) {
        const double gm = sum_of(s->gate_mean, s->L) / grows, gm2 = sum_of(s->gate_mean2, s->L) / grows;
        put(o, "gate_mean", jnum(gm));
        put(o, "gate_within_row_sd", jnum(sum_of(s->gate_sd, s->L) / grows));
        put(o, "gate_between_row_sd", jnum(sqrt(fmax(gm2 - gm * gm, 0))));
    }
    for (int l = 0; l < s->L; l++) {
        json_object *e = json_object_new_object();
        put(e, "layer", json_object_new_int(l));
        if (arm_has_phantom(arm)) put(e, "phantom_mass", jnum(s->phantom[l] / s->rows[l]));
        put(e, "pos0_mass", jnum(s->pos0[l] / s->rows[l]));
        put(e, "pos0_norm_ratio", jnum(pos0_ratio(s, l)));
        put(e, "value_excess_kurtosis", jnum(kurtosis_layer(s, l)));
        if (gated && s->gate_rows[l] > 0) {
            const double gm = s->gate_mean[l] / s->gate_rows[l];
            put(e, "gate_mean", jnum(gm));
            put(e, "gate_within_row_sd", jnum(s->gate_sd[l] / s->gate_rows[l]));
            put(e, "gate_between_row_sd", jnum(sqrt(fmax(s->gate_mean2[l] / s->gate_rows[l] - gm * gm, 0))));
        }
        json_object_array_add(layers, e);
    }
    put(o, "layers", layers);
    if (gated && r->o->top_tokens > 0) {
        /* mean gate per token over its occurrences (all layers and heads) */
        TokMean *v = malloc(sizeof *v * (size_t)s->V);
        if (!v) abort();
        int n = 0;
        for (int t = 0; t < s->V; t++)
            if (s->tok_n[t] >= (double)r->o->min_count * s->L * s->H)
                v[n++] = (TokMean){s->tok_gate[t] / s->tok_n[t], (uint32_t)t};
        qsort(v, (size_t)n, sizeof *v, cmp_tok);
        json_object *tk = json_object_new_object();
        put(tk, "min_count", json_object_new_int64(r->o->min_count));
        put(tk, "ranked", json_object_new_int(n));
        put(tk, "vocab", r->tok ? json_object_new_string(r->vocab_path) : json_object_new_null());
        put(tk, "most_attenuated", token_list(r, v, n, 0));
        put(tk, "least_attenuated", token_list(r, v, n, 1));
        put(o, "tokens", tk);
        free(v);
    }
    return write_json(r, "telemetry", o, err, errlen);
}

/* ---- incidence (Table 12) --------------------------------------------------- */

/* Head-level incidence values (analysis_stats.c): NaN where the head's
 * reads past the sink received no mass (or no content). */
static double inc_sink(const AnStats *s, long lh, int p) {
    (void)p; /* one value per head, in the shape inc_mean takes */
    return s->inc_sink[lh] / s->inc_rows[lh];
}
static double inc_blind(const AnStats *s, long lh, int p) {
    return s->inc_mass[lh] > 0 ? s->inc_qmass[lh * s->npct + p] / s->inc_mass[lh] / (s->pct[p] / 100) : NAN;
}
static double inc_content(const AnStats *s, long lh, int p) {
    return s->inc_content[lh] > 0 ? s->inc_qcontent[lh * s->npct + p] / s->inc_content[lh] : NAN;
}

/* Mean over the heads of layers [l0, l1) of f (the heads where it is defined). */
static double inc_mean(const AnStats *s, int l0, int l1, double (*f)(const AnStats *, long, int), int p) {
    double sum = 0;
    int n = 0;
    for (long lh = (long)l0 * s->H; lh < (long)l1 * s->H; lh++) {
        const double x = f(s, lh, p);
        if (isfinite(x)) sum += x, n++;
    }
    return n ? sum / n : NAN;
}

/* The Table 12 values of heads [l0, l1) into o: sink mass (mean over heads;
 * the heads all have the same rows), then per percentile the blind-mass
 * ratio and the content share (means over heads). */
static void inc_values(const AnStats *s, int l0, int l1, json_object *o) {
    char key[64];
    put(o, "sink_mass", jnum(inc_mean(s, l0, l1, inc_sink, 0)));
    for (int p = 0; p < s->npct; p++) {
        snprintf(key, sizeof key, "blind_mass_ratio_q%g", s->pct[p]);
        put(o, key, jnum(inc_mean(s, l0, l1, inc_blind, p)));
    }
    for (int p = 0; p < s->npct; p++) {
        snprintf(key, sizeof key, "content_share_q%g", s->pct[p]);
        put(o, key, jnum(inc_mean(s, l0, l1, inc_content, p)));
    }
}

static int write_incidence(const AnRun *r, char *err, size_t errlen) {
    const AnStats *s = &r->stats;
    const Arm *arm = r->m.arm;
    const double rows = sum_of(s->rows, s->L);
    json_object *o = new_file("incidence"), *layers = json_object_new_array();
    json_object *setup = setup_json(r), *pct = json_object_new_array();
    put(setup, "sink_positions", json_object_new_int(s->sink_pos));
    for (int p = 0; p < s->npct; p++) json_object_array_add(pct, json_object_new_double(s->pct[p]));
    put(setup, "percentiles", pct);
    put(o, "setup", setup);
    inc_values(s, 0, s->L, o);
    put(o, "r0_ratio", jnum(pos0_ratio(s, -1)));
    if (arm_has_phantom(arm)) put(o, "phantom_mass", jnum(sum_of(s->phantom, s->L) / rows));
    for (int l = 0; l < s->L; l++) {
        json_object *e = json_object_new_object(), *heads = json_object_new_array();
        put(e, "layer", json_object_new_int(l));
        inc_values(s, l, l + 1, e);
        put(e, "r0_ratio", jnum(pos0_ratio(s, l)));
        for (int h = 0; h < s->H; h++) {
            const long lh = (long)l * s->H + h;
            json_object *hd = json_object_new_object(), *bl = json_object_new_array(), *ct = json_object_new_array();
            put(hd, "head", json_object_new_int(h));
            put(hd, "sink_mass", jnum(inc_sink(s, lh, 0)));
            put(hd, "r0_ratio", jnum(s->rmed[lh] > 0 ? s->r0[lh] / s->rmed[lh] : NAN));
            for (int p = 0; p < s->npct; p++) {
                json_object_array_add(bl, jnum(inc_blind(s, lh, p)));
                json_object_array_add(ct, jnum(inc_content(s, lh, p)));
            }
            put(hd, "blind_mass_ratio", bl);
            put(hd, "content_share", ct);
            json_object_array_add(heads, hd);
        }
        put(e, "heads", heads);
        json_object_array_add(layers, e);
    }
    put(o, "layers", layers);
    return write_json(r, "incidence", o, err, errlen);
}

int an_write_all(AnRun *r, char *err, size_t errlen) {
    if ((r->what & AN_DO_INJECTION) && write_injection(r, err, errlen)) return -1;
    if ((r->what & AN_DO_PROBES) && write_probes(r, err, errlen)) return -1;
    if ((r->what & AN_DO_EXPOSURE) && write_exposure(r, err, errlen)) return -1;
    if ((r->what & AN_DO_TELEMETRY) && write_telemetry(r, err, errlen)) return -1;
    if ((r->what & AN_DO_INCIDENCE) && write_incidence(r, err, errlen)) return -1;
    return 0;
}

int an_load_vocab(AnRun *r, char *err, size_t errlen) {
    char verr[2400];
    const int rc = run_vocab_load(r->data_dir, r->o->vocab, r->cfg.vocab_size, r->cfg.vocab_sha256, &r->tok, r->vocab_path,
                                  sizeof r->vocab_path, verr, sizeof verr);
    if (rc < 0 && r->o->vocab) {
        snprintf(err, errlen, "%.2000s", verr);
        return -1;
    }
    if (rc && !r->o->quiet) fprintf(stderr, "analyze: %s; telemetry lists token ids only\n", verr);
    return 0;
}

void an_print_summary(const AnRun *r, FILE *f) {
    const AnalysisOpts *o = r->o;
    fprintf(f, "%s (%s, step %ld): clean validation loss %.4f on %d x %d x %d tokens, %.1f s\n", o->src,
            r->m.arm->name, r->step, mean_loss(r, &r->cond[0]), o->batches, o->batch_size, r->m.T, r->seconds);
    if (r->what & AN_DO_INJECTION) {
        fprintf(f, "\ninjection: loss increase over the clean model (nats)\n%-28s", "junk (cutoff)");
        for (int k = 0; k < o->ndoses; k++) fprintf(f, " %9s%-5g", "eps=", o->doses[k]);
        fprintf(f, "\n");
        for (int j = 0; j < JUNK_KINDS; j++)
            for (int c = 0; c < CUT_KINDS; c++) {
                if (!find(r, OVR_NONE, j, c, o->doses[0]) || !(r->junk_mask >> j & 1) || !(o->cut_mask >> c & 1))
                    continue;
                char lab[64];
                snprintf(lab, sizeof lab, "%s (%s)", junk_name(j), cutoff_name(c));
                fprintf(f, "%-28s", lab);
                for (int k = 0; k < o->ndoses; k++) {
                    double inc, se;
                    increase(r, find(r, OVR_NONE, j, c, o->doses[k]), &inc, &se);
                    fprintf(f, " %+14.4f", inc);
                }
                fprintf(f, "\n");
            }
    }
    if (r->what & AN_DO_PROBES) {
        fprintf(f, "\nprobes: validation loss (eps 0 | %s %s eps %g)\n", junk_name(o->probe_junk),
                cutoff_name(o->probe_cut), o->probe_dose);
        for (int v = 0; v < OVR_KINDS; v++) {
            const AnCond *c0 = find(r, v, -1, 0, 0), *c1 = find(r, v, o->probe_junk, o->probe_cut, o->probe_dose);
            fprintf(f, "  %-10s %.4f", override_name(v), c0 ? mean_loss(r, c0) : NAN);
            if (c1 && o->probe_dose > 0) fprintf(f, " | %.4f", mean_loss(r, c1));
            fprintf(f, "\n");
        }
    }
    const AnStats *s = &r->stats;
    if (r->what & AN_DO_EXPOSURE) {
        const double rows = sum_of(s->rows, s->L);
        fprintf(f, "\nexposure: quiet (median) %.3f, quiet (q25) %.3f", sum_of(s->quiet_med, s->L) / rows,
                sum_of(s->quiet_q25, s->L) / rows);
        if (arm_has_phantom(r->m.arm)) fprintf(f, ", phantom %.3f", sum_of(s->phantom, s->L) / rows);
        fprintf(f, "\n");
    }
    if (r->what & AN_DO_TELEMETRY) {
        const double rows = sum_of(s->rows, s->L);
        fprintf(f, "telemetry: position-0 mass %.3f, position-0 norm ratio %.2f", sum_of(s->pos0, s->L) / rows,
                pos0_ratio(s, -1));
        if (r->m.arm->filter != FILTER_NONE) {
            const double gr = sum_of(s->gate_rows, s->L);
            fprintf(f, ", gate mean %.3f, within-row SD %.3f", sum_of(s->gate_mean, s->L) / gr,
                    sum_of(s->gate_sd, s->L) / gr);
        }
        fprintf(f, "\n");
    }
    if (r->what & AN_DO_INCIDENCE) {
        fprintf(f, "incidence: sink mass %.3f, position-0 norm ratio %.2f", inc_mean(s, 0, s->L, inc_sink, 0),
                pos0_ratio(s, -1));
        for (int p = 0; p < s->npct; p++)
            fprintf(f, "%s %g %.2f", p ? "," : "; blind-mass ratio at", s->pct[p], inc_mean(s, 0, s->L, inc_blind, p));
        for (int p = 0; p < s->npct; p++)
            fprintf(f, "%s %g %.3f", p ? "," : "; content share at", s->pct[p], inc_mean(s, 0, s->L, inc_content, p));
        fprintf(f, "\n");
    }
    fprintf(f, "\nwrote %s/\n", r->out_dir);
    if (r->nonfinite)
        fprintf(f, "warning: %d batch losses were not finite (written as null)\n", r->nonfinite);
}

void an_run_free(AnRun *r) {
    for (int i = 0; i < r->ncond; i++) free(r->cond[i].loss);
    free(r->cond);
    an_stats_free(&r->stats);
    if (r->tok) tok_free(r->tok);
    if (r->data_ok) shardset_close(&r->data);
    if (r->model_ok) model_free(&r->m);
    memset(r, 0, sizeof *r);
}
