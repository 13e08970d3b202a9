#!/usr/bin/env python3
"""Write GPT-2's vocabulary as a Hugging Face tokenizer.json, from gpt2.tiktoken,
so that tools/hf_tokenize.py can be checked against sgtok offline on the real
vocabulary (tests/e2e_hf_tokenize.sh).

The file has the layout of the `gpt2` tokenizer.json on the Hugging Face hub:
a BPE model whose vocab spells each token's bytes with GPT-2's byte-to-unicode
map, ids = tiktoken ranks, "<|endoftext|>" = 50256 (also an added, special
token); the ByteLevel pre-tokenizer (add_prefix_space false, GPT-2's regex),
post-processor and decoder; no normalizer.

The merges are derived from the ranks: the merge that makes token r is found
by merging the token's own bytes with ranks < r only, which must end in
exactly two parts, the pair that was joined (tests/tok/make_gpt2_files.py).
Merges are listed in the order of the tokens they make, so a merge's priority
is its token's rank, as in tiktoken.  Nothing here needs the tokenizers package.

--neox lays the same tokens out as GPT-NeoX/Pythia's tokenizer.json does (a
stand-in for it offline, not its vocabulary): "<|endoftext|>" 0 and
"<|padding|>" 1 (special), GPT-2's tokens at rank + 2, runs of 2 and 3 spaces
as added tokens that are not special (NEOX_SPACES), and an NFC normalizer.

usage: make_hf_gpt2_tokenizer.py [--neox] GPT2.TIKTOKEN OUT_TOKENIZER_JSON
"""
import base64
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_gpt2_files import byte_to_unicode, merge_parts  # noqa: E402

EOT = "<|endoftext|>"
NEOX_SPACES = ["  ", "   "]  # ids 50258, 50259 in the --neox layout


def added(i, content, special, normalized):
    return {"id": i, "content": content, "single_word": False, "lstrip": False, "rstrip": False,
            "normalized": normalized, "special": special}


def main():
    argv = sys.argv[1:]
    neox = "--neox" in argv
    argv = [a for a in argv if a != "--neox"]
    if len(argv) != 2:
        sys.exit(__doc__.strip().rsplit("\n", 1)[-1])
    src, out = argv
    ranks = {}
    with open(src, "rb") as f:
        for line in f:
            b64, r = line.split()
            ranks[base64.b64decode(b64)] = int(r)
    spell = byte_to_unicode()
    s = lambda bs: "".join(spell[b] for b in bs)  # noqa: E731
    vocab, merges = {}, []
    for tok, r in sorted(ranks.items(), key=lambda kv: kv[1]):
        vocab[s(tok)] = r
        if len(tok) > 1:
            parts = merge_parts(tok, ranks, r)
            if len(parts) != 2:
                sys.exit(f"{src}: rank {r} ({tok!r}) is not the merge of two earlier tokens: {parts!r}")
            merges.append(f"{s(parts[0])} {s(parts[1])}")
    eot = len(ranks)
    if sorted(vocab.values()) != list(range(eot)):
        sys.exit(f"{src}: the ranks are not 0..{eot - 1}, each once")
    if neox:
        vocab = {EOT: 0, "<|padding|>": 1, **{t: r + 2 for t, r in vocab.items()}}
        tokens = [added(0, EOT, True, False), added(1, "<|padding|>", True, False)]
        tokens += [added(eot + 2 + k, sp, False, True) for k, sp in enumerate(NEOX_SPACES)]
    else:
        vocab[EOT] = eot
        tokens = [added(eot, EOT, True, True)]
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    tj = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": tokens,
        "normalizer": {"type": "NFC"} if neox else None,
        "pre_tokenizer": byte_level,
        "post_processor": byte_level,
        "decoder": byte_level,
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                  "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False,
                  "ignore_merges": False, "vocab": vocab, "merges": merges},
    }
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out, "w", encoding="utf-8") as f:
        json.dump(tj, f, ensure_ascii=False)


if __name__ == "__main__":
    main()
