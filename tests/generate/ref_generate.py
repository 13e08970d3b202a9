"""Independent reference for `sgtrain generate` (docs/generate.md).

    python tests/generate/ref_generate.py [--bf16] [--atol A] [--tie E] MODEL.safetensors VOCAB.tiktoken GEN.json...

For each JSON file that `sgtrain generate --json` wrote, recomputes from
the specification, with no key-value cache:
  - the prompt's tokens: <|endoftext|>, then tiktoken's encoding of the
    prompt text (GPT-2's encoding, built from VOCAB);
  - every drawn token's log-probability under the model, from a whole
    forward pass of the NumPy model of tests/analysis/ref_analysis.py over
    the prompt and the sample's tokens so far (float64);
  - every drawn token itself, from those logits, the draw's uniform number
    rng_uniform(rng_key(seed, sample, i), 0) (src/rng.c) and the
    definition of temperature, top-k and top-p (src/next_token.h);
  - where each sample stopped (<|endoftext|> or the token limit) and its
    text (the tokens' bytes, invalid UTF-8 spelled \\xNN);
  - with --telemetry, each draw's query's attention on the first position
    and on the phantom, and its read's gate, per layer and head.
Prints one line per failed comparison and ends with
`ref_generate: N passed, M failed`; exit status 0 iff M == 0.

Tolerances: the C program computes in float32, this file in float64 from
the same parameters; log-probabilities are compared with 2e-5 absolute
(measured on the test models of tests/e2e_generate.sh: at most 3.1e-6).
Tokens are compared exactly, except where the draw lies within 1e-5 of a
decision's edge (u times the kept mass near a cumulative sum, the top-p
cut, two largest logits within 1e-5 when greedy): there float32's
rounding (about 1e-6 here) could cross the edge, and either side is
accepted.  The run prints how many draws were that near, and the nearest.
Every later draw is conditioned on the program's own tokens, so one
accepted near tie does not excuse anything after it.

Without tiktoken (a GPU machine may lack it) the prompt's tokens and the
texts go unchecked, with a note; everything else is checked.

A GPU build's products read bf16 operands (docs/cuda.md).  --bf16 makes
the reference do the same where it matters most: the weights of every
product and the LayerNorm and GELU outputs they multiply are rounded to
bf16 (round to nearest even) before the float64 arithmetic.  On the
emulated GPU's runs of tests/e2e_cuda_sgtrain_emu.sh that brings the
largest log-probability gap from 0.11 (a sampled token of logprob -4.7,
whose logit's rounding no larger logit cancels) to 0.036; --atol and
--tie then set bounds for the rest of bf16's rounding.
"""

import json
import math
import os
import sys

import numpy as np

try:
    import tiktoken
    import tiktoken.load
except ImportError:   # a GPU machine without it: the prompt's tokens and the texts go unchecked
    tiktoken = None

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "analysis"))
import ref_analysis  # noqa: E402  (the NumPy model)

EOT = 50256
GPT2_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
LOGPROB_ATOL = 2e-5
TIE = 1e-5


def load_encoding(path):
    if tiktoken is None:
        print("note: no tiktoken: the prompt's tokens and the texts are not checked")
        return None
    return tiktoken.Encoding(name="gpt2", pat_str=GPT2_PATTERN,
                             mergeable_ranks=tiktoken.load.load_tiktoken_bpe(path),
                             special_tokens={"<|endoftext|>": EOT})


def escape_invalid(b):
    """Bytes as text: well-formed UTF-8 as it is, any other byte \\xNN."""
    out, i = [], 0
    while i < len(b):
        for n in (1, 2, 3, 4):
            try:
                out.append(b[i:i + n].decode("utf-8"))
                i += n
                break
            except UnicodeDecodeError:
                continue
        else:
            out.append(f"\\x{b[i]:02x}")
            i += 1
    return "".join(out)


def draw(z, tau, top_k, top_p, u, ztol):
    """(token, allowed, margin): the definition of src/next_token.h in
    float64.  margin is how far the draw lies from a decision's edge, as a
    share of the mass: the nearest cumulative sum to u times the kept mass,
    or the top-p cut (greedy: the gap between the two largest logits).
    Rounding could cross an edge nearer than TIE, and could swap two
    candidates whose logits differ by less than ztol in the ranking (or
    across the top-k cut), so `allowed` holds the tokens on both sides of
    each such edge and both of each such pair whose span holds the draw."""
    V = len(z)
    if tau == 0:
        best = int(np.argmax(z))
        near = [int(i) for i in np.nonzero(z >= z[best] - ztol)[0]]
        gap = z[best] - np.max(np.delete(z, best))
        return best, set(near), float(gap)
    w = np.exp((z - z.max()) / tau)
    truncate = (0 < top_k < V) or top_p < 1
    idx = np.lexsort((np.arange(V), -w)) if truncate else np.arange(V)
    n = top_k if 0 < top_k < V else V
    cum = np.cumsum(w[idx[:n]])
    ns, margin = [n], math.inf
    if top_p < 1:
        keep = min(int(np.searchsorted(cum, top_p * cum[-1], side="left")) + 1, n)
        edge = abs(cum[keep - 1] - top_p * cum[-1]) / cum[-1]
        margin = edge
        ns = [keep] + ([keep + 1] if edge < TIE and keep < n else []) + ([keep - 1] if keep > 1 and
              abs(cum[keep - 2] - top_p * cum[-1]) / cum[-1] < TIE else [])
    token, allowed = None, set()
    for k, m in enumerate(ns):
        target = u * cum[m - 1]
        r = min(int(np.searchsorted(cum[:m], target, side="right")), m - 1)
        rel = np.abs(cum[:m] - target) / cum[m - 1]
        margin = min(margin, float(rel.min()))
        if k == 0:
            token = int(idx[r])
        allowed.add(int(idx[r]))
        for j in np.nonzero(rel < TIE)[0]:   # the edge between candidates j and j + 1
            allowed.update(int(idx[i]) for i in (j, j + 1) if i < m)
        if truncate:   # near-equal neighbours in the ranking, the drawn one among them
            for j in (r - 1, r):
                if 0 <= j and j + 1 < V and abs(z[idx[j]] - z[idx[j + 1]]) < ztol:
                    allowed.update((int(idx[j]), int(idx[j + 1])))
    return token, allowed, margin


def check_telemetry(ck, name, model, rec, tel, P, n, atol):
    """--telemetry: draw i's query is position P - 1 + i (after the sink's
    row in that arm); per layer and head its attention on the first key
    (after the phantom's column), on the phantom, and its read's gate."""
    want_fields = {"pos0"} | ({"phantom"} if model.phantom else set()) | ({"gate"} if model.gated else set())
    ck.equal(f"{name}: telemetry fields", sorted(tel), sorted(want_fields))
    first = 1 if model.phantom else 0
    for i in range(n):
        t = model.first + P - 1 + i
        for l, r in enumerate(rec):
            want = {"pos0": r["p"][0, :, t, first]}
            if model.phantom:
                want["phantom"] = r["p"][0, :, t, 0]
            if model.gated:
                want["gate"] = r["g"][0, :, t]
            for f, w in want.items():
                got = tel.get(f, [])
                for h in range(model.H):
                    g = got[i][l][h] if i < len(got) and l < len(got[i]) and h < len(got[i][l]) else None
                    ck.close(f"{name}: telemetry {f} draw {i} layer {l} head {h}", g, float(w[h]), atol, 0)


def bf16(a):
    """float64 -> float32 -> bf16 (round to nearest even), back as float64."""
    u = np.asarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16
    return r.astype(np.uint32).view(np.float32).astype(np.float64)


def round_products_bf16(model):
    """The products' operands in bf16, as a GPU build reads them."""
    for k in model.p:
        if k in ("wte", "lm_head.weight") or (k.endswith(".weight") and (".attn.c_" in k or ".mlp." in k)):
            model.p[k] = bf16(model.p[k])
    ln, gelu, gelu_tanh = ref_analysis.layer_norm, ref_analysis.gelu, ref_analysis.gelu_tanh
    ref_analysis.layer_norm = lambda x, w, b: bf16(ln(x, w, b))
    ref_analysis.gelu = lambda x: bf16(gelu(x))
    ref_analysis.gelu_tanh = lambda x: bf16(gelu_tanh(x))


def main():
    global TIE
    args, atol, products_bf16 = sys.argv[1:], LOGPROB_ATOL, False
    while args and args[0] in ("--atol", "--tie", "--bf16"):
        if args[0] == "--bf16":
            products_bf16, args = True, args[1:]
            continue
        if len(args) < 2:
            sys.exit(__doc__)
        if args[0] == "--atol":
            atol = float(args[1])
        else:
            TIE = float(args[1])
        args = args[2:]
    if len(args) < 3:
        sys.exit(__doc__)
    model = ref_analysis.Model(args[0])
    if products_bf16:
        round_products_bf16(model)
    enc = load_encoding(args[1])
    ck = ref_analysis.Checker()
    worst_margin, worst_gap, near_ties = math.inf, 0.0, 0
    for path in args[2:]:
        g = json.load(open(path))
        s = g["setup"]
        tau, top_k, top_p, seed = s["temperature"], s["top_k"], s["top_p"], s["seed"]
        prompt = g["prompt"]["tokens"]
        if enc:
            want_prompt = [EOT] + enc.encode_ordinary(g["prompt"]["text"])
            ck.equal(f"{path}: prompt tokens", prompt, want_prompt)
        for smp in g["samples"]:
            k = smp["index"]
            name = f"{path}: sample {k}"
            drawn = smp["tokens"] + ([EOT] if smp["stop"] == "eot" else [])
            ck.equal(f"{name}: one log-probability a drawn token", len(smp["logprobs"]), len(drawn))
            seq = np.array(prompt + drawn[:-1], dtype=np.int64)
            rec = []
            logits = ref_analysis.forward(model, seq[None, :], record=rec)[0]   # [len, V]
            if "telemetry" in smp:
                check_telemetry(ck, name, model, rec, smp["telemetry"], len(prompt), len(drawn), atol)
            for i, tok in enumerate(drawn):
                z = logits[len(prompt) - 1 + i][:EOT + 1]
                u = ref_analysis.rng_uniform(ref_analysis.rng_key(seed, k, i), 0)
                want, allowed, margin = draw(z, tau, top_k, top_p, u, 2 * atol)
                worst_margin = min(worst_margin, margin)
                if len(allowed) > 1:
                    near_ties += 1
                if tok in allowed:
                    ck.passed += 1
                else:
                    ck.fail(f"{name}: token {i}", tok, want if len(allowed) == 1 else sorted(allowed))
                lz = z - z.max()
                lp = lz[tok] - math.log(np.exp(lz).sum())
                ck.close(f"{name}: log-probability {i}", smp["logprobs"][i], lp, atol, 0)
                worst_gap = max(worst_gap, abs(smp["logprobs"][i] - lp))
            eot_inside = EOT in smp["tokens"]
            if s["ignore_eot"]:
                ck.equal(f"{name}: stop", smp["stop"], "length")
            else:
                ck.equal(f"{name}: no <|endoftext|> before the stop", eot_inside, False)
            if smp["stop"] == "length":
                ck.equal(f"{name}: tokens at the limit", len(smp["tokens"]), s["max_tokens"])
            if enc:
                ck.equal(f"{name}: text", smp["text"], escape_invalid(enc.decode_bytes(smp["tokens"])))
        if enc:
            ck.equal(f"{path}: prompt text", g["prompt"]["text"], escape_invalid(enc.decode_bytes(prompt[1:])))
    print(f"largest log-probability gap {worst_gap:.3g}, smallest draw margin {worst_margin:.3g}, "
          f"draws within {TIE:g} of an edge (either side accepted): {near_ties}")
    print(f"ref_generate: {ck.passed} passed, {ck.failed} failed")
    sys.exit(1 if ck.failed else 0)


if __name__ == "__main__":
    main()
