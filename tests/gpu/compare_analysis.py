#!/usr/bin/env python3
"""Compare two `sgtrain analyze` output directories (CPU reference, CUDA):
every JSON file of the CPU's, key by key.  Standard library only.

Tolerance: losses (keys with "loss", and each result's val_loss) within 2%
relative: the CUDA matmuls read bf16 operands; the explicit attention and
the corruption are fp32 on both.  Every other float (exposure, telemetry,
incidence) within 0.02 absolute, but incidence's blind-mass ratio at
percentile Q within 0.02 / (Q / 100): it is a share of mass divided by Q/100,
and a read whose norm bf16 moves across the band's cut moves the share by
its mass (with few reads a band holds one or two).  A NaN, an infinity or a missing value on the GPU's
side fails.  Prints "analysis within tolerance" or one line per
difference; exit 1 on any.

usage: compare_analysis.py CPU_DIR GPU_DIR
"""
import json
import math
import os
import re
import sys


def close(v, w, tol):
    """w within tol of v; False for NaN, infinities and non-numbers"""
    return isinstance(w, (int, float)) and math.isfinite(w) and abs(v - w) <= tol


def tolerance(key, v):
    if "loss" in key:
        return 0.02 * abs(v)
    m = re.fullmatch(r"blind_mass_ratio_q([0-9.]+)", key)
    return 0.02 / (float(m.group(1)) / 100) if m else 0.02


def main():
    a, b = sys.argv[1], sys.argv[2]
    bad = []
    files = sorted(f for f in os.listdir(a) if f.endswith(".json"))
    if not files:
        bad.append(f"{a}: no analysis files")
    for f in files:
        x, y = json.load(open(os.path.join(a, f))), json.load(open(os.path.join(b, f)))
        for k, v in x.items():
            if isinstance(v, float) and not close(v, y.get(k), tolerance(k, v)):
                bad.append(f"{f} {k}: cpu {v} gpu {y[k]}")
        for r, s in zip(x.get("results", []), y.get("results", [])):
            if not close(r["val_loss"], s.get("val_loss"), 0.02 * abs(r["val_loss"])):
                bad.append(f"{f} {r}: gpu {s['val_loss']}")
    print("\n".join(bad) if bad else f"analysis within tolerance ({len(files)} files)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
