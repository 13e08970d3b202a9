"""Independent NumPy (float64) reference for `sgtrain zeroshot`.

    python tests/zeroshot/ref_zeroshot.py RUN_DIR MODEL.safetensors VOCAB.tiktoken [--analysis DIR]

Reads {lambada,hellaswag,wikitext}.json from --analysis DIR (default
RUN_DIR/analysis; whichever exist, at least one), recomputes every number
of them from the specification (docs/zeroshot.md) with tiktoken (GPT-2's
encoding, built from VOCAB) and the NumPy model of
tests/analysis/ref_analysis.py, and compares.  The data are the file the
JSON's "file" names (a relative path is taken from the current directory,
as the C program was given it), whose file_sha256 is checked too; a
file written with `--limit N` (setup.limit) has the first N examples.
Every sequence is run on its own, without padding, so agreement also shows
that the C program's batches, padded at the end, change nothing.  Prints
one line per failed comparison and ends with `ref_zeroshot: N passed, M
failed`; exit status 0 iff M == 0, 2 for bad arguments or no file there.

Readings of the specification where it leaves a choice: a LAMBADA
passage's context_tokens counts the whole context, before truncation; a
HellaSwag example counts once in truncated however many of its endings
were cut; a WikiText window, like a LAMBADA sequence, is up to T + 1
tokens (T the model's context), so a window's last token is given T tokens
(the harness's rolling windows); white space (stripped from HellaSwag text,
separating WikiText's words) is Unicode white space, as Python's str.strip
and str.split and the harness's `\\s`; a blank line is one of white space
only; lines are numbered from 1, blank lines included.

Tolerances.  The C program computes the logits in float32 and sums the
NLLs in double, this file in float64 from the same float32 parameters, so
the two differ by rounding alone: by measurement on the test models (every
arm, block_size 16, the 50,257-token vocabulary; the fixtures and
batch sizes 1 to 16, strides 1 to 16) at most 1.2e-7 in a LAMBADA NLL of
11-22 nats, 2.3e-6 in a HellaSwag ending's NLL of up to 140 nats, 1.1e-5
in WikiText's NLL of 2,700 nats, and 5e-8 relative in a perplexity or bits
per byte.  An NLL is compared with |got - want| <= 1e-4 + 1e-5 |want|,
a perplexity or bits per byte with a relative 1e-5: ten times the largest
gap and more, with room for longer contexts, yet a slip in what a token is
given moves far more (truncating LAMBADA's sequences to T tokens instead
of T + 1 moves the truncated passages' NLLs by 1.3e-2 to 0.29; WikiText
windows of T tokens instead of T + 1 move its NLL by 0.74).  Integers
(lines, token, word, byte and character counts, windows, distances,
labels) are compared exactly.  A discrete outcome decided by comparing
floats (a LAMBADA greedy flag, a HellaSwag pred or pred_norm) is compared
only where this reference's margin exceeds 1e-3, ten times the NLL
tolerance: every target logit more than 1e-3 above the best other logit
(or one more than 1e-3 below it), the best score more than 1e-3 below the
second best.  Nearer ties, which the nearly untrained test models do have
among 50,257 logits, could go either way in float32; they are counted as
skipped (on stderr).  The accuracies are recomputed from the C program's
own per-example flags, so that their arithmetic is checked exactly (1e-12)
whatever was skipped.
"""

import hashlib
import json
import math
import os
import re
import sys
import time

import numpy as np
import tiktoken
import tiktoken.load

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "analysis"))
import ref_analysis  # noqa: E402  (the NumPy model, shared with `sgtrain analyze`'s reference)

TASKS = ("lambada", "hellaswag", "wikitext")
EOT = 50256
GPT2_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
NLL_ATOL, NLL_RTOL = 1e-4, 1e-5
PPL_RTOL = 1e-5
SHARE_ATOL = 1e-12
MARGIN = 1e-3
BUCKETS = ("absent", "<=32", "33-96", ">96")


# --------------------------------------------------------------------------
# Tokenizer, model, data.
# --------------------------------------------------------------------------
def load_encoding(path):
    """tiktoken's `gpt2` encoding, built from the vocabulary file (no network)."""
    return tiktoken.Encoding(name="gpt2", pat_str=GPT2_PATTERN,
                             mergeable_ranks=tiktoken.load.load_tiktoken_bpe(path),
                             special_tokens={"<|endoftext|>": EOT})


def read_metadata(path):
    """The safetensors header's __metadata__ (without reading the tensors)."""
    with open(path, "rb") as f:
        (hlen,) = np.frombuffer(f.read(8), dtype="<u8")
        return json.loads(f.read(int(hlen)).decode("utf-8")).get("__metadata__", {})


class Scorer:
    """The model with its context T (block_size) and the tokenizer."""

    def __init__(self, model_path, vocab_path):
        self.model_path = model_path
        self.meta = read_metadata(model_path)
        self.T = int(ref_analysis.parse_config(self.meta["config"])["block_size"])
        self.m = ref_analysis.Model(model_path)
        self.enc = load_encoding(vocab_path)

    def tokens(self, text):
        return self.enc.encode_ordinary(text)

    def score(self, seq, k):
        """(NLL [k], greedy [k], margin [k]) of the last k tokens of seq (at
        most T + 1 tokens), each given the tokens before it.  greedy: the
        token is the first index of the largest logit; margin: its logit
        minus the largest other logit (< 0 where it is not the greedy one)."""
        assert len(seq) <= self.T + 1 and 0 < k < len(seq), (len(seq), k)
        logits = ref_analysis.forward(self.m, np.array([seq[:-1]], dtype=np.int64))[0, -k:]
        tgt = np.array(seq[-k:])
        rows = np.arange(k)
        mx = logits.max(-1)
        lse = mx + np.log(np.exp(logits - mx[:, None]).sum(-1))
        picked = logits[rows, tgt]
        others = logits.copy()
        others[rows, tgt] = -np.inf
        return lse - picked, logits.argmax(-1) == tgt, picked - others.max(-1)


def read_jsonl(path, n=None):
    """[(1-based line number, object)] of the first n non-blank lines; lines
    are split at "\\n" (as a C reader does, not at Python's other newlines)."""
    rows = []
    with open(path, "rb") as f:
        for no, raw in enumerate(f.read().split(b"\n"), 1):
            if n is not None and len(rows) == n:
                break
            line = raw.decode("utf-8")
            if line.strip():
                rows.append((no, json.loads(line)))
    return rows


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def mean(xs):
    return sum(xs) / len(xs)


# --------------------------------------------------------------------------
# LAMBADA.
# --------------------------------------------------------------------------
def last_occurrence(ctx, patterns):
    """The latest start of a run of ctx equal to one of the patterns, or None."""
    starts = [s for p in patterns for s in range(len(ctx) - len(p) + 1) if ctx[s:s + len(p)] == p]
    return max(starts, default=None)


def bucket(distance):
    if distance is None:
        return "absent"
    return "<=32" if distance <= 32 else "33-96" if distance <= 96 else ">96"


def lambada(sc, path, n):
    """(the document's numbers, per passage whether the greedy flag is
    decided by more than MARGIN)."""
    results, decided, truncated = [], [], 0
    for line, obj in read_jsonl(path, n):
        text = obj["text"]
        i = text.rfind(" ")
        if i <= 0 or i == len(text) - 1:   # no context (nothing to score from) or no word
            raise SystemExit(f"{path}:{line}: no space, nothing before the last one, or ends "
                             "in one (the C program must reject it)")
        context, word = text[:i], text[i + 1:]
        ctx, cont = sc.tokens(context), sc.tokens(" " + word)
        seq = ctx + cont
        truncated += len(seq) > sc.T + 1
        nll, greedy, margin = sc.score(seq[-(sc.T + 1):], len(cont))
        # the distance is measured on the whole passage, before truncation
        start = last_occurrence(ctx, (cont, sc.tokens(word)))
        results.append({"line": line, "context_tokens": len(ctx), "target_tokens": len(cont),
                        "nll": float(nll.sum()), "greedy": bool(greedy.all()),
                        "distance": None if start is None else len(ctx) - start})
        decided.append(bool((margin > MARGIN).all() or (margin < -MARGIN).any()))
    doc = {"examples": len(results), "truncated": truncated,
           "accuracy": mean([r["greedy"] for r in results]),
           "perplexity": math.exp(mean([r["nll"] for r in results])),
           "by_distance": by_distance([r["greedy"] for r in results],
                                      [r["distance"] for r in results]),
           "results": results}
    return doc, decided


def by_distance(flags, distances):
    """The buckets of the distances (this reference's), each with the accuracy
    of the greedy flags (the checked program's, when comparing)."""
    out = []
    for name in BUCKETS:
        hits = [f for f, d in zip(flags, distances) if bucket(d) == name]
        out.append({"bucket": name, "n": len(hits), "accuracy": mean(hits) if hits else None})
    return out


def check_lambada(ck, doc, ref, decided):
    got = doc.get("results", [])
    for r, w, dec in zip(got, ref["results"], decided):
        p = f"lambada.results[line {w['line']}]."
        for k in ("line", "context_tokens", "target_tokens", "distance"):
            ck.equal(p + k, r.get(k), w[k])
        ck.close(p + "nll", r.get("nll"), w["nll"], NLL_ATOL, NLL_RTOL)
        if dec:
            ck.equal(p + "greedy", r.get("greedy"), w["greedy"])
        else:
            ck.skipped += 1
    ck.equal("lambada.truncated", doc.get("truncated"), ref["truncated"])
    ck.close("lambada.perplexity", doc.get("perplexity"), ref["perplexity"], 0, PPL_RTOL)
    if len(got) != len(ref["results"]):
        return
    # the accuracies of the program's own greedy flags, in the reference's buckets
    flags = [r.get("greedy") is True for r in got]
    ck.close("lambada.accuracy", doc.get("accuracy"), mean(flags), SHARE_ATOL, 0)
    want = by_distance(flags, [w["distance"] for w in ref["results"]])
    bd = doc.get("by_distance")
    if not isinstance(bd, list) or len(bd) != len(want):
        ck.fail("lambada.by_distance", bd, want)
        return
    for b, w in zip(bd, want):
        p = f"lambada.by_distance[{w['bucket']}]."
        ck.equal(p + "bucket", b.get("bucket"), w["bucket"])
        ck.equal(p + "n", b.get("n"), w["n"])
        if w["accuracy"] is None:
            ck.equal(p + "accuracy", b.get("accuracy"), None)
        else:
            ck.close(p + "accuracy", b.get("accuracy"), w["accuracy"], SHARE_ATOL, 0)


# --------------------------------------------------------------------------
# HellaSwag (lm-evaluation-harness's `hellaswag`, zero-shot).
# --------------------------------------------------------------------------
def capitalize(s):
    """ASCII letters only: upper-case the first character, lower-case the
    rest; other characters are kept (str.capitalize would also map é, ß...)."""
    def lower(c):
        return chr(ord(c) + 32) if "A" <= c <= "Z" else c
    first = chr(ord(s[0]) - 32) if s and "a" <= s[0] <= "z" else s[:1]
    return first + "".join(lower(c) for c in s[1:])


def preprocess(text):
    """The harness's, as the spec gives it: strip; " [title]" -> ". "; each
    "[" up to the next "]" on its line deleted (an unclosed "[" stays);
    each "  " -> " " left to right."""
    text = text.strip().replace(" [title]", ". ")
    return re.sub("\\[.*?\\]", "", text).replace("  ", " ")


def argmin_gap(scores):
    """(first index of the least score, gap to the second least)."""
    order = sorted(range(len(scores)), key=lambda i: (scores[i], i))
    return order[0], scores[order[1]] - scores[order[0]]


def hellaswag(sc, path, n):
    """(the document's numbers, per example (pred decided, pred_norm decided))."""
    results, decided, truncated = [], [], 0
    for line, obj in read_jsonl(path, n):
        query = sc.tokens(preprocess(obj["activity_label"] + ": " + obj["ctx_a"] + " "
                                     + capitalize(obj["ctx_b"])))
        choices = [preprocess(e) for e in obj["endings"]]
        nlls, cut = [], False
        for c in choices:
            cont = sc.tokens(" " + c)
            seq = query + cont
            cut |= len(seq) > sc.T + 1
            nlls.append(float(sc.score(seq[-(sc.T + 1):], len(cont))[0].sum()))
        truncated += cut   # an example counts once, however many endings were cut
        chars = [len(c) for c in choices]
        pred, gap = argmin_gap(nlls)
        pred_norm, gap_norm = argmin_gap([x / c if c else math.inf for x, c in zip(nlls, chars)])
        results.append({"line": line, "label": int(obj["label"]), "nll": nlls, "chars": chars,
                        "pred": pred, "pred_norm": pred_norm})
        decided.append((gap > MARGIN, gap_norm > MARGIN))
    doc = {"examples": len(results), "truncated": truncated,
           "accuracy": mean([r["pred"] == r["label"] for r in results]),
           "accuracy_norm": mean([r["pred_norm"] == r["label"] for r in results]),
           "results": results}
    return doc, decided


def check_hellaswag(ck, doc, ref, decided):
    got = doc.get("results", [])
    for r, w, dec in zip(got, ref["results"], decided):
        p = f"hellaswag.results[line {w['line']}]."
        for k in ("line", "label", "chars"):
            ck.equal(p + k, r.get(k), w[k])
        nll = r.get("nll")
        if not isinstance(nll, list) or len(nll) != 4:
            ck.fail(p + "nll", nll, w["nll"])
        else:
            for i in range(4):
                ck.close(f"{p}nll[{i}]", nll[i], w["nll"][i], NLL_ATOL, NLL_RTOL)
        for k, dk in zip(("pred", "pred_norm"), dec):
            if dk:
                ck.equal(p + k, r.get(k), w[k])
            else:
                ck.skipped += 1
    ck.equal("hellaswag.truncated", doc.get("truncated"), ref["truncated"])
    if len(got) != len(ref["results"]):
        return
    # the accuracies of the program's own predictions against the labels
    for k, pk in (("accuracy", "pred"), ("accuracy_norm", "pred_norm")):
        want = mean([r.get(pk) == w["label"] for r, w in zip(got, ref["results"])])
        ck.close("hellaswag." + k, doc.get(k), want, SHARE_ATOL, 0)


# --------------------------------------------------------------------------
# WikiText-2 (lm-evaluation-harness's rolling log-likelihood).
# --------------------------------------------------------------------------
def windows(n, T, S):
    """The scored ranges [a, b) of the n file tokens: [0, T), then S at a time."""
    a, b = 0, min(T, n)
    out = [(a, b)]
    while b < n:
        a, b = b, min(b + S, n)
        out.append((a, b))
    return out


def wikitext(sc, path, stride):
    if not 1 <= stride <= sc.T:
        raise SystemExit(f"stride {stride}: not in 1..{sc.T} (the C program must reject it)")
    with open(path, "rb") as f:
        data = f.read()
    text = data.decode("utf-8")
    toks = [EOT] + sc.tokens(text)   # toks[i + 1] is the file's token i
    n = len(toks) - 1
    wins = windows(n, sc.T, stride)
    # window [a, b): file tokens a..b-1, given the up to T tokens before b
    nll = sum(float(sc.score(toks[max(0, b - sc.T):b + 1], b - a)[0].sum()) for a, b in wins)
    words = len(text.split())   # white-space-separated pieces (Unicode white space, as re's \s)
    return {"tokens": n, "words": words, "bytes": len(data), "stride": stride,
            "windows": len(wins), "nll": nll,
            "token_perplexity": math.exp(nll / n), "word_perplexity": math.exp(nll / words),
            "bits_per_byte": nll / (math.log(2) * len(data))}


def check_wikitext(ck, doc, ref, _decided):
    for k in ("tokens", "words", "bytes", "stride", "windows"):
        ck.equal("wikitext." + k, doc.get(k), ref[k])
    ck.close("wikitext.nll", doc.get("nll"), ref["nll"], NLL_ATOL, NLL_RTOL)
    for k in ("token_perplexity", "word_perplexity", "bits_per_byte"):
        ck.close("wikitext." + k, doc.get(k), ref[k], 0, PPL_RTOL)


# --------------------------------------------------------------------------
# Comparing and writing.
# --------------------------------------------------------------------------
class Checker(ref_analysis.Checker):
    """ref_analysis's pass/fail tally and FAIL lines, plus the comparisons
    skipped for a near tie."""

    def __init__(self):
        super().__init__()
        self.skipped = 0


def compute(sc, task, path, stride=None, limit=None):
    """This reference's numbers for a task: WikiText with the stride
    (default half the context), the others' first `limit` examples (all
    where None)."""
    if task == "wikitext":
        return wikitext(sc, path, sc.T // 2 if stride is None else stride), None
    return (lambada if task == "lambada" else hellaswag)(sc, path, limit)


def check_file(ck, sc, task, doc):
    path = doc.get("file")
    if not isinstance(path, str) or not os.path.isfile(path):
        ck.fail(f"{task}.file", path, "the data file's path")
        return
    ck.equal(f"{task}.kind", doc.get("kind"), task)
    ck.equal(f"{task}.version", doc.get("version"), 1)
    ck.equal(f"{task}.setup.arm", (doc.get("setup") or {}).get("arm"), sc.m.arm)
    ck.equal(f"{task}.file_sha256", doc.get("file_sha256"), sha256(path))
    ref, decided = compute(sc, task, path, doc.get("stride"), (doc.get("setup") or {}).get("limit"))
    if task != "wikitext":
        ck.equal(f"{task}.examples", doc.get("examples"), ref["examples"])
        ck.equal(f"{task}.results (count)", len(doc.get("results", [])), len(ref["results"]))
    {"lambada": check_lambada, "hellaswag": check_hellaswag,
     "wikitext": check_wikitext}[task](ck, doc, ref, decided)


def usage():
    print(__doc__.strip().splitlines()[2], file=sys.stderr)
    return 2


def main(argv):
    args, opts = [], {}
    it = iter(argv[1:])
    for a in it:
        if a == "--analysis":
            opts[a] = next(it, None)
            if opts[a] is None:
                return usage()
        else:
            args.append(a)
    if len(args) != 3:
        return usage()
    run_dir, model_path, vocab_path = args
    adir = opts.get("--analysis", os.path.join(run_dir, "analysis"))
    found = [t for t in TASKS if os.path.exists(os.path.join(adir, t + ".json"))]
    if not found:
        print(f"ref_zeroshot: none of {', '.join(t + '.json' for t in TASKS)} in {adir}",
              file=sys.stderr)
        return 2
    t0 = time.time()
    sc = Scorer(model_path, vocab_path)
    ck = Checker()
    for task in found:
        with open(os.path.join(adir, task + ".json")) as f:
            check_file(ck, sc, task, json.load(f))
    sys.stdout.flush()
    print(f"# {sc.m.arm}: {', '.join(found)}; {ck.skipped} near-tie comparisons skipped; "
          f"{time.time() - t0:.2f} s", file=sys.stderr)
    print(f"ref_zeroshot: {ck.passed} passed, {ck.failed} failed")
    return 0 if ck.failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
