#!/usr/bin/env python3
"""Picks the fastest of tests/gpu/device.sh's A/B runs, so that the
benchmarks that follow run under it.

usage: ab_choose.py TIER LABEL=FILE [LABEL=FILE ...]
(FILE is what follows the last '=': a LABEL such as "SG_ATTN=mma" holds '='
itself, and an empty LABEL is the defaults)

Each FILE is the output of one `bench_gpu --tiers TIER --arms baseline,combo2`
run under the settings LABEL names.  A run counts only if both arms have a
row for TIER and neither row failed.  Its score is the two arms' tokens/s
added, so that neither arm's speed is traded away for the other's.  Prints
the best run's LABEL on stdout and a table of every run on stderr; exits 1
(printing nothing on stdout) when no run counts."""
import sys

ARMS = ("baseline", "combo2")


def rows(path, tier):
    """{arm: tokens/s} of the run's rows for tier that did not fail"""
    out = {}
    try:
        lines = open(path, errors="replace").read().splitlines()
    except OSError as e:
        print("ab_choose: %s: %s" % (path, e.strerror), file=sys.stderr)
        return out
    for line in lines:
        f = line.split()
        # tier arm B T ms/step (min median) tokens/s ...: bench_gpu's table
        if len(f) < 8 or f[0] != tier or f[1] not in ARMS or "FAILED" in line or "error:" in line:
            continue
        try:
            out[f[1]] = float(f[7])
        except ValueError:
            continue
    return out


def main(argv):
    if len(argv) < 3 or any("=" not in a for a in argv[2:]):
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    tier, best, best_score = argv[1], None, 0.0
    for arg in argv[2:]:
        label, path = arg.rsplit("=", 1)  # a label holds "=" itself (VAR=value)
        r = rows(path, tier)
        ok = all(a in r for a in ARMS)
        score = sum(r.values()) if ok else 0.0
        print("%-60s %s" % (label or "(defaults)",
                            "baseline %.0f + combo2 %.0f = %.0f tokens/s" % (r["baseline"], r["combo2"], score)
                            if ok else "no result for both arms"), file=sys.stderr)
        if ok and score > best_score:
            best, best_score = label, score
    if best is None:
        return 1
    print(best)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
