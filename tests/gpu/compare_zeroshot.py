#!/usr/bin/env python3
"""Compare two `sgtrain zeroshot` output directories (CPU reference, CUDA):
lambada.json, hellaswag.json and wikitext.json, whichever the CPU's has.
Standard library only.

Tolerance: every NLL (per passage, per ending, WikiText-2's total) within
2% relative: the CUDA matmuls read bf16 operands and its logits are bf16,
as autocast's.  The counts (examples, truncated, tokens, words, bytes,
windows) and per-example lines, token counts, distances, labels and
lengths must be equal: they come from the data and the tokenizer alone.
The greedy flags and the predictions are not compared: a near-tie in a
random test model may flip under bf16.  A NaN, an infinity or a missing
value on the GPU's side fails.  Prints "zeroshot within tolerance (N
NLLs)" or one line per difference; exit 1 on any.

usage: compare_zeroshot.py CPU_DIR GPU_DIR
"""
import json
import math
import os
import sys

COUNTS = ("examples", "truncated", "tokens", "words", "bytes", "windows")
FIELDS = ("line", "context_tokens", "target_tokens", "distance", "label", "chars")


def close(v, w):
    return isinstance(w, (int, float)) and math.isfinite(w) and abs(v - w) <= 0.02 * abs(v)


def main():
    a, b = sys.argv[1], sys.argv[2]
    bad, n = [], 0
    tasks = [t for t in ("lambada", "hellaswag", "wikitext") if os.path.exists(os.path.join(a, t + ".json"))]
    if not tasks:
        bad.append(f"{a}: no zero-shot files")
    for task in tasks:
        x = json.load(open(os.path.join(a, task + ".json")))
        try:
            y = json.load(open(os.path.join(b, task + ".json")))
        except (OSError, ValueError) as e:
            bad.append(f"{task}: the GPU's file: {e}")
            continue
        for k in COUNTS:
            if x.get(k) != y.get(k):
                bad.append(f"{task} {k}: cpu {x.get(k)} gpu {y.get(k)}")
        if task == "wikitext":
            n += 1
            if not close(x["nll"], y.get("nll")):
                bad.append(f"wikitext nll: cpu {x['nll']} gpu {y.get('nll')}")
        rx, ry = x.get("results", []), y.get("results", [])
        if len(rx) != len(ry):
            bad.append(f"{task}: cpu {len(rx)} results, gpu {len(ry)}")
        for r, s in zip(rx, ry):
            for k in FIELDS:
                if r.get(k) != s.get(k):
                    bad.append(f"{task} line {r['line']} {k}: cpu {r.get(k)} gpu {s.get(k)}")
            u, v = r["nll"], s.get("nll")
            if not isinstance(u, list):
                u, v = [u], [v]
            if not isinstance(v, list) or len(v) != len(u):
                bad.append(f"{task} line {r['line']} nll: cpu {r['nll']} gpu {s.get('nll')}")
                continue
            for p, q in zip(u, v):
                n += 1
                if not close(p, q):
                    bad.append(f"{task} line {r['line']} nll: cpu {p} gpu {q}")
    print("\n".join(bad) if bad else f"zeroshot within tolerance ({n} NLLs)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
