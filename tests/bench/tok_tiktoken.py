#!/usr/bin/env python3
"""tiktoken's throughput on the corpus bench_tok measures (tests/bench/bench_tok.c).

  tok_tiktoken.py [--vocab FILE] [--reps N] [--threads 1,2,...] [--json FILE] INPUT...

The same documents as bench_tok: every file of INPUT (directories
recursively, names starting with '.' skipped, paths in byte order) is one
document; empty files are skipped.  tiktoken's "gpt2" encoding (r50k_base's
pattern and merges) is built offline from the same vocabulary file.

Untimed: reading the files and decoding them to str (tiktoken takes str),
and one warm-up pass, which also makes CPython cache each str's UTF-8 form
that tiktoken's Rust core reads (so timed passes do not pay that
conversion either: like bench_tok, text is in memory in the form the
encoder takes).  Timed:
  docs   encode_ordinary(doc) for each document on the calling thread;
  batch  encode_ordinary_batch(docs, num_threads=T): tiktoken's own
         thread pool over whole documents, for each T of --threads
         (default as bench_tok: 1..nproc, above 8 CPUs the powers of two
         and nproc).
The docs figure includes building tiktoken's Python lists of ints; that is
a few percent of its time (measured: the Rust core writing into a buffer
instead is 3-8% faster on data/text/demo and data/text/mixed).
Runs are interleaved round by round; the table gives the best and the
median of --reps.  MB = 10^6 bytes of UTF-8 input.  Every run's token count
is checked against the warm-up pass, which also prints the SHA-256 of the
ids (little-endian uint32, in order) to compare with bench_tok's.
"""
import argparse
import array
import hashlib
import json
import os
import statistics
import sys
import time

import tiktoken
from tiktoken.load import load_tiktoken_bpe

R50K_PAT = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s"""


def expand(paths):
    """Regular files under PATHS in bench_tok's (textsrc_expand's) order."""
    out = []

    def add(p, depth):
        if os.path.isdir(p):
            names = sorted((n for n in os.listdir(p) if not n.startswith(".")), key=os.fsencode)
            for n in names:
                add(p + ("" if p.endswith("/") else "/") + n, depth + 1)
        elif os.path.isfile(p):
            out.append(p)
        elif depth == 0:
            sys.exit(f"tok_tiktoken: {p}: not a regular file or directory")

    for p in paths:
        if not os.path.exists(p):
            sys.exit(f"tok_tiktoken: {p}: no such file or directory")
        add(p, 0)
    return out


def thread_list(arg):
    if arg:
        ts = [int(x) for x in arg.split(",")]
        if min(ts) < 1:
            sys.exit("tok_tiktoken: --threads: each count must be >= 1")
        return ts
    n = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return [t for t in range(1, n + 1) if n <= 8 or t & (t - 1) == 0 or t == n]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("inputs", nargs="+")
    ap.add_argument("--vocab", default="data/vocab/gpt2.tiktoken")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--threads", default="")
    ap.add_argument("--json")
    a = ap.parse_args()
    threads = thread_list(a.threads)
    ncpu = thread_list("")[-1]

    enc = tiktoken.Encoding("gpt2", pat_str=R50K_PAT, mergeable_ranks=load_tiktoken_bpe(a.vocab),
                            special_tokens={"<|endoftext|>": 50256}, explicit_n_vocab=50257)
    files = expand(a.inputs)
    docs, nbytes = [], 0
    for p in files:
        b = open(p, "rb").read()
        if not b:
            continue
        try:
            docs.append(b.decode("utf-8"))
        except UnicodeDecodeError as e:
            sys.exit(f"tok_tiktoken: {p}: not UTF-8 ({e}): tiktoken encodes str, so it cannot "
                     "take the same bytes as sgtok; leave the file out of the corpus")
        nbytes += len(b)
    if not docs:
        sys.exit("tok_tiktoken: every input file is empty")

    # Warm-up and reference: count and digest of the token stream.
    t0 = time.perf_counter()
    ref = [enc.encode_ordinary(d) for d in docs]
    wu = time.perf_counter() - t0
    h = hashlib.sha256()
    for t in ref:
        x = array.array("I", t)
        assert x.itemsize == 4
        if sys.byteorder == "big":
            x.byteswap()
        h.update(x.tobytes())
    tokens = sum(len(t) for t in ref)
    digest = h.hexdigest()
    del ref
    enc.encode_ordinary_batch(docs, num_threads=threads[-1])  # the pool's threads' regexes

    print(f"tok_tiktoken: tiktoken {tiktoken.__version__}, {len(docs)} documents ({len(files)} files), "
          f"{nbytes / 1e6:.2f} MB, {a.reps} rep(s), {ncpu} CPU(s)")
    print(f"tokens {tokens}  bytes/token {nbytes / tokens:.3f}  sha256(ids) {digest}  "
          f"(warm-up {wu:.2f} s)", flush=True)

    cfgs = [("docs", 1)] + [("batch", t) for t in threads]
    secs = {c: [] for c in cfgs}
    bad = False
    for _ in range(a.reps):
        for mode, nt in cfgs:
            if mode == "docs":
                n = 0
                t0 = time.perf_counter()
                for d in docs:
                    n += len(enc.encode_ordinary(d))
                el = time.perf_counter() - t0
            else:
                t0 = time.perf_counter()
                r = enc.encode_ordinary_batch(docs, num_threads=nt)
                el = time.perf_counter() - t0
                n = sum(len(t) for t in r)
                del r
            if n != tokens:
                print(f"tok_tiktoken: MISMATCH: {mode} on {nt} thread(s) gave {n} tokens, "
                      f"expected {tokens}", file=sys.stderr)
                bad = True
            secs[(mode, nt)].append(el)

    mb = nbytes / 1e6
    base = None
    runs = []
    print(f"{'mode':<6} {'threads':>7} {'best MB/s':>10} {'med MB/s':>10} {'Mtok/s':>10} "
          f"{'scaling':>9} {'runs':>6}")
    for mode, nt in cfgs:
        s = secs[(mode, nt)]
        b, m = min(s), statistics.median(s)
        if mode == "batch" and nt == 1:
            base = mb / b
        eff = mb / b / (base * nt) if mode == "batch" and base else None
        print(f"{mode:<6} {nt:>7} {mb / b:>10.2f} {mb / m:>10.2f} {tokens / 1e6 / b:>10.3f} "
              f"{f'{100 * eff:.0f}%' if eff else '':>9} {len(s):>6}")
        r = {"mode": mode, "threads": nt, "best_mb_s": mb / b, "median_mb_s": mb / m,
             "best_mtok_s": tokens / 1e6 / b, "seconds": s}
        if eff:
            r["scaling_efficiency"] = eff
        runs.append(r)
    if bad:
        print("MISMATCH: some runs gave another token count (see stderr)")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"impl": "tiktoken", "version": tiktoken.__version__, "cpus": ncpu,
                       "files": len(files), "documents": len(docs), "bytes": nbytes,
                       "tokens": tokens, "bytes_per_token": nbytes / tokens, "sha256_ids": digest,
                       "reps": a.reps, "consistent": not bad, "runs": runs}, f, indent=2)
            f.write("\n")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
