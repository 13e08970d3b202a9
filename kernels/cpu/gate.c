/* Per-read gates (paper Section 3.3, Eqs. 3 and 4).  For the head-h slice v
 * of the value row at (b,t):
 *   norm gate:        z = beta (||v|| / sqrt(d) - tau_h)
 *   projection gate:  z = w_h . v + b_h
 *   g = sigmoid(z)
 * Value slot:   vg = g v                     (what a KV cache would store)
 * Routing slot: logbias = log g = -softplus(-z), the same signal added to the
 *               logits instead (Lemma 3.1: the value slot is this plus the
 *               per-query factor Z_i).
 *
 * Backward, with dz/dv = beta v / (sqrt(d) ||v||) (norm; 0 at v = 0) or w_h:
 *   value slot:   a = dvg . v,  dz = a g (1 - g),  dv = g dvg + dz dz/dv
 *   routing slot: dz = dlogbias (1 - g),          dv += dz dz/dv
 *   dtau_h += -beta dz,  dw_h += dz v,  db_h += dz
 * 1 - g is recomputed as sigmoid(-z) rather than subtracted from the saved g,
 * so it stays accurate when the gate is nearly open (g -> 1 in float).
 *
 * The parameter gradients sum over (b,t).  Each (b,h) slice sums its own
 * rows into a double partial, and the partials are added over b in a fixed
 * order afterwards: the result is the same for every thread count. */
#include "attention_tile.h"
#include "ops.h"

/* below this many value elements the ops run on the calling thread */
#define GATE_PAR_MIN 32768

static inline real sigmoid(real z) {
    if (z >= 0) return 1 / (1 + AEXP(-z));
    const real e = AEXP(z);
    return e / (1 + e);
}

/* log sigmoid(z) = -softplus(-z) = min(z, 0) - log1p(exp(-|z|)) */
static inline real log_sigmoid(real z) {
#ifdef SG_DOUBLE
    return (z < 0 ? z : 0) - log1p(exp(-fabs(z)));
#else
    return (z < 0 ? z : 0) - log1pf(expf(-fabsf(z)));
#endif
}

/* z of one read; *nrm gets ||v|| (norm gate only). */
static inline real gate_z(const real *v, int d, int h, const GateParams *p, real *nrm) {
    real acc = 0;
    if (p->kind == GATE_NORM) {
#pragma omp simd reduction(+ : acc)
        for (int e = 0; e < d; e++) acc += v[e] * v[e];
        *nrm = ASQRT(acc);
        return p->beta * (*nrm / ASQRT((real)d) - p->tau[h]);
    }
    const real *w = p->w + (long)h * d;
#pragma omp simd reduction(+ : acc)
    for (int e = 0; e < d; e++) acc += w[e] * v[e];
    *nrm = 0;
    return acc + p->b[h];
}

void op_gate_fwd(real *g, real *vg, real *logbias, const real *v, int v_stride, const GateParams *p,
                 int B, int T, int H, int d) {
    const long HD = (long)H * d;
#pragma omp parallel for schedule(static) if ((long)B * T * H * d >= GATE_PAR_MIN)
    for (long bt = 0; bt < (long)B * T; bt++) {
        const long b = bt / T, t = bt % T;
        for (int h = 0; h < H; h++) {
            const real *vr = v + bt * v_stride + (long)h * d;
            const long gi = (b * H + h) * T + t;
            real nrm, gv = 1, lg = 0;
            if (p->kind != GATE_NONE) {
                const real z = gate_z(vr, d, h, p, &nrm);
                gv = sigmoid(z);
                lg = log_sigmoid(z);
            }
            g[gi] = gv;
            if (p->slot == SLOT_ROUTING) {
                logbias[gi] = lg;
            } else {
                real *o = vg + bt * HD + (long)h * d;
#pragma omp simd
                for (int e = 0; e < d; e++) o[e] = gv * vr[e];
            }
        }
    }
}

void op_gate_bwd(real *dv, int dv_stride, real *dtau, real *dw, real *db, const real *dvg,
                 const real *dlogbias, const real *v, int v_stride, const real *g,
                 const GateParams *p, int B, int T, int H, int d) {
    const long HD = (long)H * d;
    const int route = p->slot == SLOT_ROUTING;
    if (p->kind == GATE_NONE) { /* g = 1: the value slot passes dvg through */
        if (route) return;
#pragma omp parallel for schedule(static) if ((long)B * T * H * d >= GATE_PAR_MIN)
        for (long bt = 0; bt < (long)B * T; bt++)
            memcpy(dv + bt * dv_stride, dvg + bt * HD, sizeof(real) * HD);
        return;
    }
    /* per (b,h): [0] dtau or db, [1..d] dw */
    const int np = d + 1;
    double *part = att_alloc(sizeof(double) * (size_t)B * H * np, 1);
    const real rsd = 1 / ASQRT((real)d);
#pragma omp parallel for schedule(static) if ((long)B * T * H * d >= GATE_PAR_MIN)
    for (int bh = 0; bh < B * H; bh++) {
        const int b = bh / H, h = bh % H;
        double *pp = part + (long)bh * np;
        const real *wh = p->kind == GATE_PROJ ? p->w + (long)h * d : NULL;
        for (int t = 0; t < T; t++) {
            const long row = (long)b * T + t, gi = (long)bh * T + t;
            const real *vr = v + row * v_stride + (long)h * d;
            real *dr = dv + row * dv_stride + (long)h * d;
            real nrm;
            const real z = gate_z(vr, d, h, p, &nrm);
            const real gv = g[gi], omg = sigmoid(-z); /* omg = 1 - g */
            real dz;
            if (route) {
                dz = dlogbias[gi] * omg;
            } else {
                const real *dgr = dvg + row * HD + (long)h * d;
                real a = 0;
#pragma omp simd reduction(+ : a)
                for (int e = 0; e < d; e++) a += dgr[e] * vr[e];
                dz = a * gv * omg;
#pragma omp simd
                for (int e = 0; e < d; e++) dr[e] = gv * dgr[e];
            }
            if (p->kind == GATE_NORM) {
                if (nrm > 0) {
                    const real f = dz * p->beta * rsd / nrm;
#pragma omp simd
                    for (int e = 0; e < d; e++) dr[e] += f * vr[e];
                }
                pp[0] -= (double)p->beta * dz;
            } else {
#pragma omp simd
                for (int e = 0; e < d; e++) dr[e] += dz * wh[e];
                pp[0] += dz;
                for (int e = 0; e < d; e++) pp[1 + e] += (double)dz * vr[e];
            }
        }
    }
    for (int h = 0; h < H; h++) {
        double s0 = 0;
        for (int b = 0; b < B; b++) s0 += part[((long)b * H + h) * np];
        if (p->kind == GATE_NORM) {
            dtau[h] += (real)s0;
        } else {
            db[h] += (real)s0;
            for (int e = 0; e < d; e++) {
                double s = 0;
                for (int b = 0; b < B; b++) s += part[((long)b * H + h) * np + 1 + e];
                dw[(long)h * d + e] += (real)s;
            }
        }
    }
    free(part);
}
