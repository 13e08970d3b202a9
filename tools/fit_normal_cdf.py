#!/usr/bin/env python3
"""Fits the two polynomials of kernels/cpu/vnormal.h and prints them as C
(needs NumPy and mpmath; not run by the build: the printed block is pasted
into the header).

  small |u| (u = x / sqrt 2, u^2 <= 1):  erf(u) / u = P(2 u^2 - 1)
  larger |u|:  erfc(|u|) exp(u^2) = v H((v - V_LO) / (V_HI - V_LO)),
               v = 1 / (1 + |u| / 2),  |u| in [0.5, 9.5]

The variable v maps the tail, where erfc(a) exp(a^2) ~ 1 / (a sqrt pi), onto
a short interval on which H is smooth and positive; the mapping to [0, 1]
(rather than [-1, 1]) keeps Horner's terms from cancelling.

Each fit is weighted least squares on Chebyshev nodes, reweighted toward
the minimax error (Lawson's iteration), in relative error.  The
coefficients are then rounded to float one at a time, lowest first, the
rest refit after each rounding, so that the rounding of one is absorbed by
the others.  References come from mpmath at 40 digits."""
import math
import sys

import mpmath
import numpy as np

mpmath.mp.dps = 40
V_LO, V_HI = 1 / (1 + 0.5 * 9.5), 1 / (1 + 0.5 * 0.5)


def fit(f, lo, hi, deg, mid, inv_half, nodes=6000):
    k = np.arange(nodes)
    xs = (lo + hi) / 2 + (hi - lo) / 2 * np.cos(np.pi * (k + 0.5) / nodes)
    ys = np.array([f(x) for x in xs])
    A = np.vander((xs - mid) * inv_half, deg + 1, increasing=True)
    w0 = 1 / np.abs(ys)
    coef, resid = [], ys.copy()
    for j in range(deg + 1):
        B, w = A[:, j:], w0.copy()
        for _ in range(40):
            c = np.linalg.lstsq(B * w[:, None], resid * w, rcond=None)[0]
            r = np.abs(B @ c - resid) * w0
            w = w * np.sqrt(r / r.max()) + 1e-14
        coef.append(float(np.float32(c[0])))
        resid = resid - coef[-1] * A[:, j]
    return coef, float(np.max(np.abs(resid) * w0))


def erf_over_u(z):  # erf(sqrt z) / sqrt z on z = u^2 in [0, 1]
    if z == 0:
        return 2 / math.sqrt(math.pi)
    r = mpmath.sqrt(z)
    return float(mpmath.erf(r) / r)


def h_of_v(v):
    a = (mpmath.mpf(1) / v - 1) * 2
    return float(mpmath.erfc(a) * mpmath.exp(a * a) / v)


def c_float(x):
    return repr(float(np.float32(x))) + "f"


def main():
    p, ep = fit(erf_over_u, 0.0, 1.0, 7, 0.5, 2.0)
    lo, inv = float(np.float32(V_LO)), float(np.float32(1 / (V_HI - V_LO)))
    h, eh = fit(h_of_v, V_LO, V_HI, 10, lo, inv)
    print("/* tools/fit_normal_cdf.py: fit errors (float coefficients, exact")
    print(" * arithmetic) %.2g and %.2g relative */" % (ep, eh))
    print("#define VN_V_LO %s" % c_float(lo))
    print("#define VN_V_INV %s" % c_float(inv))
    for name, c in (("VN_P", p), ("VN_H", h)):
        print("static const float %s[%d] = {%s};" % (name, len(c), ", ".join(c_float(x) for x in c)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
