"""Independent NumPy (float64) reference for `sgtrain analyze`.

    python tests/analysis/ref_analysis.py RUN_DIR MODEL.safetensors DATA_DIR

Reads RUN_DIR/analysis/{injection,probes,exposure,telemetry,incidence}.json (whichever
exist), recomputes every reported number from the specification
(docs/analysis.md, docs/formats.md, the model of tests/twin/twin.py, the
counter-based RNG of src/rng.c) and compares.  Prints one line per failed
comparison and ends with `ref_analysis: N passed, M failed`; exit status 0
iff M == 0.

Tolerances.  The C program computes in float32 (CPU build), this file in
float64 from the same float32 parameters, so the two differ by rounding
alone: by measurement on the test models of tests/e2e_analysis.sh (every
arm, doses up to 2.5) at most 4e-7 in a loss of 5-7 nats and 2e-7 in a
share, gate statistic, ratio or kurtosis, as expected from float32's 6e-8
unit rounding growing over a few hundred operations.  Every number is
therefore compared with |got - want| <= 1e-5 + 1e-5 |want| (the standard
errors with 1e-5 absolute): more than 100 times the rounding gap, yet
tight enough to catch a modelling slip that moves a loss by 1e-4 (for
example, transplanting reads from the clean pass instead of the corrupted
one changes the losses here by 4e-5 to 7e-2; a 2e-4 relative bound would
miss the smaller of those).  Discrete outcomes (which
reads fall below a cutoff, the token ranking, counts) are compared exactly;
they could only differ on exact ties, which the random test models do not
have.
"""

import json
import math
import os
import struct
import sys
import time

import numpy as np

LN_EPS = 1e-5

# --------------------------------------------------------------------------
# Counter-based RNG (src/rng.c), Python ints masked to 64 bits.
# --------------------------------------------------------------------------
M64 = (1 << 64) - 1
GAMMA = 0x9E3779B97F4A7C15


def rng_mix(x):
    """splitmix64 finalizer."""
    x &= M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & M64
    return x ^ (x >> 31)


def rng_key(a, b, c):
    """h = mix(a + G); h = mix((h ^ b) + G); mix((h ^ c) + G)."""
    h = rng_mix((a + GAMMA) & M64)
    h = rng_mix(((h ^ (b & M64)) + GAMMA) & M64)
    return rng_mix(((h ^ (c & M64)) + GAMMA) & M64)


def rng_uniform(key, i):
    """Top 53 bits of mix(mix(key) + (i+1) G), times 2^-53; 0 -> 2^-54."""
    bits = rng_mix((rng_mix(key) + (i + 1) * GAMMA) & M64)
    k = bits >> 11
    return k * 2.0**-53 if k else 2.0**-54


def rng_normal(key, i):
    """Box-Muller, cosine branch, from uniforms (key, 2i) and (key, 2i+1)."""
    u1 = rng_uniform(key, 2 * i)
    u2 = rng_uniform(key, 2 * i + 1)
    return math.sqrt(-2.0 * math.log(u1)) * math.cos(6.283185307179586476925 * u2)


def rng_below(h, n):
    """floor(h n / 2^64): a number in [0, n)."""
    return ((h & M64) * n) >> 64


# --------------------------------------------------------------------------
# Data: the validation shard and the validation windows (src/sampler.c).
# --------------------------------------------------------------------------
DOMAIN_VAL = 0x73672D76616C0000  # "sg-val\0\0"


def read_shard(path):
    """Tokens of a shard: 256-byte header (magic SGTOKENS, u64 n at 24), u16s."""
    with open(path, "rb") as f:
        raw = f.read()
    if raw[:8] != b"SGTOKENS":
        raise SystemExit(f"{path}: not a sinkgate token shard")
    (n,) = struct.unpack_from("<Q", raw, 24)
    return np.frombuffer(raw, dtype="<u2", count=n, offset=256).astype(np.int64)


def val_batch(val, val_seed, n, batch_size, seq_len):
    """Rows 0..batch_size-1 of validation batch n: a window of seq_len+1 tokens
    at rng_below(rng_key(rng_key(D_VAL, val_seed, 0), n, row), n_val - seq_len);
    returns (inputs [B, T], targets [B, T])."""
    base = rng_key(DOMAIN_VAL, val_seed, 0)
    rows = []
    for row in range(batch_size):
        start = rng_below(rng_key(base, n, row), len(val) - seq_len)
        rows.append(val[start:start + seq_len + 1])
    w = np.stack(rows)
    return w[:, :-1], w[:, 1:]


# --------------------------------------------------------------------------
# Model: safetensors export, config, arms.
# --------------------------------------------------------------------------
ARMS = {  # name: (zero option, gate, slot), as tests/twin/twin.py
    "baseline": ("none", "none", "value"),
    "offbyone": ("phantom_fixed", "none", "value"),
    "sinklogit": ("phantom_learned", "none", "value"),
    "sinktoken": ("token", "none", "value"),
    "normgate": ("none", "norm", "value"),
    "renorm": ("none", "norm", "routing"),
    "projgate": ("none", "proj", "value"),
    "combo": ("phantom_learned", "norm", "value"),
    "combo2": ("phantom_learned", "proj", "value"),
}


def read_safetensors(path):
    """({name: float64 array}, metadata dict)."""
    with open(path, "rb") as f:
        raw = f.read()
    (hlen,) = struct.unpack_from("<Q", raw, 0)
    header = json.loads(raw[8:8 + hlen].decode("utf-8"))
    meta = header.pop("__metadata__", {})
    base = 8 + hlen
    dtypes = {"F32": "<f4", "F64": "<f8"}
    params = {}
    for name, t in header.items():
        b, e = t["data_offsets"]
        a = np.frombuffer(raw[base + b:base + e], dtype=dtypes[t["dtype"]])
        params[name] = a.astype(np.float64).reshape(t["shape"])
    return params, meta


def parse_config(text):
    """The few top-level `key: value` lines of the resolved YAML we need."""
    cfg = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].rstrip()
        if not line or line.startswith(" ") or ":" not in line:
            continue
        k, v = line.split(":", 1)
        cfg[k.strip()] = v.strip().strip('"')
    return cfg


class Model:
    def __init__(self, path):
        self.p, meta = read_safetensors(path)
        c = parse_config(meta["config"])
        self.arm = c["arm"]
        self.zero, self.gate, self.slot = ARMS[self.arm]
        self.L, self.H = int(c["n_layer"]), int(c["n_head"])
        self.C = int(c["n_embd"])
        self.d = self.C // self.H
        self.beta = float(c["gate_beta"])
        self.val_seed = int(c["val_seed"])
        self.first = 1 if self.zero == "token" else 0   # first read position
        self.phantom = self.zero.startswith("phantom")
        self.gated = self.gate != "none"
        self.seed = 1   # the analysis --seed (junk draws, shuffles), set per setup
        # GPT-2's form (sgtrain import): the tanh GELU; linear biases are
        # read where the file has them (P.get below)
        self.gelu_tanh = c.get("gelu_tanh", "false") == "true"
        # GPT-NeoX's parts (Pythia): rotary positions on the first
        # rotary_dims of each head's q and k, attention and MLP side by side,
        # an untied head (lm_head.weight, read where the file has it)
        self.rotary_dims = int(c.get("rotary_dims", "0"))
        self.rotary_base = float(c.get("rotary_base", "10000"))
        self.parallel = c.get("parallel_residual", "false") == "true"

    def phantom_logit(self, l):
        if self.zero == "phantom_learned":
            return self.p[f"h.{l}.attn.sink_logit"]
        return np.zeros(self.H)

    def gate_logit(self, v, l):
        """z per read, v [B, H, S, d]: norm gate beta (||v||/sqrt(d) - tau_h),
        projection gate w_h . v + b_h."""
        a = f"h.{l}.attn."
        if self.gate == "norm":
            r = np.linalg.norm(v, axis=-1) / math.sqrt(self.d)
            return self.beta * (r - self.p[a + "gate_tau"][None, :, None])
        w, b = self.p[a + "gate_w"], self.p[a + "gate_b"]
        return np.einsum("bhsd,hd->bhs", v, w) + b[None, :, None]


def layer_norm(x, w, b):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    y = (x - mu) / np.sqrt(var + LN_EPS) * w
    return y + b if b is not None else y


def gelu(x):
    """Exact GELU 0.5 x (1 + erf(x / sqrt 2))."""
    erf = np.vectorize(math.erf)
    return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))


def gelu_tanh(x):
    """GPT-2's GELU 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))."""
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def rope(m, x):
    """GPT-NeoX's rotary embedding of x [B, H, S, d] at positions 0..S-1 (a
    sink token's row is position 0): pair i < h = rd/2 of the first rd dims,
    (x_i, x_{i+h}), turns by p / base^(2i/rd), the angle rounded to float32
    as the reference implementation computes it."""
    rd = m.rotary_dims
    if not rd:
        return x
    h, S = rd // 2, x.shape[2]
    inv = np.float32(1.0) / np.power(np.float32(m.rotary_base), np.arange(0, rd, 2, dtype=np.float32) / np.float32(rd))
    a = (np.arange(S, dtype=np.float32)[:, None] * inv[None, :]).astype(np.float64)
    c, s = np.cos(a), np.sin(a)
    x1, x2 = x[..., :h], x[..., h:rd]
    return np.concatenate([x1 * c - x2 * s, x2 * c + x1 * s, x[..., rd:]], axis=-1)


def linear(x, P, name):
    """x W^T + b, the bias where the model has one (linear_bias)."""
    y = x @ P[name + ".weight"].T
    b = P.get(name + ".bias")
    return y + b if b is not None else y


def sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


def log_sigmoid(z):
    """log sigmoid(z) = -softplus(-z) = min(z, 0) - log1p(exp(-|z|))."""
    return np.minimum(z, 0.0) - np.log1p(np.exp(-np.abs(z)))


def softmax_rows(s):
    m = s.max(-1, keepdims=True)
    e = np.exp(s - m)
    return e / e.sum(-1, keepdims=True)


def scores(m, q, k, l, key_bias=None):
    """Causal scores [B, H, S, K] = q.k/sqrt(d) (+ per-key bias), masked with
    -inf above the diagonal; with a phantom, column 0 is its logit b_h."""
    B, H, S, d = q.shape
    s = q @ k.transpose(0, 1, 3, 2) / math.sqrt(d)
    if key_bias is not None:
        s = s + key_bias[:, :, None, :]
    s = np.where(np.tril(np.ones((S, S), bool)), s, -np.inf)
    if m.phantom:
        ph = np.broadcast_to(m.phantom_logit(l)[None, :, None, None], (B, H, S, 1))
        s = np.concatenate([ph, s], axis=-1)
    return s


def attention_model(m, q, k, v, l):
    """The arm's attention as the model computes it (twin.py): the gate scales
    the read (value slot) or adds log g to its logit (routing slot); a phantom
    column of value zero sits at key 0.  Returns (y [B,H,S,d], p [B,H,S,K],
    g [B,H,S] or None)."""
    g, bias = None, None
    if m.gated:
        z = m.gate_logit(v, l)
        g = sigmoid(z)
        if m.slot == "value":
            v = g[..., None] * v
        else:
            bias = log_sigmoid(z)
    p = softmax_rows(scores(m, q, k, l, bias))
    pv = p[..., 1:] if m.phantom else p
    return pv @ v, p, g


def attention_probe(m, q, k, v, l, override, n):
    """The gate-override path: p_ij without the gate, G'_ij the overridden
    gate of read j in row i; value slot o_i = sum_j p_ij G'_ij v_j, routing
    slot o_i = sum_j p_ij G'_ij v_j / (p_i,phantom + sum_k p_ik G'_ik)."""
    g = sigmoid(m.gate_logit(v, l))
    p = softmax_rows(scores(m, q, k, l))
    p_ph = p[..., 0] if m.phantom else np.zeros(p.shape[:-1])
    pr = p[..., 1:] if m.phantom else p                           # [B,H,S,S] reads
    G = override_gates(m, override, pr, g, l, n)
    w = pr * G
    y = w @ v
    if m.slot == "routing":
        y = y / (p_ph + w.sum(-1))[..., None]
    return y


def override_gates(m, override, pr, g, l, n):
    """G'_ij [B, H, S, S] (only j <= i matters, p_ij = 0 above)."""
    B, H, S = g.shape
    G = np.broadcast_to(g[:, :, None, :], (B, H, S, S)).copy()
    if override == "trained":
        return G
    if override == "reopened":
        return np.where(G < 0.5, 1.0, G)
    if override == "row_mean":
        # gbar_i = sum_j a_ij g_j / sum_j a_ij, a = p (value slot), p g (routing)
        a = pr if m.slot == "value" else pr * g[:, :, None, :]
        gbar = (a * g[:, :, None, :]).sum(-1) / a.sum(-1)
        return np.broadcast_to(gbar[..., None], (B, H, S, S)).copy()
    if override == "shuffled":
        for b in range(B):
            for h in range(H):
                for i in range(S):
                    G[b, h, i, :i + 1] = g[b, h, shuffle_perm(m, l, n, b, h, i)]
        return G
    raise ValueError(override)


_perm_cache = {}


def shuffle_perm(m, l, n, b, h, i):
    """pi_i on 0..i: rk = key(key(key(S, 0x9e0 + l, n), bH + h, 0x71), i, 0x5f);
    from the identity, for j = i..1 swap j and rng_below(mix(rk + j), j + 1)."""
    ck = (m.seed, l, n, b, h, i)
    if ck not in _perm_cache:
        rk = rng_key(rng_key(rng_key(m.seed, 0x9E0 + l, n), b * m.H + h, 0x71), i, 0x5F)
        perm = list(range(i + 1))
        for j in range(i, 0, -1):
            s = rng_below(rng_mix((rk + j) & M64), j + 1)
            perm[j], perm[s] = perm[s], perm[j]
        _perm_cache[ck] = perm
    return _perm_cache[ck]


def forward(m, inp, corrupt=None, override=None, n=0, record=None):
    """Logits [B, T, V].  corrupt(l, v) -> v' is applied to the raw reads of
    every layer after the QKV projection and before anything else; override
    selects the probes' attention path.  record (a list) receives per layer
    {v: raw reads, g: gates, p: probabilities incl. the phantom column}."""
    P = m.p
    B, T = inp.shape
    x = P["wte"][inp] + (P["wpe"][:T][None] if "wpe" in P else 0)
    if m.zero == "token":   # the sink at position 0, no positional embedding
        x = np.concatenate([np.broadcast_to(P["sink_token"], (B, 1, m.C)), x], axis=1)
    S = x.shape[1]
    for l in range(m.L):
        a = f"h.{l}."
        hx = layer_norm(x, P[a + "ln_1.weight"], P.get(a + "ln_1.bias"))
        qkv = linear(hx, P, a + "attn.c_attn")
        q, k, v = (qkv[..., i * m.C:(i + 1) * m.C].reshape(B, S, m.H, m.d).transpose(0, 2, 1, 3)
                   for i in range(3))
        q, k = rope(m, q), rope(m, k)
        if corrupt is not None:
            v = corrupt(l, v)
        if override is None:
            y, p, g = attention_model(m, q, k, v, l)
            if record is not None:
                record.append({"v": v, "g": g, "p": p})
        else:
            y = attention_probe(m, q, k, v, l, override, n)
        y = y.transpose(0, 2, 1, 3).reshape(B, S, m.C)
        r = x + linear(y, P, a + "attn.c_proj")
        hx = layer_norm(x if m.parallel else r, P[a + "ln_2.weight"], P.get(a + "ln_2.bias"))
        act = gelu_tanh if m.gelu_tanh else gelu
        x = r + linear(act(linear(hx, P, a + "mlp.c_fc")), P, a + "mlp.c_proj")
    x = x[:, m.first:]
    x = layer_norm(x, P["ln_f.weight"], P.get("ln_f.bias"))
    return x @ P.get("lm_head.weight", P["wte"]).T


def mean_ce(logits, tgt):
    """Mean token cross-entropy."""
    mx = logits.max(-1, keepdims=True)
    lse = (mx[..., 0] + np.log(np.exp(logits - mx).sum(-1)))
    picked = np.take_along_axis(logits, tgt[..., None], axis=-1)[..., 0]
    return float((lse - picked).mean())


# --------------------------------------------------------------------------
# Injection battery (Appendix C).
# --------------------------------------------------------------------------
JUNK = ["structured", "same_context", "gaussian", "random_direction", "own_direction"]


def quantile(x, q, axis=-1):
    """Linear interpolation between order statistics (NumPy's default)."""
    return np.quantile(x, q, axis=axis, method="linear")


def unit(x):
    return x / np.linalg.norm(x)


_draw_cache = {}


def junk_draw(m, junk, l, n, b, h, t, B, N):
    """What u_t is made of for read (l, n, b, h, t): ('read', b', t') for the
    transplants, ('vec', u) for the direction junk.  w = key(key0, bH + h, t),
    key0 = key(key(S, 0x1a7c + junk, l), n, 0x0b)."""
    ck = (m.seed, junk, l, n, b, h, t, B, N)
    if ck in _draw_cache:
        return _draw_cache[ck]
    j = JUNK.index(junk)
    w = rng_key(rng_key(rng_key(m.seed, 0x1A7C + j, l), n, 0x0B), b * m.H + h, t)
    f = m.first
    if junk == "structured":
        bb = rng_below(rng_mix((w + 1) & M64), B - 1)
        bb += bb >= b
        r = ("read", bb, f + rng_below(rng_mix((w + 2) & M64), N))
    elif junk == "same_context":
        tt = f + rng_below(rng_mix((w + 2) & M64), N - 1)
        tt += tt >= t
        r = ("read", b, tt)
    elif junk == "gaussian":
        r = ("vec", unit(np.array([rng_normal(w, k) for k in range(m.d)])))
    elif junk == "random_direction":
        kk = rng_key(rng_key(m.seed, 0xD1, l), h, 0x5D)
        r = ("vec", unit(np.array([rng_normal(kk, k) for k in range(m.d)])))
    else:  # own_direction
        r = ("vec", unit(m.p[f"h.{l}.attn.gate_w"][h]))
    _draw_cache[ck] = r
    return r


def make_corrupter(m, junk, cutoff, dose, n, stats=None):
    """corrupt(l, v): every read with r_t < cutoff (the head's median or 25th
    percentile of r_t = ||v_t|| over the sequence's reads) gets
    v_t += dose * m_h * u_t, m_h the median; transplants come from v as it
    was before this layer's corruption.  stats (a list) gets the
    (corrupted, total) read counts."""
    def corrupt(l, v):
        B, H, S, d = v.shape
        f = m.first
        N = S - f
        r = np.linalg.norm(v[:, :, f:], axis=-1)                    # [B,H,N]
        med = quantile(r, 0.5)
        cut = med if cutoff == "median" else quantile(r, 0.25)
        out = v.copy()
        hits = 0
        for b in range(B):
            for h in range(H):
                for t in range(f, S):
                    if not r[b, h, t - f] < cut[b, h]:
                        continue
                    hits += 1
                    kind, *rest = junk_draw(m, junk, l, n, b, h, t, B, N)
                    u = unit(v[rest[0], h, rest[1]]) if kind == "read" else rest[0]
                    out[b, h, t] += dose * med[b, h] * u
        if stats is not None:
            stats.append((hits, B * H * N))
        return out
    return corrupt


# --------------------------------------------------------------------------
# Exposure and telemetry: sums over the clean pass's explicit probabilities.
# --------------------------------------------------------------------------
class Telemetry:
    """Accumulates per-layer row quantities over batches."""

    def __init__(self, m):
        self.m = m
        self.rows = [dict() for _ in range(m.L)]        # name -> list of arrays
        self.v0 = [[] for _ in range(m.L)]              # ||v_0|| per (seq, head)
        self.vmed = [[] for _ in range(m.L)]            # median_{t>=1} ||v_t||
        self.values = [[] for _ in range(m.L)]          # value rows [tokens, C]
        self.gate_sum, self.gate_cnt = {}, {}

    def add(self, record, inp):
        m = self.m
        f = m.first
        for l, rec in enumerate(record):
            v, p, g = rec["v"], rec["p"], rec["g"]
            B, H, S, d = v.shape
            pk = p[..., 1:] if m.phantom else p                   # [B,H,S,S] real keys
            qi = np.arange(f, S)                                  # query rows: real tokens
            r = np.linalg.norm(v, axis=-1)                        # [B,H,S]
            rr = r[:, :, f:]
            acc = self.rows[l]

            def put(name, x):
                acc.setdefault(name, []).append(np.asarray(x).ravel())

            for name, q in (("quiet_median", 0.5), ("quiet_q25", 0.25)):
                cut = quantile(rr, q)                              # [B,H]
                quiet = np.zeros((B, H, S), bool)
                quiet[:, :, f:] = rr < cut[..., None]
                # sum over reads j <= i below the cutoff (p_ij = 0 for j > i)
                put(name, (pk * quiet[:, :, None, :]).sum(-1)[:, :, qi])
            if m.phantom:
                put("phantom", p[:, :, qi, 0])
            if m.zero == "token":
                put("sink_token", pk[:, :, qi, 0])
            put("pos0_mass", pk[:, :, qi, 0])
            if m.gated:
                w = pk / pk.sum(-1, keepdims=True)                # w_ij over keys j <= i
                gbar = (w * g[:, :, None, :]).sum(-1)             # [B,H,S]
                var = (w * (g[:, :, None, :] - gbar[..., None]) ** 2).sum(-1)
                put("gate_mean", gbar[:, :, qi])
                put("gate_within_row_sd", np.sqrt(var[:, :, qi]))
                for b in range(B):
                    for t in range(f, S):
                        tok = int(inp[b, t - f])
                        self.gate_sum[tok] = self.gate_sum.get(tok, 0.0) + g[b, :, t].sum()
                        self.gate_cnt[tok] = self.gate_cnt.get(tok, 0) + H
            self.v0[l].append(r[:, :, 0])
            self.vmed[l].append(np.median(r[:, :, 1:], axis=-1))
            # value rows of the real tokens (the sink is not a token of a sequence)
            self.values[l].append(v[:, :, f:].transpose(0, 2, 1, 3).reshape(B * (S - f), m.C))

    def layer(self, l):
        acc = {k: np.concatenate(x) for k, x in self.rows[l].items()}
        out = {k: float(x.mean()) for k, x in acc.items()}
        if "gate_mean" in acc:
            out["gate_between_row_sd"] = float(acc["gate_mean"].std())
        # pos0_norm_ratio per head: mean_seq ||v_0|| / mean_seq median_{t>=1} ||v_t||
        ratios = np.concatenate(self.v0[l]).mean(0) / np.concatenate(self.vmed[l]).mean(0)
        out["pos0_norm_ratio"] = float(np.median(ratios))
        out["value_excess_kurtosis"] = float(excess_kurtosis(np.concatenate(self.values[l])))
        return out, acc, ratios

    def summary(self):
        """(overall, [per layer]): row quantities averaged over all rows of all
        layers; between-row sd over all rows; the head ratios' median over
        the L H heads; the kurtosis averaged over layers."""
        per, accs, ratios = zip(*(self.layer(l) for l in range(self.m.L)))
        tot = {k: float(np.concatenate([a[k] for a in accs]).mean()) for k in accs[0]}
        if "gate_mean" in accs[0]:
            tot["gate_between_row_sd"] = float(np.concatenate([a["gate_mean"] for a in accs]).std())
        tot["pos0_norm_ratio"] = float(np.median(np.concatenate(ratios)))
        tot["value_excess_kurtosis"] = float(np.mean([o["value_excess_kurtosis"] for o in per]))
        return tot, list(per)

    def ranking(self, min_count, top):
        """Tokens with >= min_count occurrences by mean gate over occurrences,
        layers and heads: (ranked count, most attenuated, least attenuated)."""
        LH = self.m.L * self.m.H
        ranked = [(self.gate_sum[t] / self.gate_cnt[t], t, self.gate_cnt[t] // LH)
                  for t in self.gate_sum if self.gate_cnt[t] // LH >= min_count]
        ranked.sort()
        return len(ranked), ranked[:top], ranked[::-1][:top]


def excess_kurtosis(x):
    """Per column m4 / m2^2 - 3 (central moments), averaged over columns."""
    c = x - x.mean(0)
    m2, m4 = (c ** 2).mean(0), (c ** 4).mean(0)
    return (m4 / m2 ** 2 - 3.0).mean()


# --------------------------------------------------------------------------
# Incidence (Appendix F, Table 12): per head sums over the clean pass.
# --------------------------------------------------------------------------
def incidence_layer(m, rec, ns, pct, acc):
    """Adds one batch's per-head sums of one layer to acc (arrays [H] and
    [H, len(pct)]).  Sink keys j < s = first + ns; reads j >= s; quiet at q:
    r_j below the q-th percentile (linear) of the head's reads past the sink
    in this sequence; content weight c_j = g_j r_j in the value slot."""
    v, p, g = rec["v"], rec["p"], rec["g"]
    B, H, S, d = v.shape
    f = m.first
    s0 = min(f + ns, S)
    pk = p[..., 1:] if m.phantom else p
    r = np.linalg.norm(v, axis=-1)                                # [B,H,S]
    c = r * g if (m.gated and m.slot == "value") else r
    rows = pk[:, :, f:, :]                                        # query rows i >= first
    acc["rows"] += B * (S - f)
    acc["sink"] += rows[..., :s0].sum((0, 2, 3))
    a = rows[..., s0:]                                            # [B,H,R,n]
    acc["mass"] += a.sum((0, 2, 3))
    w = a * c[:, :, None, s0:]
    acc["content"] += w.sum((0, 2, 3))
    rr = r[:, :, s0:]
    for k, q in enumerate(pct):
        quiet = rr < quantile(rr, q / 100)[..., None]             # [B,H,n]
        acc["qmass"][:, k] += (a * quiet[:, :, None, :]).sum((0, 2, 3))
        acc["qcontent"][:, k] += (w * quiet[:, :, None, :]).sum((0, 2, 3))


def incidence_values(acc, pct):
    """Per head: sink mass, blind-mass ratios, content shares."""
    with np.errstate(invalid="ignore", divide="ignore"):
        sink = acc["sink"] / acc["rows"]
        blind = acc["qmass"] / acc["mass"][:, None] / (np.array(pct) / 100)[None, :]
        content = acc["qcontent"] / acc["content"][:, None]
    return sink, blind, content


def incidence_summary(sink, blind, content, pct):
    """Means over the heads given (NaN heads left out), keyed as the file."""
    def mean(x):
        x = x[np.isfinite(x)]
        return float(x.mean()) if len(x) else None
    out = {"sink_mass": mean(sink)}
    for k, q in enumerate(pct):
        out[f"blind_mass_ratio_q{q:g}"] = mean(blind[:, k])
    for k, q in enumerate(pct):
        out[f"content_share_q{q:g}"] = mean(content[:, k])
    return out


# --------------------------------------------------------------------------
# Evaluation over the analysis batches.
# --------------------------------------------------------------------------
class Evaluation:
    """The tokens and the per-batch losses of one setup (batches, batch_size,
    seq_len, seed, val_seed)."""

    def __init__(self, m, val, setup):
        self.m = m
        self.nb = int(setup["batches"])
        self.B = int(setup["batch_size"])
        self.T = int(setup["seq_len"])
        self.seed = int(setup["seed"])
        val_seed = int(setup.get("val_seed", m.val_seed))
        self.data = [val_batch(val, val_seed, n, self.B, self.T) for n in range(self.nb)]
        self.cache = {}

    def losses(self, junk=None, cutoff=None, dose=0.0, override=None):
        """Per-batch mean token losses under a condition, and the share of
        reads corrupted."""
        ck = (junk, cutoff, float(dose), override)
        if ck not in self.cache:
            self.m.seed = self.seed
            out, stats = [], []
            for n, (inp, tgt) in enumerate(self.data):
                corrupt = (make_corrupter(self.m, junk, cutoff, dose, n, stats)
                           if junk is not None else None)
                out.append(mean_ce(forward(self.m, inp, corrupt, override, n), tgt))
            share = sum(a for a, _ in stats) / sum(b for _, b in stats) if stats else 0.0
            self.cache[ck] = (np.array(out), share)
        return self.cache[ck]

    def incidence(self, ns, pct):
        """Per layer the per-head accumulators of incidence_layer."""
        key = ("incidence", ns, tuple(pct))
        if key not in self.cache:
            H, P = self.m.H, len(pct)
            accs = [{"rows": 0, "sink": np.zeros(H), "mass": np.zeros(H), "content": np.zeros(H),
                     "qmass": np.zeros((H, P)), "qcontent": np.zeros((H, P))} for _ in range(self.m.L)]
            for inp, _ in self.data:
                rec = []
                forward(self.m, inp, record=rec)
                for l, r in enumerate(rec):
                    incidence_layer(self.m, r, ns, pct, accs[l])
            self.cache[key] = accs
        return self.cache[key]

    def telemetry(self):
        if "telemetry" not in self.cache:
            tel = Telemetry(self.m)
            for inp, _ in self.data:
                rec = []
                forward(self.m, inp, record=rec)
                tel.add(rec, inp)
            self.cache["telemetry"] = tel
        return self.cache["telemetry"]


# --------------------------------------------------------------------------
# Comparisons.
# --------------------------------------------------------------------------
class Checker:
    def __init__(self):
        self.passed = self.failed = 0

    def fail(self, name, got, want):
        self.failed += 1
        print(f"FAIL {name}: got {got!r}, want {want!r}")

    def close(self, name, got, want, atol=1e-5, rtol=1e-5):
        """got: the C program's value; want: this reference's."""
        if got is None:
            self.fail(name, "missing", want)
        elif isinstance(got, (int, float)) and abs(got - want) <= atol + rtol * abs(want):
            self.passed += 1
        else:
            self.fail(name, got, want)

    def equal(self, name, got, want):
        if got == want:
            self.passed += 1
        else:
            self.fail(name, got, want)

    def fields(self, prefix, obj, want):
        """Every field of `want` is in obj and agrees; a known field that
        the arm does not have (KNOWN_FIELDS minus want) is absent."""
        for k, v in want.items():
            self.close(f"{prefix}{k}", obj.get(k), v)
        for k in KNOWN_FIELDS:
            if k in obj and k not in want:
                self.fail(f"{prefix}{k}", obj[k], "absent for this arm")


KNOWN_FIELDS = ("quiet_median", "quiet_q25", "phantom", "sink_token", "phantom_mass",
                "pos0_mass", "pos0_norm_ratio", "value_excess_kurtosis", "gate_mean",
                "gate_within_row_sd", "gate_between_row_sd")


def paired(cond, clean):
    """(mean loss, increase, standard error of the per-batch paired
    difference: sample sd / sqrt(batches); None (undefined) for one batch)."""
    d = cond - clean
    se = float(d.std(ddof=1) / math.sqrt(len(d))) if len(d) > 1 else None
    return float(cond.mean()), float(d.mean()), se


def check_losses(ck, name, r, ev, clean, **cond):
    losses, share = ev.losses(**cond)
    val, inc, se = paired(losses, clean)
    ck.close(f"{name}.val_loss", r.get("val_loss"), val)
    if "increase" in r:
        ck.close(f"{name}.increase", r["increase"], inc)
    if "increase_se" in r:
        if se is None:
            ck.equal(f"{name}.increase_se", r["increase_se"], None)
        else:
            ck.close(f"{name}.increase_se", r["increase_se"], se, atol=1e-5, rtol=0)
    return share


def check_injection(ck, doc, ev):
    clean, _ = ev.losses()
    ck.close("injection.clean_val_loss", doc.get("clean_val_loss"), float(clean.mean()))
    for r in doc.get("results", []):
        name = f"injection.{r['junk']}.{r['cutoff']}.{r['dose']:g}"
        share = check_losses(ck, name, r, ev, clean, junk=r["junk"], cutoff=r["cutoff"],
                             dose=r["dose"])
        if "corrupted_share" in r:   # reads corrupted / reads, over layers and batches
            ck.close(f"{name}.corrupted_share", r["corrupted_share"], share, atol=1e-12, rtol=0)


def check_probes(ck, doc, ev):
    clean, _ = ev.losses()
    if "clean_val_loss" in doc:
        ck.close("probes.clean_val_loss", doc["clean_val_loss"], float(clean.mean()))
    for r in doc.get("results", []):
        name = f"probes.{r['override']}.{r['dose']:g}"
        cond = {"override": r["override"], "dose": r["dose"]}
        if r["dose"] != 0:
            cond.update(junk=doc["junk"], cutoff=doc["cutoff"])
        check_losses(ck, name, r, ev, clean, **cond)


def exposure_fields(m, d):
    out = {"quiet_median": d["quiet_median"], "quiet_q25": d["quiet_q25"]}
    if m.phantom:
        out["phantom"] = d["phantom"]
    if m.zero == "token":
        out["sink_token"] = d["sink_token"]
    return out


def telemetry_fields(m, d):
    keys = ["pos0_mass", "pos0_norm_ratio", "value_excess_kurtosis"]
    if m.gated:
        keys += ["gate_mean", "gate_within_row_sd", "gate_between_row_sd"]
    out = {k: d[k] for k in keys}
    if m.phantom:
        out["phantom_mass"] = d["phantom"]
    return out


def check_layers(ck, prefix, doc, per, fields):
    layers = doc.get("layers")
    if layers is None or len(layers) != len(per):
        ck.fail(f"{prefix}.layers", None if layers is None else len(layers), len(per))
        return
    for l, (obj, want) in enumerate(zip(layers, per)):
        ck.equal(f"{prefix}.layers[{l}].layer", obj.get("layer"), l)
        ck.fields(f"{prefix}.layers[{l}].", obj, fields(want))


def check_exposure(ck, doc, ev):
    tot, per = ev.telemetry().summary()
    ck.fields("exposure.", doc, exposure_fields(ev.m, tot))
    check_layers(ck, "exposure", doc, per, lambda d: exposure_fields(ev.m, d))


def check_telemetry(ck, doc, ev):
    tel = ev.telemetry()
    tot, per = tel.summary()
    ck.fields("telemetry.", doc, telemetry_fields(ev.m, tot))
    check_layers(ck, "telemetry", doc, per, lambda d: telemetry_fields(ev.m, d))
    tok = doc.get("tokens")
    if not ev.m.gated:
        if tok is not None:
            ck.fail("telemetry.tokens", "present", "absent (arm has no gate)")
        return
    if tok is None:
        ck.fail("telemetry.tokens", None, "present")
        return
    top = max(len(tok.get("most_attenuated", [])), len(tok.get("least_attenuated", [])))
    ranked, most, least = tel.ranking(int(tok["min_count"]), top)
    ck.equal("telemetry.tokens.ranked", tok.get("ranked"), ranked)
    for side, want in (("most_attenuated", most), ("least_attenuated", least)):
        got = tok.get(side, [])
        ck.equal(f"telemetry.tokens.{side}.ids", [e["id"] for e in got], [t for _, t, _ in want])
        for e, (g, t, c) in zip(got, want):
            ck.close(f"telemetry.tokens.{side}[{t}].mean_gate", e.get("mean_gate"), float(g))
            ck.equal(f"telemetry.tokens.{side}[{t}].count", e.get("count"), c)


def check_incidence(ck, doc, ev):
    setup = doc["setup"]
    ns, pct = int(setup["sink_positions"]), [float(q) for q in setup["percentiles"]]
    accs = ev.incidence(ns, pct)
    tot, per = ev.telemetry().summary()
    per_layer = [incidence_values(a, pct) for a in accs]
    every = [np.concatenate([x[i] for x in per_layer]) for i in range(3)]
    want = incidence_summary(*every, pct)
    want["r0_ratio"] = tot["pos0_norm_ratio"]
    if ev.m.phantom:
        want["phantom_mass"] = tot["phantom"]
    numeric = {k for k, v in doc.items() if isinstance(v, (int, float)) and k != "version"}
    ck.equal("incidence.fields", sorted(numeric), sorted(want))
    for k, v in want.items():
        ck.close(f"incidence.{k}", doc.get(k), v)
    layers = doc.get("layers") or []
    ck.equal("incidence.layers", len(layers), ev.m.L)
    ratios = [np.concatenate(ev.telemetry().v0[l]).mean(0) / np.concatenate(ev.telemetry().vmed[l]).mean(0)
              for l in range(ev.m.L)]
    for l, (e, (sink, blind, content)) in enumerate(zip(layers, per_layer)):
        lw = incidence_summary(sink, blind, content, pct)
        lw["r0_ratio"] = per[l]["pos0_norm_ratio"]
        for k, v in lw.items():
            ck.close(f"incidence.layers[{l}].{k}", e.get(k), v)
        heads = e.get("heads") or []
        ck.equal(f"incidence.layers[{l}].heads", len(heads), ev.m.H)
        for h, hd in enumerate(heads):
            pre = f"incidence.layers[{l}].heads[{h}]"
            ck.close(f"{pre}.sink_mass", hd.get("sink_mass"), float(sink[h]))
            ck.close(f"{pre}.r0_ratio", hd.get("r0_ratio"), float(ratios[l][h]))
            for k in range(len(pct)):
                ck.close(f"{pre}.blind_mass_ratio[{k}]", (hd.get("blind_mass_ratio") or [None] * len(pct))[k],
                         float(blind[h, k]))
                ck.close(f"{pre}.content_share[{k}]", (hd.get("content_share") or [None] * len(pct))[k],
                         float(content[h, k]))


CHECKS = {"injection": check_injection, "probes": check_probes,
          "exposure": check_exposure, "telemetry": check_telemetry, "incidence": check_incidence}


def main(argv):
    if len(argv) != 4:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    run_dir, model_path, data_dir = argv[1:]
    t0 = time.time()
    m = Model(model_path)
    val = read_shard(os.path.join(data_dir, "val.bin"))
    ck = Checker()
    evals = {}
    found = 0
    for kind, check in CHECKS.items():
        path = os.path.join(run_dir, "analysis", kind + ".json")
        if not os.path.exists(path):
            continue
        found += 1
        with open(path) as f:
            doc = json.load(f)
        setup = doc["setup"]
        ck.equal(f"{kind}.setup.arm", setup.get("arm"), m.arm)
        key = tuple(setup.get(k) for k in ("batches", "batch_size", "seq_len", "seed", "val_seed"))
        if key not in evals:
            evals[key] = Evaluation(m, val, setup)
        check(ck, doc, evals[key])
    if not found:
        ck.fail("analysis files", "none", os.path.join(run_dir, "analysis", "*.json"))
    sys.stdout.flush()
    print(f"# {m.arm}: {time.time() - t0:.2f} s", file=sys.stderr)
    print(f"ref_analysis: {ck.passed} passed, {ck.failed} failed")
    return 0 if ck.failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
