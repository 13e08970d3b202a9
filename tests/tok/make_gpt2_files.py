#!/usr/bin/env python3
"""Write GPT-2's vocabulary as OpenAI's original encoder.json + vocab.bpe,
from gpt2.tiktoken, so that sgtok's reader of that format is tested on the
real vocabulary offline.

encoder.json maps each token (bytes spelled with GPT-2's byte-to-unicode
map) to its id; vocab.bpe lists merges in rank order.  The merge that makes
token r is recovered by merging the token's own bytes with ranks < r only:
it must end in exactly two parts, the pair that was joined.

usage: make_gpt2_files.py GPT2.TIKTOKEN OUTDIR
"""
import base64
import json
import os
import sys


def byte_to_unicode():
    printable = [b for b in range(256) if 0x21 <= b <= 0x7E or 0xA1 <= b <= 0xAC or b >= 0xAE]
    m = {b: chr(b) for b in printable}
    n = 0
    for b in range(256):
        if b not in m:
            m[b] = chr(256 + n)
            n += 1
    return m


def merge_parts(tok, ranks, limit):
    parts = [tok[i:i + 1] for i in range(len(tok))]
    while True:
        best = None
        for i in range(len(parts) - 1):
            r = ranks.get(parts[i] + parts[i + 1])
            if r is not None and r < limit and (best is None or r < best[0]):
                best = (r, i)
        if best is None:
            return parts
        i = best[1]
        parts[i:i + 2] = [parts[i] + parts[i + 1]]


def main():
    src, out = sys.argv[1], sys.argv[2]
    ranks = {}
    for line in open(src, "rb"):
        b64, r = line.split()
        ranks[base64.b64decode(b64)] = int(r)
    spell = byte_to_unicode()
    s = lambda bs: "".join(spell[b] for b in bs)
    encoder = {s(t): r for t, r in ranks.items()}
    encoder["<|endoftext|>"] = len(ranks)
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "encoder.json"), "w", encoding="utf-8") as f:
        json.dump(encoder, f, ensure_ascii=False)
    by_rank = sorted(ranks.items(), key=lambda kv: kv[1])
    with open(os.path.join(out, "vocab.bpe"), "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n")
        for t, r in by_rank[256:]:
            a, b = merge_parts(t, ranks, r)
            f.write(f"{s(a)} {s(b)}\n")


if __name__ == "__main__":
    main()
