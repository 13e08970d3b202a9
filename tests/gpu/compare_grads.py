#!/usr/bin/env python3
"""Compare two `sgtrain grads` files (CPU reference, CUDA): the loss and every
gradient tensor.  Standard library only (the GPU machine may lack numpy).

Tolerance per element: |gpu - cpu| <= atol + rtol |cpu| with rtol 3e-2 and
atol 3e-2 x the tensor's largest |cpu| value: the CUDA matmuls read bf16
operands (8 significant bits), the CPU's are fp32.  The loss: 1e-2 relative.
A NaN or an infinity on either side fails (every test is written as "not
within", which NaN cannot pass).
Prints one line per tensor; exit 1 on any failure.

usage: compare_grads.py CPU.safetensors GPU.safetensors LABEL
"""
import array
import json
import math
import struct
import sys


def load(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    head = json.loads(b[8:8 + n])
    meta = head.pop("__metadata__", {})
    out = {}
    for name, t in head.items():
        assert t["dtype"] == "F32", f"{path}: {name} is {t['dtype']}"
        s, e = t["data_offsets"]
        a = array.array("f")
        a.frombytes(b[8 + n + s:8 + n + e])
        out[name] = a
    return meta, out


def main():
    cpu_meta, cpu = load(sys.argv[1])
    gpu_meta, gpu = load(sys.argv[2])
    label = sys.argv[3]
    bad = 0
    lc, lg = float(cpu_meta["loss"]), float(gpu_meta["loss"])
    ok = math.isfinite(lg) and abs(lc - lg) <= 1e-2 * abs(lc)
    bad += not ok
    print(f"{label}: loss cpu {lc:.6f} gpu {lg:.6f} {'ok' if ok else 'FAIL'}")
    for name in cpu:
        c, g = cpu[name], gpu.get(name)
        if g is None or len(g) != len(c):
            print(f"{label}: {name}: missing or wrong size on the GPU  FAIL")
            bad += 1
            continue
        scale = max((abs(x) for x in c), default=0.0)
        atol, rtol = 3e-2 * scale + 1e-7, 3e-2
        worst, wi = 0.0, 0
        for i, (x, y) in enumerate(zip(c, g)):
            e = abs(y - x) / (atol + rtol * abs(x))
            if not math.isfinite(e):
                worst, wi = math.inf, i
                break
            if e > worst:
                worst, wi = e, i
        good = worst <= 1
        bad += not good
        if not good or "--verbose" in sys.argv:
            print(f"{label}: {name}: worst {worst:.2f} of tolerance at {wi} (cpu {c[wi]:.6g} gpu {g[wi]:.6g}) "
                  f"{'ok' if good else 'FAIL'}")
    print(f"{label}: {len(cpu)} gradient tensors, {'all within tolerance' if not bad else f'{bad} FAILED'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
