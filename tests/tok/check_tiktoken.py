#!/usr/bin/env python3
"""sgtok against tiktoken, token for token.

tiktoken loads the same gpt2.tiktoken offline with r50k_base's pattern (what
tiktoken's "gpt2" encoding is).  Documents:
  * every file of the given corpus directories that is valid UTF-8 (real
    text: man pages in Japanese, Chinese and Russian, emoji data with names
    in many languages, English reST and dictionary text);
  * every Unicode scalar value (all planes, surrogates excluded) in contexts
    that expose its pre-tokenizer class: after a space, between letters,
    after a digit, after an apostrophe, next to whitespace;
  * random strings drawn from the pattern's hard cases: contractions in both
    cases, whitespace runs of every White_Space character (and U+180E and
    U+200B, which are not), digits of several scripts, combining marks,
    emoji with ZWJ and skin tones, CRLF, "<|endoftext|>" as plain text.
Prints "tiktoken: N passed, N failed" (one check per document) and the first
mismatches with their context.

usage: check_tiktoken.py SGTOK VOCAB [--min-mb 5] CORPUS_DIR...
"""
import json
import os
import random
import subprocess
import sys
import tempfile

import tiktoken
from tiktoken.load import load_tiktoken_bpe

R50K_PAT = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s"""
GPT2_SHA = "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930"


def encoding(vocab):
    ranks = load_tiktoken_bpe(vocab, expected_hash=GPT2_SHA)
    return tiktoken.Encoding("gpt2", pat_str=R50K_PAT, mergeable_ranks=ranks,
                             special_tokens={"<|endoftext|>": 50256}, explicit_n_vocab=50257)


def corpus_docs(dirs):
    for d in dirs:
        for root, subdirs, files in os.walk(d):
            subdirs.sort()
            for f in sorted(files):
                p = os.path.join(root, f)
                try:
                    yield p, open(p, encoding="utf-8", errors="strict").read()
                except UnicodeDecodeError:
                    pass


def codepoint_docs():
    cps = [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    for i in range(0, len(cps), 2048):
        parts = []
        for c in cps[i:i + 2048]:
            ch = chr(c)
            parts.append(f" {ch}a{ch}{ch}1{ch}'s{ch} \u00a0{ch}\n")
        yield f"U+{cps[i]:04X}..", "".join(parts)


WS = ["\t", "\n", "\x0b", "\x0c", "\r", " ", "\x85", "\xa0", "\u1680", "\u2000", "\u2005",
      "\u200a", "\u2028", "\u2029", "\u202f", "\u205f", "\u3000", "\u180e", "\u200b", "\r\n"]
ATOMS = (["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'RE", "'LL", "'x", "'",
          "don't", "I'M", "we've", "<|endoftext|>", "<|", "|>", "0", "7", "123", "2024",
          "\u0663\u0664", "\uff11\uff12", "\u00bd", "\u2167", "\u0301", "e\u0301", "\u200d",
          "\U0001F600", "\U0001F44D\U0001F3FD", "\U0001F468\u200d\U0001F469\u200d\U0001F467",
          "\U0001F1EF\U0001F1F5", "\u2764\ufe0f", "\u65e5\u672c\u8a9e", "\u0416\u0437",
          "\u0627\u0644\u0639", "\u05e9\u05dc\u05d5\u05dd", "\u0939\u093f\u0928\u094d\u0926\u0940",
          "\uac00\ub098", "\u0e44\u0e17\u0e22", "Hello", "world", "the", " the", "THE", "a",
          "...", "!!", "?", "--", "->", "$", "%", "(", ")", "\"", "`", "~", "_", "__init__",
          "\ufeff", "\U00010000", "\U0010fffd", "\ue000"] + WS * 3)


def random_docs(n, seed=1):
    rng = random.Random(seed)
    for i in range(n):
        k = rng.randint(1, 80)
        s = []
        for _ in range(k):
            a = rng.choice(ATOMS)
            if rng.random() < 0.15:
                a = a * rng.randint(2, 40)
            s.append(a)
        yield f"random-{i}", "".join(s)


def main():
    args = sys.argv[1:]
    min_mb = 5.0
    if "--min-mb" in args:
        j = args.index("--min-mb")
        min_mb = float(args[j + 1])
        del args[j:j + 2]
    sgtok, vocab, dirs = args[0], args[1], args[2:]
    enc = encoding(vocab)
    docs = list(corpus_docs(dirs))
    real_bytes = sum(len(t.encode()) for _, t in docs)
    nonascii = sum(1 for _, t in docs if any(ord(c) > 127 for c in t))
    docs += list(codepoint_docs()) + list(random_docs(3000))
    docs = [(n, t) for n, t in docs if t]  # sgtok skips empty documents
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False, encoding="utf-8") as f:
        for name, text in docs:
            f.write(json.dumps({"text": text}, ensure_ascii=False) + "\n")
        path = f.name
    try:
        out = subprocess.run([sgtok, "encode", "--vocab", vocab, "--format", "jsonl", path],
                             check=True, stdout=subprocess.PIPE).stdout.decode().split("\n")
    finally:
        os.unlink(path)
    passed = failed = 0
    total_bytes = 0
    for i, (name, text) in enumerate(docs):
        want = enc.encode_ordinary(text)
        total_bytes += len(text.encode())
        got = [int(x) for x in out[i].split()] if i < len(out) and out[i] else []
        if got == want:
            passed += 1
            continue
        failed += 1
        if failed <= 5:
            k = next((j for j in range(min(len(got), len(want))) if got[j] != want[j]),
                     min(len(got), len(want)))
            ctx = enc.decode_bytes(want[max(0, k - 3):k + 3])
            print(f"MISMATCH {name}: token {k}: sgtok {got[k:k + 4]} tiktoken {want[k:k + 4]}"
                  f" near {ctx!r}")
    print(f"{len(docs)} documents, {total_bytes / 1e6:.1f} MB; real text {real_bytes / 1e6:.1f} MB"
          f" in {len(docs) - 3000 - 544} files ({nonascii} with non-ASCII)")
    if real_bytes < min_mb * 1e6:
        print(f"FAIL: only {real_bytes / 1e6:.1f} MB of real text, the check wants {min_mb} MB")
        failed += 1
    print(f"tiktoken: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
