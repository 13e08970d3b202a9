#!/usr/bin/env python3
"""PyTorch baselines for `sgtrain generate` (docs/generate.md): greedy
continuations written the way a user would write them, on a model exported
by `sgtrain export`, for comparison on the same model, prompt and number
of tokens.

    python tests/bench/torch_generate.py MODEL.safetensors --prompt-tokens 50256,464,3797 \\
        --tokens 128 --samples 1 --mode cache --threads 2 [--json OUT.json]

--mode nocache: nanoGPT's `generate`: every new token is a whole forward
pass over the sequence so far (the blocks of tests/bench/torch_analysis.py:
SDPA where the arm's attention is plain causal attention, explicit scores
with the phantom column or the routing log-bias where it is not).

--mode cache: a key-value cache written by hand: each layer keeps the keys
and the values the attention reads (gated in the value slot) of every
position; a new token goes through each layer as one row per sample, with
explicit attention over the cache (the phantom's logit as an extra column;
in the routing slot log g recomputed over the cached raw values).  The
prompt enters one token at a time.

Both are float32 under torch.no_grad() on --threads threads.  Timing: the
prompt's tokens, then --tokens greedy tokens timed with
time.perf_counter (after one untimed run of 4 tokens).  Prints the tokens
(sample 0), tokens/s (new tokens of all samples per second) and, with
--json, both.
"""

import argparse
import json
import math
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_analysis as ta  # noqa: E402  (the PyTorch model of an exported checkpoint)


def logits_nocache(model, idx):
    """Logits after the last position of idx [S, n]: a whole forward."""
    x = model.embed(idx)
    for b in model.h:
        x = b(x)
    return F.linear(model.ln_f(x[:, -1]), model.wte)


class Cache:
    def __init__(self, model, S):
        rows = model.T + (1 if model.sink else 0)
        shape = (S, model.H, rows, model.d)
        self.k = [torch.zeros(shape) for _ in model.h]
        self.v = [torch.zeros(shape) for _ in model.h]
        self.n = 0


def block_step(b, x, k_cache, v_cache, n):
    """One new row per sample (x [S, 1, C]) at cache position n."""
    q, k, v = b.split(b.c_attn(b.ln_1(x)))                       # [S, H, 1, d]
    d = q.shape[-1]
    if b.arm.gate != "none" and not b.routing:
        v = v * torch.sigmoid(b.gate_logit(v))[..., None]
    k_cache[:, :, n:n + 1] = k
    v_cache[:, :, n:n + 1] = v
    K, Vv = k_cache[:, :, :n + 1], v_cache[:, :, :n + 1]
    s = (q @ K.transpose(-1, -2)) * (1.0 / math.sqrt(d))          # [S, H, 1, n+1]
    if b.routing:
        s = s + F.logsigmoid(b.gate_logit(Vv))[:, :, None, :]
    if b.phantom:
        ph = b.phantom_logit(d).view(1, -1, 1, 1).expand(s.shape[0], -1, 1, 1)
        s = torch.cat([s, ph], dim=-1)
    p = torch.softmax(s, dim=-1)
    y = (p[..., :-1] if b.phantom else p) @ Vv
    return b.mlp_out(x, y)


def logits_cache(model, cache, tok, pos):
    """Enters tok [S] at token position pos; logits [S, V]."""
    S = tok.shape[0]
    x = (model.wte[tok] + model.wpe[pos]).view(S, 1, model.C)
    if model.sink and cache.n == 0:                              # the sink's row first
        xs = model.sink_token.view(1, 1, -1).expand(S, 1, model.C)
        for l, b in enumerate(model.h):
            xs = block_step(b, xs, cache.k[l], cache.v[l], 0)
        cache.n = 1
    for l, b in enumerate(model.h):
        x = block_step(b, x, cache.k[l], cache.v[l], cache.n)
    cache.n += 1
    return F.linear(model.ln_f(x[:, 0]), model.wte)


def generate(model, prompt, n_new, S, mode):
    idx = torch.tensor(prompt, dtype=torch.long).view(1, -1).expand(S, -1).contiguous()
    if mode == "nocache":
        z = logits_nocache(model, idx)
    else:
        cache = Cache(model, S)
        for i, t in enumerate(prompt):
            z = logits_cache(model, cache, torch.full((S,), t, dtype=torch.long), i)
    out = []
    for i in range(n_new):
        nxt = torch.argmax(z, dim=-1)
        out.append(nxt)
        if i + 1 == n_new:
            break
        if mode == "nocache":
            idx = torch.cat([idx, nxt[:, None]], dim=1)
            z = logits_nocache(model, idx)
        else:
            z = logits_cache(model, cache, nxt, len(prompt) + i)
    return torch.stack(out, dim=1)                                # [S, n_new]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model")
    ap.add_argument("--prompt-tokens", required=True, help="comma-separated ids, <|endoftext|> first")
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--samples", type=int, default=1)
    ap.add_argument("--mode", choices=["cache", "nocache"], default="cache")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    prompt = [int(t) for t in args.prompt_tokens.split(",")]
    model = ta.Model(args.model, "auto").eval()
    if len(prompt) + args.tokens - 1 > model.T:
        sys.exit(f"{len(prompt)} prompt tokens and {args.tokens} new do not fit the context of {model.T}")
    with torch.no_grad():
        generate(model, prompt, 4, args.samples, args.mode)          # warm-up
        t0 = time.perf_counter()
        toks = generate(model, prompt, args.tokens, args.samples, args.mode)
        secs = time.perf_counter() - t0
    rate = args.samples * args.tokens / secs
    print(f"torch {args.mode}: {args.samples} x {args.tokens} tokens in {secs:.2f} s, {rate:.1f} tokens/s")
    if args.json:
        json.dump({"mode": args.mode, "samples": args.samples, "tokens": args.tokens, "seconds": secs,
                   "tokens_per_s": rate, "torch": torch.__version__, "threads": args.threads,
                   "sample0": toks[0].tolist()}, open(args.json, "w"))


if __name__ == "__main__":
    main()
