#!/usr/bin/env python3
"""PyTorch baseline for `sgtrain analyze`: the injection battery (and the
gate-override probes) written the way a researcher would write them in
PyTorch, on a model exported by `sgtrain export`, for comparison with the C
implementation on the same shapes and the same number of tokens.

    build/sgtrain export RUN_DIR -o model.safetensors
    build/venv/bin/python tests/bench/torch_analysis.py model.safetensors \
        --data data/demo-gpt2 --batches 1 --batch-size 8 --threads 2 --json out.json
    # check the hooks against sgtrain's numbers (same windows, same draws):
    build/venv/bin/python tests/bench/torch_analysis.py model.safetensors \
        --draws exact --compare RUN_DIR/analysis/injection.json

What is evaluated (docs/analysis.md): --batches batches of --batch-size
sequences of --seq-len tokens (default: the model's context), the same
validation windows sgtrain analyze uses (rows 0..N-1 of validation batches
0..B-1 drawn with the run's val_seed, src/sampler.c), so the clean loss is
sgtrain's clean_val_loss up to float32 rounding.  Per batch, one forward pass
per condition, in sgtrain's order: the clean pass; the battery (every junk
type the arm has x the cutoffs x the doses: 40 passes on projection-gate
arms, 32 otherwise, with the defaults); on gated arms the probes (row_mean,
shuffled, reopened, each at eps 0 and under --probe-junk at --probe-dose;
the trained gate's two entries are the clean pass and a battery pass, as in
sgtrain).  Exposure and telemetry (sgtrain's measuring clean pass) are not
done here: run `sgtrain analyze --what injection[,probes]` for equal work.

How it is written (what a user would do, not what sgtrain does):

  * float32, torch.no_grad(), torch.set_num_threads(--threads);
  * the corruption is a forward hook on each layer's QKV projection
    (attn.c_attn): it edits the value third of the projection's output, so
    the gate, which runs after the projection, sees the corrupted reads.
    Per (batch, head, sequence) the read norms are ranked with
    torch.quantile (linear interpolation, as sgtrain), and reads strictly
    below the cutoff get v += eps * median * u;
  * the junk vectors u are drawn with a torch.Generator seeded per (seed,
    junk type, layer, batch), so every dose and cutoff of one junk type
    sees the same u (common random numbers, as sgtrain).  --draws exact
    instead reproduces sgtrain's counter-based draws (src/rng.c) with int64
    tensor arithmetic: slower, only for checking against sgtrain's numbers;
  * attention (--attention auto): F.scaled_dot_product_attention(is_causal)
    where the arm's attention is plain causal attention on (gated) values
    (baseline, sinktoken, normgate, projgate); explicit scores, the phantom
    column and a softmax where it is not (offbyone, sinklogit, combo,
    combo2: the phantom; renorm: log g added to the scores).  --attention
    sdpa uses SDPA for every arm with Appendix A's augmented head dimension
    (as tests/bench/torch_step.py); --attention explicit never uses it;
  * probes: explicit attention without the gate, the gate replaced per row
    (row_mean: the row's mean gate; shuffled: a random permutation of the
    row's gates, from torch.argsort of uniforms; reopened: gates < 1/2 set
    to 1), output sum_j p_ij g'_ij v_j (routing slot: renormalised);
  * every condition is a full forward pass (sgtrain reuses the clean
    pass's layer-0 QKV projection; a hook user would not);
  * --compile: torch.compile of each block's computation after the QKV
    projection (attention, gate, MLP) and of the head + loss; the hooks and
    the probes stay eager (a hook that changes per condition would make
    dynamo recompile for every junk type and dose).

Timing: --warmup untimed clean passes (the first compiles under --compile),
then every pass of every batch timed with time.perf_counter (the loss read
back with .item()).  Prints passes/s and the seconds; --json writes them
with the per-condition losses and seconds (injection.json's layout).
"""

import argparse
import json
import math
import os
import platform
import struct
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "twin"))
sys.path.insert(0, os.path.join(HERE, "..", "analysis"))
_default_dtype = torch.get_default_dtype()
import twin  # noqa: E402  (sets the default dtype to float64 on import)
torch.set_default_dtype(_default_dtype)

LN_EPS = twin.LN_EPS
JUNK = ["structured", "same_context", "gaussian", "random_direction", "own_direction"]
CUTOFFS = {"median": 0.5, "q25": 0.25}
OVERRIDES = ["trained", "row_mean", "shuffled", "reopened"]


# --------------------------------------------------------------------------
# sgtrain's counter-based RNG (src/rng.c): Python ints for scalar keys,
# int64 tensors (two's complement wraps like uint64) for vectorised draws.
# Only --draws exact and the validation windows use it.
# --------------------------------------------------------------------------
from ref_analysis import GAMMA, M64, parse_config, rng_below, rng_key, rng_mix  # noqa: E402  (the one Python copy)


def s64(c):
    """A uint64 as the int64 with the same bits."""
    c &= M64
    return c - (1 << 64) if c >> 63 else c


_G, _C1, _C2 = s64(GAMMA), s64(0xBF58476D1CE4E5B9), s64(0x94D049BB133111EB)


def _srl(x, k):                      # logical shift right of an int64 tensor
    return (x >> k) & ((1 << (64 - k)) - 1)


def t_mix(x):
    x = (x ^ _srl(x, 30)) * _C1
    x = (x ^ _srl(x, 27)) * _C2
    return x ^ _srl(x, 31)


def t_key(a, b, c):
    """rng_key with a an int64 tensor (or uint64 Python int) and b, c either."""
    a = a if torch.is_tensor(a) else torch.tensor(s64(a), dtype=torch.int64)
    b = b if torch.is_tensor(b) else s64(b)
    c = c if torch.is_tensor(c) else s64(c)
    h = t_mix(a + _G)
    h = t_mix((h ^ b) + _G)
    return t_mix((h ^ c) + _G)


def t_below(h, n):
    """floor(h n / 2^64) for h an int64 tensor (as uint64), n < 2^30."""
    hi, lo = _srl(h, 32), h & 0xFFFFFFFF
    return (hi * n + _srl(lo * n, 32)) >> 32


def t_uniform(key, i):
    bits = t_mix(t_mix(key) + (i + 1) * _G)
    k = _srl(bits, 11).to(torch.float64)
    return torch.where(k > 0, k * 2.0**-53, torch.full_like(k, 2.0**-54))


def t_normal(key, i):
    u1, u2 = t_uniform(key, 2 * i), t_uniform(key, 2 * i + 1)
    return torch.sqrt(-2.0 * torch.log(u1)) * torch.cos(6.283185307179586476925 * u2)


# --------------------------------------------------------------------------
# Data: val.bin and sgtrain analyze's windows (src/sampler.c)
# --------------------------------------------------------------------------
DOMAIN_VAL = 0x73672D76616C0000      # "sg-val\0\0"


def read_val(data_dir):
    path = os.path.join(data_dir, "val.bin")
    with open(path, "rb") as f:
        head = f.read(256)
    if head[:8] != b"SGTOKENS":
        sys.exit(f"{path}: not a sinkgate token shard")
    (n,) = struct.unpack_from("<Q", head, 24)
    return np.memmap(path, dtype="<u2", mode="r", offset=256, shape=(n,))


def val_batch(val, val_seed, n, batch_size, seq_len):
    """Rows 0..batch_size-1 of validation batch n: (inputs, targets) [B, T] int64."""
    base = rng_key(DOMAIN_VAL, val_seed, 0)
    rows = []
    for row in range(batch_size):
        start = rng_below(rng_key(base, n, row), len(val) - seq_len)
        rows.append(np.asarray(val[start:start + seq_len + 1], dtype=np.int64))
    w = torch.from_numpy(np.stack(rows))
    return w[:, :-1].contiguous(), w[:, 1:].contiguous()


# --------------------------------------------------------------------------
# The exported model
# --------------------------------------------------------------------------
def read_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    (hlen,) = struct.unpack_from("<Q", raw, 0)
    header = json.loads(raw[8:8 + hlen].decode("utf-8"))
    meta = header.pop("__metadata__", {})
    base = 8 + hlen
    dt = {"F32": np.float32, "F64": np.float64}
    tensors = {}
    for name, t in header.items():
        b, e = t["data_offsets"]
        a = np.frombuffer(raw, dtype=dt[t["dtype"]], count=(e - b) // np.dtype(dt[t["dtype"]]).itemsize,
                          offset=base + b)
        tensors[name] = torch.from_numpy(a.astype(np.float32).reshape(t["shape"]))
    return tensors, meta


class LayerNorm(nn.Module):
    def __init__(self, w, b):
        super().__init__()
        self.weight = nn.Parameter(w, requires_grad=False)
        self.bias = nn.Parameter(b, requires_grad=False) if b is not None else None

    def forward(self, x):
        return F.layer_norm(x, (x.shape[-1],), self.weight, self.bias, LN_EPS)


def linear(w):
    m = nn.Linear(w.shape[1], w.shape[0], bias=False)
    m.weight = nn.Parameter(w, requires_grad=False)
    return m


class Block(nn.Module):
    def __init__(self, P, l, arm, H, beta, attention):
        super().__init__()
        a = f"h.{l}."
        self.arm, self.H, self.beta, self.attention = arm, H, beta, attention
        self.ln_1 = LayerNorm(P[a + "ln_1.weight"], P.get(a + "ln_1.bias"))
        self.c_attn = linear(P[a + "attn.c_attn.weight"])         # the hook goes here
        self.c_proj = linear(P[a + "attn.c_proj.weight"])
        self.ln_2 = LayerNorm(P[a + "ln_2.weight"], P.get(a + "ln_2.bias"))
        self.c_fc = linear(P[a + "mlp.c_fc.weight"])
        self.mlp_proj = linear(P[a + "mlp.c_proj.weight"])
        for name in ("sink_logit", "gate_tau", "gate_w", "gate_b"):
            t = P.get(a + "attn." + name)
            setattr(self, name, nn.Parameter(t, requires_grad=False) if t is not None else None)
        self.phantom = arm.zero in ("phantom_fixed", "phantom_learned")
        self.routing = arm.gate != "none" and arm.slot == "routing"
        self.override = None            # a probe: "row_mean", "shuffled", "reopened"
        self.probe_gen = None
        self.tail_fn = self.tail        # replaced by a compiled version under --compile

    def forward(self, x):
        qkv = self.c_attn(self.ln_1(x))             # forward hooks run here
        if self.override is not None:
            return self.tail_probe(x, qkv)
        return self.tail_fn(x, qkv)

    # ---- pieces -------------------------------------------------------------
    def split(self, qkv):
        B, S, C3 = qkv.shape
        C = C3 // 3
        q, k, v = qkv.view(B, S, 3, self.H, C // self.H).permute(2, 0, 3, 1, 4).unbind(0)
        return q, k, v                                              # [B,H,S,d]

    def gate_logit(self, v):
        if self.arm.gate == "norm":                                   # Eq. 3
            r = torch.linalg.vector_norm(v, dim=-1) / math.sqrt(v.shape[-1])
            return self.beta * (r - self.gate_tau[None, :, None])
        return torch.einsum("bhsd,hd->bhs", v, self.gate_w) + self.gate_b[None, :, None]  # Eq. 4

    def phantom_logit(self, d):
        if self.arm.zero == "phantom_learned":
            return self.sink_logit
        return torch.zeros(self.H)

    def explicit_scores(self, q, k, key_bias=None):
        """[B,H,S,S(+1)] causal scores; with a phantom, its logit in the last column."""
        S, d = q.shape[2], q.shape[3]
        s = (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(d))
        if key_bias is not None:
            s = s + key_bias[:, :, None, :]
        s = s.masked_fill(~torch.ones(S, S, dtype=torch.bool).tril(), float("-inf"))
        if self.phantom:
            ph = self.phantom_logit(d).view(1, -1, 1, 1).expand(s.shape[0], -1, S, 1)
            s = torch.cat([s, ph], dim=-1)
        return s

    def mlp_out(self, x, y):
        B, H, S, d = y.shape
        x = x + self.c_proj(y.transpose(1, 2).reshape(B, S, H * d))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x))))

    def tail(self, x, qkv):
        """Attention after the QKV projection (gate, zero option), then the MLP."""
        q, k, v = self.split(qkv)
        d = q.shape[-1]
        key_bias = None
        if self.arm.gate != "none":
            z = self.gate_logit(v)
            if self.routing:
                key_bias = F.logsigmoid(z)
            else:
                v = v * torch.sigmoid(z)[..., None]
        mode = self.attention
        if mode == "auto":
            mode = "explicit" if self.phantom or self.routing else "sdpa"
        if mode == "explicit":
            p = torch.softmax(self.explicit_scores(q, k, key_bias), dim=-1)
            y = (p[..., :-1] if self.phantom else p) @ v
        elif not self.phantom and key_bias is None:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=1.0 / math.sqrt(d))
        else:
            y = self.sdpa_augmented(q, k, v, key_bias)
        return self.mlp_out(x, y)

    def sdpa_augmented(self, q, k, v, key_bias):
        """Appendix A: the head dimension augmented by a coordinate holding the
        phantom logit / the per-key log-gate, padded to a multiple of 8; the
        phantom an extra key column with value 0, visible to every query."""
        B, H, S, d = q.shape
        D = (d + 1 + 7) // 8 * 8
        pad = D - d - 1
        q = torch.cat([q, q.new_full((B, H, S, 1), math.sqrt(d)), q.new_zeros(B, H, S, pad)], dim=-1)
        kb = key_bias[..., None] if key_bias is not None else k.new_zeros(B, H, S, 1)
        k = torch.cat([k, kb, k.new_zeros(B, H, S, pad)], dim=-1)
        v = F.pad(v, (0, D - d))
        if self.phantom:
            ph = F.pad(self.phantom_logit(d).view(H, 1), (d, pad))
            k = torch.cat([ph.view(1, H, 1, D).expand(B, H, 1, D), k], dim=2)
            v = torch.cat([v.new_zeros(B, H, 1, D), v], dim=2)
            mask = torch.ones(S, S + 1, dtype=torch.bool).tril(1)
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=1.0 / math.sqrt(d))
        else:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=1.0 / math.sqrt(d))
        return y[..., :d]

    def tail_probe(self, x, qkv):
        """Explicit attention with p_ij computed without the gate and g_j
        replaced by the override's g'_ij (docs/analysis.md, Table 8)."""
        q, k, v = self.split(qkv)
        B, H, S, d = q.shape
        g = torch.sigmoid(self.gate_logit(v))                             # [B,H,S]
        p = torch.softmax(self.explicit_scores(q, k), dim=-1)
        pr = p[..., :S]                                                   # reads
        if self.override == "reopened":
            w = pr * torch.where(g < 0.5, torch.ones_like(g), g)[:, :, None, :]
        elif self.override == "row_mean":
            a = pr * g[:, :, None, :] if self.routing else pr
            gbar = (a @ g[..., None]) / a.sum(-1, keepdim=True)             # [B,H,S,1]
            w = pr * gbar
        elif self.override == "shuffled":
            w = pr * g.gather(-1, self.probe_perm(B, H, S).view(B, H, S * S)).view(B, H, S, S)
        else:                                                             # trained
            w = pr * g[:, :, None, :]
        y = w @ v
        if self.routing:
            den = w.sum(-1, keepdim=True)
            if self.phantom:
                den = den + p[..., S:]
            y = y / den
        return self.mlp_out(x, y)

    def probe_perm(self, B, H, S):
        """perm[b,h,i,:i+1]: a uniformly random permutation of 0..i, per row."""
        if isinstance(self.probe_gen, dict):                              # --draws exact
            return exact_perms(B, H, S, **self.probe_gen)
        u = torch.rand(B, H, S, S, generator=self.probe_gen)
        u = u.masked_fill(~torch.ones(S, S, dtype=torch.bool).tril(), 2.0)  # j > i sorts last
        return torch.argsort(u, dim=-1)


def exact_perms(B, H, S, seed, layer, batch):
    """sgtrain's shuffles (src/analysis_hooks.c): row i of (b, h) is Fisher-Yates
    on the identity of 0..i, swap j <-> rng_below(mix(rk + j), j + 1) for j = i..1,
    rk = key(key(key(seed, 0x9e0 + l, n), bH + h, 0x71), i, 0x5f)."""
    base = rng_key(seed, 0x9E0 + layer, batch)
    bh = torch.arange(B * H, dtype=torch.int64).view(B, H, 1)
    i = torch.arange(S, dtype=torch.int64).view(1, 1, S)
    rk = t_key(t_key(base, bh, 0x71), i, 0x5F)                           # [B,H,S]
    perm = torch.arange(S, dtype=torch.int64).expand(B, H, S, S).clone()
    for j in range(S - 1, 0, -1):
        active = i >= j
        r = t_below(t_mix(rk + j), j + 1)                                 # [B,H,S]
        a = perm[..., j].clone()
        at_r = perm.gather(-1, r[..., None]).squeeze(-1)
        perm[..., j] = torch.where(active, at_r, a)
        perm.scatter_(-1, r[..., None], torch.where(active, a, at_r)[..., None])
    return perm


class Model(nn.Module):
    def __init__(self, path, attention):
        super().__init__()
        P, meta = read_safetensors(path)
        c = parse_config(meta.get("config", ""))
        self.arm_name = meta.get("arm") or c.get("arm")
        if self.arm_name not in twin.ARMS:
            sys.exit(f"{path}: unknown arm {self.arm_name!r}")
        self.arm = twin.ARMS[self.arm_name]
        self.L, self.H = int(c["n_layer"]), int(c["n_head"])
        self.V, self.C = P["wte"].shape
        self.T = P["wpe"].shape[0]
        self.d = self.C // self.H
        self.val_seed = int(c.get("val_seed", 1337))
        self.data = c.get("data")
        self.tier = meta.get("tier") or c.get("tier")
        beta = float(c.get("gate_beta", 8))
        self.wte = nn.Parameter(P["wte"], requires_grad=False)
        self.wpe = nn.Parameter(P["wpe"], requires_grad=False)
        self.sink = self.arm.zero == "token"
        self.sink_token = nn.Parameter(P["sink_token"], requires_grad=False) if self.sink else None
        self.first = 1 if self.sink else 0          # first read position
        self.h = nn.ModuleList(Block(P, l, self.arm, self.H, beta, attention) for l in range(self.L))
        self.ln_f = LayerNorm(P["ln_f.weight"], P.get("ln_f.bias"))
        self.head_fn = self.head_loss

    def head_loss(self, x, targets):
        if self.sink:
            x = x[:, 1:]
        logits = F.linear(self.ln_f(x), self.wte)                         # tied head
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.reshape(-1))

    def embed(self, idx):
        """[B, T(+1), C]: token and position embeddings, after the sink's row in that arm."""
        B, T = idx.shape
        x = self.wte[idx] + self.wpe[:T]
        if self.sink:
            x = torch.cat([self.sink_token.view(1, 1, -1).expand(B, 1, self.C), x], dim=1)
        return x

    def forward(self, idx, targets):
        x = self.embed(idx)
        for block in self.h:
            x = block(x)
        return self.head_fn(x, targets)


# --------------------------------------------------------------------------
# The injection hook (Appendix C)
# --------------------------------------------------------------------------
class Injector:
    """Forward hooks on every layer's c_attn; `cond` (None: off) says what to do."""

    def __init__(self, model, seed, draws):
        self.model, self.seed, self.draws = model, seed, draws
        self.cond = None            # (junk, cutoff, eps)
        self.batch = 0
        self.corrupted = self.reads = 0
        self.handles = [b.c_attn.register_forward_hook(self.make_hook(l))
                        for l, b in enumerate(model.h)]

    def make_hook(self, l):
        def hook(module, inputs, out):
            if self.cond is None:
                return None
            return self.inject(l, out)
        return hook

    def inject(self, l, qkv):
        junk, cutoff, eps = self.cond
        B, S, C3 = qkv.shape
        C, H = C3 // 3, self.model.H
        d, first = C // H, self.model.first
        N = S - first
        v = qkv[:, first:, 2 * C:].view(B, N, H, d).transpose(1, 2)        # [B,H,N,d] reads
        r = torch.linalg.vector_norm(v, dim=-1)                            # [B,H,N]
        qs = torch.quantile(r, torch.tensor([0.5, CUTOFFS[cutoff]]), dim=-1)   # [2,B,H]
        med, cut = qs[0], qs[1]
        mask = r < cut[..., None]
        u = self.junk(junk, l, v, B, H, N, d)                               # [B,H,N,d] unit
        delta = (eps * med)[..., None, None] * u * mask[..., None]
        out = qkv.clone()
        out[:, first:, 2 * C:] += delta.transpose(1, 2).reshape(B, N, C)
        self.corrupted += int(mask.sum())
        self.reads += mask.numel()
        return out

    def junk(self, junk, l, v, B, H, N, d):
        if self.draws == "exact":
            return self.junk_exact(junk, l, v, B, H, N, d)
        jk = JUNK.index(junk)
        g = torch.Generator().manual_seed(hash((self.seed, jk, l, self.batch)) & 0x7FFFFFFFFFFFFFFF)
        if junk == "structured":                   # another sequence, any position
            bb = (torch.arange(B).view(B, 1, 1) + torch.randint(1, B, (B, H, N), generator=g)) % B
            tt = torch.randint(0, N, (B, H, N), generator=g)
            u = v[bb, torch.arange(H).view(1, H, 1), tt]
        elif junk == "same_context":               # another position, same sequence
            tt = torch.randint(0, N - 1, (B, H, N), generator=g)
            tt = tt + (tt >= torch.arange(N).view(1, 1, N)).long()
            u = v.gather(2, tt[..., None].expand(B, H, N, d))
        elif junk == "gaussian":
            u = torch.randn(B, H, N, d, generator=g)
        elif junk == "random_direction":           # one per (layer, head)
            g = torch.Generator().manual_seed(hash((self.seed, 0xD1, l)) & 0x7FFFFFFFFFFFFFFF)
            u = torch.randn(1, H, 1, d, generator=g)
        else:                                      # own_direction: w_h
            u = self.model.h[l].gate_w.view(1, H, 1, d)
        return F.normalize(u, dim=-1).expand(B, H, N, d)

    def junk_exact(self, junk, l, v, B, H, N, d):
        """sgtrain's draws (docs/analysis.md, "The draws, exactly")."""
        jk, first = JUNK.index(junk), self.model.first
        key = rng_key(rng_key(self.seed, 0x1A7C + jk, l), self.batch, 0x0B)
        bh = (torch.arange(B, dtype=torch.int64).view(B, 1, 1) * H
              + torch.arange(H, dtype=torch.int64).view(1, H, 1))
        t = torch.arange(first, first + N, dtype=torch.int64).view(1, 1, N)
        w = t_key(key, bh, t)                                               # [B,H,N]
        k = torch.arange(d, dtype=torch.int64)
        if junk == "structured":
            bb = t_below(t_mix(w + 1), B - 1)
            bb = bb + (bb >= torch.arange(B).view(B, 1, 1)).long()
            tt = t_below(t_mix(w + 2), N)
            u = v[bb, torch.arange(H).view(1, H, 1), tt].double()
        elif junk == "same_context":
            tt = t_below(t_mix(w + 2), N - 1)
            tt = tt + (tt >= torch.arange(N).view(1, 1, N)).long()
            u = v.gather(2, tt[..., None].expand(B, H, N, d)).double()
        elif junk == "gaussian":
            u = t_normal(w[..., None], k).float().double()      # sgtrain stores u in float
        elif junk == "random_direction":
            dk = rng_key(self.seed, 0xD1, l)
            hk = torch.tensor([s64(rng_key(dk, h, 0x5D)) for h in range(H)], dtype=torch.int64)
            u = t_normal(hk.view(1, H, 1, 1), k).float().double().expand(B, H, N, d)
        else:
            u = self.model.h[l].gate_w.double().view(1, H, 1, d).expand(B, H, N, d)
        n = torch.linalg.vector_norm(u, dim=-1, keepdim=True)
        return torch.where(n > 0, u / n, torch.zeros_like(u)).float()


# --------------------------------------------------------------------------
# Conditions, in sgtrain analyze's order (src/analysis.c, plan)
# --------------------------------------------------------------------------
def conditions(arm, args):
    gated, proj = arm.gate != "none", arm.gate == "proj"
    junk = JUNK if args.junk == "all" else args.junk.split(",")
    for j in junk:
        if j not in JUNK:
            sys.exit(f"--junk: unknown {j!r}")
    if not proj:
        if "own_direction" in junk and args.junk != "all":
            sys.exit("own_direction junk needs a projection-gate arm (projgate, combo2)")
        junk = [j for j in junk if j != "own_direction"]
    cuts = list(CUTOFFS) if args.cutoffs == "all" else args.cutoffs.split(",")
    for c in cuts:
        if c not in CUTOFFS:
            sys.exit(f"--cutoffs: unknown {c!r}")
    doses = [float(x) for x in args.doses.split(",")]
    conds = []

    def add(ovr, j, c, eps):
        key = (ovr, j, c, eps) if j is not None else (ovr, None, None, 0.0)
        if key not in conds:
            conds.append(key)

    add("trained", None, None, 0.0)                  # 0: clean
    for j in JUNK:
        for c in CUTOFFS:
            for eps in doses:
                if j in junk and c in cuts:
                    add("trained", j, c, eps)
    if gated and args.probes:
        for o in OVERRIDES:
            add(o, None, None, 0.0)
            if args.probe_dose > 0:
                add(o, args.probe_junk, args.probe_cutoff, args.probe_dose)
    return conds


def cpu_snapshot():
    """(busy CPU seconds of the whole machine, CPU seconds of this process)."""
    try:
        with open("/proc/stat") as f:
            ticks = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    busy = sum(ticks[:8]) - ticks[3] - ticks[4]
    t = os.times()
    return busy / os.sysconf("SC_CLK_TCK"), t.user + t.system


def compile_model(model):
    for b in model.h:
        b.tail_fn = torch.compile(b.tail, fullgraph=True)
    model.head_fn = torch.compile(model.head_loss, fullgraph=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", help="MODEL.safetensors from `sgtrain export`")
    ap.add_argument("--data", default=None, help="data directory with val.bin (default: the run's)")
    ap.add_argument("--batches", type=int, default=8)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--seq-len", type=int, default=0, help="default: the model's context")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--junk", default="all")
    ap.add_argument("--cutoffs", default="all")
    ap.add_argument("--doses", default="0.2,0.4,0.8,1.6")
    ap.add_argument("--probe-dose", type=float, default=0.2)
    ap.add_argument("--probe-junk", default="structured", choices=JUNK)
    ap.add_argument("--probe-cutoff", default="median", choices=list(CUTOFFS))
    ap.add_argument("--no-probes", dest="probes", action="store_false",
                    help="skip the gate-override probes (gated arms)")
    ap.add_argument("--attention", choices=["auto", "sdpa", "explicit"], default="auto")
    ap.add_argument("--compile", action="store_true", help="torch.compile the blocks and the head")
    ap.add_argument("--draws", choices=["torch", "exact"], default="torch",
                    help="torch: torch.Generator draws (timing); exact: sgtrain's (checking)")
    ap.add_argument("--warmup", type=int, default=1, help="untimed clean passes first (1)")
    ap.add_argument("--compare", metavar="INJECTION_JSON", default=None,
                    help="compare the losses with sgtrain analyze's injection.json (and the "
                         "probes.json beside it); exit 1 if one differs by more than --tol")
    ap.add_argument("--tol", type=float, default=1e-4)
    ap.add_argument("--json", default=None, metavar="OUT.json")
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    t_start = time.perf_counter()
    model = Model(args.model, args.attention).eval()
    arm = model.arm
    T = args.seq_len or model.T
    if T > model.T or T < 2:
        sys.exit(f"--seq-len {T}: must be in [2, {model.T}] (the model's context)")
    data = args.data or model.data
    if not data:
        sys.exit("no --data and no data directory in the model's config")
    val = read_val(data)
    conds = conditions(arm, args)
    if args.batch_size < 2 and any(c[1] == "structured" for c in conds):
        sys.exit("structured junk needs --batch-size >= 2")
    inj = Injector(model, args.seed, args.draws)
    setup_s = time.perf_counter() - t_start
    notes = []
    compiled = False
    t_warm = time.perf_counter()     # torch.compile's own set-up counts as warmup
    if args.compile:
        try:
            compile_model(model)
            compiled = True
        except Exception as e:      # noqa: BLE001
            notes.append(f"torch.compile failed: {type(e).__name__}: {e}; eager")

    def set_override(ovr, batch):
        for l, b in enumerate(model.h):
            b.override = None if ovr == "trained" else ovr
            if ovr == "shuffled":
                b.probe_gen = (dict(seed=args.seed, layer=l, batch=batch) if args.draws == "exact" else
                               torch.Generator().manual_seed(hash((args.seed, 0x9E0, l, batch)) & 0x7FFFFFFFFFFFFFFF))

    n_cond = len(conds)
    loss = [[0.0] * args.batches for _ in conds]
    secs = [0.0] * n_cond
    corrupted = [0] * n_cond
    reads = [0] * n_cond
    warm_s = 0.0
    with torch.no_grad():
        inp, tgt = val_batch(val, model.val_seed, 0, args.batch_size, T)
        for _ in range(args.warmup):
            try:
                model(inp, tgt).item()
            except Exception as e:      # noqa: BLE001  (a compile failure: go eager)
                if not compiled:
                    raise
                notes.append(f"torch.compile failed at the first pass: {type(e).__name__}: "
                             f"{str(e).splitlines()[0][:200] if str(e) else ''}; eager")
                for b in model.h:
                    b.tail_fn = b.tail
                model.head_fn = model.head_loss
                compiled = False
                model(inp, tgt).item()
        warm_s = time.perf_counter() - t_warm
        cpu0 = cpu_snapshot()
        t_passes = time.perf_counter()
        for n in range(args.batches):
            inp, tgt = val_batch(val, model.val_seed, n, args.batch_size, T)
            inj.batch = n
            tb = time.perf_counter()
            for k, (ovr, j, c, eps) in enumerate(conds):
                inj.cond = (j, c, eps) if j is not None else None
                inj.corrupted = inj.reads = 0
                set_override(ovr, n)
                t0 = time.perf_counter()
                loss[k][n] = model(inp, tgt).item()
                secs[k] += time.perf_counter() - t0
                corrupted[k] += inj.corrupted
                reads[k] += inj.reads
            set_override("trained", n)
            inj.cond = None
            if not args.quiet:
                print(f"  batch {n + 1}/{args.batches}: clean loss {loss[0][n]:.4f} "
                      f"({n_cond} passes, {time.perf_counter() - tb:.1f} s)", file=sys.stderr, flush=True)
        passes_s = time.perf_counter() - t_passes
        cpu1 = cpu_snapshot()
    total_s = time.perf_counter() - t_start

    def mean(xs):
        return sum(xs) / len(xs)

    clean = mean(loss[0])
    results, probes = [], []
    for k, (ovr, j, c, eps) in enumerate(conds):
        if k == 0:
            continue
        vl = mean(loss[k])
        if ovr == "trained":
            results.append({"junk": j, "cutoff": c, "dose": eps, "val_loss": vl, "increase": vl - clean,
                            "corrupted_share": corrupted[k] / reads[k] if reads[k] else 0.0,
                            "seconds": secs[k]})
        if ovr != "trained" or (j == args.probe_junk and c == args.probe_cutoff and eps == args.probe_dose):
            probes.append({"override": ovr, "dose": eps, "val_loss": vl, "increase": vl - clean,
                           "seconds": secs[k]})
    n_inj = len(results)
    n_probe = n_cond - 1 - n_inj
    inj_s = sum(r["seconds"] for r in results)
    probe_s = sum(secs) - secs[0] - inj_s
    passes = n_cond * args.batches
    other = None
    if cpu0 and cpu1 and passes_s >= 1.0:          # /proc/stat ticks: too coarse below a second
        own = cpu1[1] - cpu0[1]
        other = max(0.0, (cpu1[0] - cpu0[0]) - own) / (passes_s * (os.cpu_count() or 1))

    how = "compiled" if compiled else "eager"
    attn = args.attention if args.attention != "auto" else (
        "explicit" if (model.h[0].phantom or model.h[0].routing) else "sdpa")
    print(f"PyTorch {torch.__version__}, {model.arm_name} (L{model.L} H{model.H} C{model.C} T{T} "
          f"V{model.V}), {args.batches} batch(es) x {args.batch_size} x {T} tokens, {args.threads} thread(s), "
          f"float32, {how}, {attn} attention, {args.draws} draws")
    print(f"  passes: {passes} ({args.batches} x [1 clean + {n_inj} injection + {n_probe} probe])")
    print(f"  {passes / passes_s:.3f} passes/s; {passes_s:.2f} s over the passes "
          f"(injection {inj_s / max(1, n_inj * args.batches):.4f} s/pass, clean {secs[0] / args.batches:.4f} s"
          + (f", probes {probe_s / (n_probe * args.batches):.4f} s/pass" if n_probe else "")
          + f"); total {total_s:.2f} s (setup {setup_s:.2f} s, warmup {warm_s:.2f} s)")
    print(f"  clean loss {clean:.6f}" + (f"; other processes used {100 * other:.0f}% of the CPU" if other
                                          is not None else ""))
    for nt in notes:
        print("  note:", nt)

    rc = 0
    if args.compare:
        rc = compare(args, T, clean, results, probes)

    if args.json:
        doc = {
            "kind": "torch_analysis", "torch_version": torch.__version__, "threads": args.threads,
            "compiled": compiled, "attention": attn, "draws": args.draws, "dtype": "float32",
            "model": args.model, "arm": model.arm_name, "tier": model.tier,
            "shape": {"n_layer": model.L, "n_head": model.H, "n_embd": model.C, "block_size": model.T,
                      "vocab_size": model.V},
            "batches": args.batches, "batch_size": args.batch_size, "seq_len": T,
            "tokens": args.batches * args.batch_size * T,
            "passes": passes, "passes_per_batch": {"clean": 1, "injection": n_inj, "probes": n_probe},
            "passes_per_s": passes / passes_s, "passes_seconds": passes_s,
            "injection_seconds": inj_s, "injection_seconds_per_pass": inj_s / max(1, n_inj * args.batches),
            "clean_seconds_per_pass": secs[0] / args.batches,
            "probe_seconds_per_pass": probe_s / (n_probe * args.batches) if n_probe else None,
            "setup_seconds": setup_s, "warmup_seconds": warm_s, "warmup_passes": args.warmup,
            "total_seconds": total_s, "other_cpu_frac": other,
            "clean_val_loss": clean, "results": results, "probes": probes, "notes": notes,
            "machine": {"cpu_count": os.cpu_count(), "platform": platform.platform(),
                        "python": platform.python_version(), "loadavg_end": list(os.getloadavg())},
        }
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=2)
            f.write("\n")
    sys.exit(rc)


def compare(args, seq_len, clean, results, probes):
    """Losses against sgtrain analyze's files; max |difference| and the verdict."""
    with open(args.compare) as f:
        sg = json.load(f)
    st = sg.get("setup", {})
    ours = {"batches": args.batches, "batch_size": args.batch_size, "seq_len": seq_len, "seed": args.seed}
    diff = [f"{k} {st[k]} vs {v}" for k, v in ours.items() if k in st and st[k] != v]
    if diff:
        print(f"  compare with {args.compare}: not the same setup ({', '.join(diff)}): DIFFERENT")
        return 1
    worst = abs(sg["clean_val_loss"] - clean)
    missing = 0
    byk = {(r["junk"], r["cutoff"], r["dose"]): r for r in sg["results"]}
    share = 0.0
    for r in results:
        s = byk.get((r["junk"], r["cutoff"], r["dose"]))
        if s is None:
            missing += 1
            continue
        worst = max(worst, abs(s["val_loss"] - r["val_loss"]))
        share = max(share, abs(s["corrupted_share"] - r["corrupted_share"]))
    pfile = os.path.join(os.path.dirname(args.compare), "probes.json")
    np_ = 0
    if probes and os.path.exists(pfile):
        with open(pfile) as f:
            sp = {(r["override"], r["dose"]): r for r in json.load(f)["results"]}
        for r in probes:
            s = sp.get((r["override"], r["dose"]))
            if s is not None:
                worst = max(worst, abs(s["val_loss"] - r["val_loss"]))
                np_ += 1
    ok = worst <= args.tol and missing == 0
    print(f"  compare with {args.compare}: clean {sg['clean_val_loss']:.6f} vs {clean:.6f}; "
          f"{len(results) - missing} battery + {np_} probe losses, max |diff| {worst:.2e} "
          f"(tol {args.tol:.0e}), max corrupted-share diff {share:.2e}"
          + (f", {missing} condition(s) missing" if missing else "") + (": ok" if ok else ": DIFFERENT"))
    return 0 if ok else 1


if __name__ == "__main__":
    main()
