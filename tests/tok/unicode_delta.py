#!/usr/bin/env python3
"""Letters and numbers tiktoken's regex engine knows that PCRE2 10.42 does not.

Debian 12's PCRE2 (10.42) has Unicode 14.0 tables; the Rust regex engine
inside tiktoken has newer ones.  A character assigned since is \\p{L} or \\p{N}
to tiktoken and "other" to PCRE2, which changes the pieces (e.g. "X's" cuts
after X only if X is a letter).  This prints, as PCRE2 class ranges, every
scalar value that tiktoken treats as a letter or number (probe: the
contraction "'s" after it is one token) but Unicode 14.0 does not, split into
letters and numbers by unicodedata2's categories; src/tok_encode.c holds the
result (TOK_L_EXTRA, TOK_N_EXTRA).  Needs tiktoken and unicodedata2.

usage: unicode_delta.py VOCAB(gpt2.tiktoken)
"""
import sys
import unicodedata as u14

import unicodedata2 as unew

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from check_tiktoken import encoding  # noqa: E402

WS = {9, 10, 11, 12, 13, 32, 0x85, 0xA0, 0x1680, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000,
      *range(0x2000, 0x200B)}


def ranges(cs):
    out = []
    for c in cs:
        if out and out[-1][1] == c - 1:
            out[-1][1] = c
        else:
            out.append([c, c])
    return "".join(f"\\\\x{{{a:X}}}" + (f"-\\\\x{{{b:X}}}" if b > a else "") for a, b in out)


def main():
    enc = encoding(sys.argv[1])
    assert u14.unidata_version == "14.0.0", "run with a Python whose unicodedata is 14.0 (3.11)"
    add = {"L": [], "N": []}
    for c in range(0x110000):
        if 0xD800 <= c <= 0xDFFF or c in WS:
            continue
        tk = 338 in enc.encode_ordinary(chr(c) + "'s")
        old = u14.category(chr(c))[0] in "LN"
        if tk and not old:
            add[unew.category(chr(c))[0]].append(c)
        assert not (old and not tk), f"U+{c:04X} is a letter/number in 14.0 but not to tiktoken"
    print(f"/* Unicode {unew.unidata_version} categories, tiktoken {enc.name} probe */")
    print(f'#define TOK_L_EXTRA "{ranges(add["L"])}"')
    print(f'#define TOK_N_EXTRA "{ranges(add["N"])}"')


if __name__ == "__main__":
    main()
