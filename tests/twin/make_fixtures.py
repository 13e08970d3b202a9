#!/usr/bin/env python3
"""Generate the twin fixtures the C trainer is tested against.

    python3 tests/twin/make_fixtures.py tests/fixtures      (or: make fixtures)

For every case (the nine arms with ln_bias = 0, plus baseline and combo2 with
ln_bias = 1) this draws starting parameters that exercise every mechanism,
runs one forward/backward and ten training steps with the twin (twin.py),
and writes tests/fixtures/<case>.safetensors.  See README.md for the layout.

Before any file is written, a self-check runs every time:
  * torch.autograd.gradcheck of the loss for each arm on a tiny model, so the
    twin's own autograd graph is sane;
  * the building blocks agree with torch's (LayerNorm, GELU);
  * off-by-one == sink logit with b_h = 0, and the augmented-coordinate
    phantom equals gpt-oss's "append the sink logit, softmax, drop it";
  * Lemma 3.1 on one head: value-slot output == Z_i * routing-slot output.
Everything is deterministic: each case reseeds torch, and one thread is used.
"""

import json
import math
import os
import struct
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import twin  # noqa: E402
from twin import ModelConfig, TrainConfig  # noqa: E402

torch.set_default_dtype(torch.float64)
torch.set_num_threads(1)          # bitwise-reproducible reductions

# The configuration shared by every case.
MODEL = dict(n_layer=2, n_head=2, n_embd=16, block_size=8, vocab_size=61, gate_beta=8.0)
TRAIN = TrainConfig(lr=1e-2, lr_min=1e-3, warmup=3, iters=10, beta1=0.9, beta2=0.95,
                    adam_eps=1e-8, weight_decay=0.1, grad_clip=1.0)
BATCH = 3

# (case, arm, ln_bias, seed)
CASES = [
    ("baseline",        "baseline",  0, 101),
    ("offbyone",        "offbyone",  0, 102),
    ("sinklogit",       "sinklogit", 0, 103),
    ("sinktoken",       "sinktoken", 0, 104),
    ("normgate",        "normgate",  0, 105),
    ("renorm",          "renorm",    0, 106),
    ("projgate",        "projgate",  0, 107),
    ("combo",           "combo",     0, 108),
    ("combo2",          "combo2",    0, 109),
    ("baseline_lnbias", "baseline",  1, 110),
    ("combo2_lnbias",   "combo2",    1, 111),
]

PROJ_GATE_STD = 1.5     # target spread of w_h . v over the batch (see calibrate)
# Gate spread required at the starting parameters on the fixture batch: every
# head must reach below HEAD_LO and above HEAD_HI, and each case as a whole
# below CASE_LO and above CASE_HI.
HEAD_LO, HEAD_HI = 0.2, 0.7
CASE_LO, CASE_HI = 0.1, 0.9


# --------------------------------------------------------------------------
# safetensors, written and read by hand (no dependency on the package):
#   8 bytes   little-endian u64 N, the header length
#   N bytes   JSON {"__metadata__": {str: str}, name: {"dtype", "shape",
#             "data_offsets": [begin, end]}, ...}, padded with spaces to a
#             multiple of 8
#   data      tensors back to back in header (insertion) order, little-endian
# --------------------------------------------------------------------------
DTYPES = {torch.float64: ("F64", "d", 8), torch.int32: ("I32", "i", 4)}
FROM_CODE = {code: (dt, fmt, size) for dt, (code, fmt, size) in DTYPES.items()}


def write_safetensors(path, tensors, metadata):
    header = {"__metadata__": {k: str(v) for k, v in metadata.items()}}
    blobs, offset = [], 0
    for name, t in tensors.items():
        code, fmt, _ = DTYPES[t.dtype]
        values = t.contiguous().reshape(-1).tolist()
        blob = struct.pack(f"<{len(values)}{fmt}", *values)
        header[name] = {"dtype": code, "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for blob in blobs:
            f.write(blob)
    os.replace(tmp, path)


def read_safetensors(path):
    """Returns (metadata, {name: tensor}) in file order; checks the layout."""
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    assert n % 8 == 0, "header length not a multiple of 8"
    header = json.loads(raw[8:8 + n].decode("utf-8"))
    data = raw[8 + n:]
    meta = header.pop("__metadata__", {})
    tensors, expect = {}, 0
    for name, info in header.items():
        dt, fmt, size = FROM_CODE[info["dtype"]]
        begin, end = info["data_offsets"]
        count = math.prod(info["shape"])
        assert begin == expect and end - begin == count * size, f"{name}: bad offsets"
        values = struct.unpack(f"<{count}{fmt}", data[begin:end])
        tensors[name] = torch.tensor(values, dtype=dt).reshape(info["shape"])
        expect = end
    assert expect == len(data), "trailing bytes after the last tensor"
    return meta, tensors


# --------------------------------------------------------------------------
# Starting parameters.  Deliberately NOT the paper's near-identity init
# (std 0.02, tau = -4/beta, w = 0, b = 4): there every gate is ~0.98, the sink
# logit is 0 and attention is nearly uniform, so a broken mechanism would
# hardly change a number.  Here attention is sharp, gates span (0.1, 0.9),
# the sink logits differ per head, and LayerNorm affine terms are not trivial.
# --------------------------------------------------------------------------
def init_params(cfg):
    C, d = cfg.n_embd, cfg.head_dim
    normal = lambda shape, std: torch.randn(shape) * std
    uniform = lambda shape, lo, hi: lo + (hi - lo) * torch.rand(shape)
    params = {}
    for name, shape, _ in twin.param_specs(cfg):
        if name in ("wte", "wpe"):
            t = normal(shape, 0.3)
        elif name == "sink_token":
            t = normal(shape, 0.5)
        elif name.endswith(".weight") and "ln" in name:
            t = 1.0 + normal(shape, 0.2)
        elif name.endswith(".bias"):
            t = normal(shape, 0.2)
        elif name.endswith("c_attn.weight"):
            # q.k/sqrt(d) has std ~ std^2 * C: 1.4/sqrt(C) on the q and k
            # rows gives logits of std ~2, so routing is far from uniform.
            # The v rows are smaller (1/sqrt(C), read norms r ~ 1) so
            # that r varies by ~0.2 over a head's reads: through the beta = 8
            # norm gate that spans (0.1, 0.9) without saturating.
            t = normal(shape, 1.4 / math.sqrt(C))
            t[2 * C:] *= 1.0 / 1.4
        elif name.endswith("mlp.c_fc.weight"):
            t = normal(shape, 1.0 / math.sqrt(shape[1]))
        elif name.endswith("c_proj.weight"):
            t = normal(shape, 0.5 / math.sqrt(shape[1]))
        elif name.endswith("sink_logit"):
            t = uniform(shape, -1.5, 1.5)
        elif name.endswith("gate_tau"):
            t = torch.zeros(shape)                 # set by calibrate()
        elif name.endswith("gate_w"):
            t = normal(shape, 1.0 / math.sqrt(d))  # rescaled by calibrate()
        elif name.endswith("gate_b"):
            t = uniform(shape, -0.5, 0.5)
        else:
            raise KeyError(name)
        params[name] = t
    return params


def calibrate(params, cfg, idx):
    """Place each head's gate where the reads on this batch actually are.

    Norm gate: tau_h = median over the batch of r = ||v|| / sqrt(d), so half
    the reads are attenuated below 0.5 and the sharp beta = 8 sigmoid spreads
    the rest.  Projection gate: w_h is rescaled so that w_h . v has standard
    deviation PROJ_GATE_STD over the batch, and b_h (drawn U(-0.5, 0.5)) is
    shifted by minus the batch mean of w_h . v, so the gates are centred.  Layer l's reads depend on the
    gates of the layers below it, so the layers are set in order, one forward
    pass each."""
    arm = cfg.spec
    if arm.gate == "none":
        return
    for l in range(cfg.n_layer):
        recs = []
        twin.forward(params, cfg, idx, recs)
        v = recs[l]["v"]                                              # [B,H,S,d]
        a = f"h.{l}.attn."
        if arm.gate == "norm":
            r = torch.linalg.vector_norm(v, dim=-1) / math.sqrt(cfg.head_dim)
            params[a + "gate_tau"] = r.transpose(0, 1).reshape(cfg.n_head, -1).median(dim=1).values
        else:
            wv = torch.einsum("bhsd,hd->hbs", v, params[a + "gate_w"]).reshape(cfg.n_head, -1)
            scale = PROJ_GATE_STD / wv.std(dim=1)
            params[a + "gate_w"] = params[a + "gate_w"] * scale[:, None]
            params[a + "gate_b"] = params[a + "gate_b"] - scale * wv.mean(dim=1)


def gate_spread(params, cfg, idx):
    """[(layer, head, min g, max g)] over the batch, or [] for ungated arms."""
    if cfg.spec.gate == "none":
        return []
    recs = []
    twin.forward(params, cfg, idx, recs)
    out = []
    for l, rec in enumerate(recs):
        g = rec["g"]                                                  # [B,H,S]
        for h in range(cfg.n_head):
            out.append((l, h, g[:, h].min().item(), g[:, h].max().item()))
    return out


# --------------------------------------------------------------------------
# Self-check
# --------------------------------------------------------------------------
def tiny_config(arm, ln_bias=1):
    return ModelConfig(arm=arm, n_layer=2, n_head=2, n_embd=8, block_size=4,
                       vocab_size=7, ln_bias=ln_bias, gate_beta=8.0)


def tiny_model(arm, seed, ln_bias=1):
    torch.manual_seed(seed)
    cfg = tiny_config(arm, ln_bias)
    tokens = torch.randint(0, cfg.vocab_size, (2, cfg.block_size + 1), dtype=torch.int32)
    params = init_params(cfg)
    calibrate(params, cfg, tokens[:, :-1])
    return cfg, params, tokens


def self_check():
    # Building blocks against torch's own.
    torch.manual_seed(0)
    x, w, b = torch.randn(5, 8), torch.randn(8), torch.randn(8)
    assert torch.allclose(twin.layer_norm(x, w, b), F.layer_norm(x, (8,), w, b, eps=twin.LN_EPS),
                          atol=1e-14, rtol=0)
    assert torch.allclose(twin.gelu(x), F.gelu(x, approximate="none"), atol=1e-15, rtol=0)

    # gradcheck of the loss for every arm (tiny model, ln_bias = 1 so every
    # parameter kind is present).
    for i, arm in enumerate(twin.ARMS):
        cfg, params, tokens = tiny_model(arm, 1000 + i)
        names = list(params)

        def loss_of(*ts):
            return twin.loss_fn(dict(zip(names, ts)), cfg, tokens)[0]

        inputs = tuple(params[n].clone().requires_grad_(True) for n in names)
        assert torch.autograd.gradcheck(loss_of, inputs, eps=1e-6, atol=1e-7, rtol=1e-5), arm
    print(f"self-check: gradcheck of the loss passed for all {len(twin.ARMS)} arms")

    # Off-by-one is the sink logit with b_h = 0: identical logits.
    cfg_s, params_s, tokens = tiny_model("sinklogit", 2000)
    for n in params_s:
        if n.endswith("sink_logit"):
            params_s[n] = torch.zeros_like(params_s[n])
    params_o = {n: t for n, t in params_s.items() if not n.endswith("sink_logit")}
    cfg_o = tiny_config("offbyone")
    lo, ls = twin.forward(params_o, cfg_o, tokens[:, :-1]), twin.forward(params_s, cfg_s, tokens[:, :-1])
    diff_ob = (lo - ls).abs().max().item()
    assert diff_ob <= 1e-14, diff_ob

    # The augmented-coordinate phantom (Appendix A) against gpt-oss's form:
    # append b_h as an extra column of the masked score row, softmax, drop it.
    B, H, S, d = 2, 3, 5, 4
    q, k, v, bh = torch.randn(B, H, S, d), torch.randn(B, H, S, d), torch.randn(B, H, S, d), torch.randn(H)
    s = (q @ k.transpose(-1, -2)) / math.sqrt(d)
    s = s.masked_fill(~torch.ones(S, S).tril().bool(), float("-inf"))
    s = torch.cat([s, bh.reshape(1, H, 1, 1).expand(B, H, S, 1)], dim=-1)
    y_oss = torch.softmax(s, dim=-1)[..., :S] @ v
    y_aug, _ = twin.causal_attention(q, k, v, phantom_logit=bh)
    diff_oss = (y_oss - y_aug).abs().max().item()
    assert diff_oss <= 1e-13, diff_oss

    # Lemma 3.1 on one head of a real model: the norm gate (value slot) and
    # the renorm control (routing slot) with the same parameters.  In layer 0
    # they see identical inputs, and the value-slot output must be Z_i times
    # the routing-slot output, Z_i = sum_j a_ij g_j with a the ungated routing
    # (which the value slot leaves unchanged).
    cfg_n, params_n, tokens = tiny_model("normgate", 3000)
    cfg_r = tiny_config("renorm")
    rec_n, rec_r = [], []
    twin.forward(params_n, cfg_n, tokens[:, :-1], rec_n)
    twin.forward(params_n, cfg_r, tokens[:, :-1], rec_r)
    h = 1
    a, g = rec_n[0]["a"][:, h], rec_n[0]["g"][:, h]                  # [B,S,S], [B,S]
    Z = (a * g[:, None, :]).sum(-1)                                   # [B,S]
    y_val, y_rout = rec_n[0]["y"][:, h], rec_r[0]["y"][:, h]
    diff_lemma = (y_val - Z[..., None] * y_rout).abs().max().item()
    assert diff_lemma <= 1e-13, diff_lemma
    # ... and the renormalised routing is a*g/Z, a probability vector.
    a_t = rec_r[0]["a"][:, h]
    assert (a_t - a * g[:, None, :] / Z[..., None]).abs().max().item() <= 1e-13
    assert (a_t.sum(-1) - 1).abs().max().item() <= 1e-13
    assert 0 < Z.min().item() and Z.max().item() < 1
    print(f"self-check: offbyone == sinklogit(b=0) (max diff {diff_ob:.1e}); "
          f"phantom == gpt-oss form ({diff_oss:.1e}); Lemma 3.1 ({diff_lemma:.1e}, "
          f"Z in [{Z.min().item():.3f}, {Z.max().item():.3f}])")


# --------------------------------------------------------------------------
# One fixture
# --------------------------------------------------------------------------
def make_case(case, arm, ln_bias, seed, outdir):
    torch.manual_seed(seed)
    cfg = ModelConfig(arm=arm, ln_bias=ln_bias, **MODEL)
    T, V = cfg.block_size, cfg.vocab_size

    tokens = torch.randint(0, V, (BATCH, T + 1), dtype=torch.int32)
    train_tokens = torch.randint(0, V, (TRAIN.iters, BATCH, T + 1), dtype=torch.int32)
    params = init_params(cfg)
    calibrate(params, cfg, tokens[:, :-1])

    spread = gate_spread(params, cfg, tokens[:, :-1])
    for l, h, gmin, gmax in spread:
        assert gmin < HEAD_LO and gmax > HEAD_HI, \
            f"{case}: layer {l} head {h} gates span only [{gmin:.3f}, {gmax:.3f}]"
    if spread:
        assert min(s[2] for s in spread) < CASE_LO and max(s[3] for s in spread) > CASE_HI, case

    logits, loss, grads = twin.forward_backward(params, cfg, tokens)
    losses, norms, final = twin.train(params, cfg, TRAIN, train_tokens)

    tensors = {}
    for n in params:
        tensors["param." + n] = params[n]
    tensors["tokens"] = tokens
    tensors["logits"] = logits
    tensors["loss"] = loss.reshape(1)
    for n in params:
        tensors["grad." + n] = grads[n]
    tensors["train.tokens"] = train_tokens
    tensors["train.losses"] = losses
    tensors["train.gradnorm"] = norms
    for n in params:
        tensors["train.final." + n] = final[n]

    meta = {"format": "sinkgate-twin-fixture-1", "case": case, "arm": arm, "ln_bias": ln_bias,
            **{k: v for k, v in MODEL.items()}, "B": BATCH, "seed": seed,
            **{k: getattr(TRAIN, k) for k in TRAIN.__dataclass_fields__}}
    path = os.path.join(outdir, case + ".safetensors")
    write_safetensors(path, tensors, meta)

    # Read back and compare bit for bit.
    meta_back, back = read_safetensors(path)
    assert meta_back == {k: str(v) for k, v in meta.items()}
    assert list(back) == list(tensors)
    for n, t in tensors.items():
        assert back[n].dtype == t.dtype and torch.equal(back[n], t), n

    g = (f" gates {min(s[2] for s in spread):.3f}..{max(s[3] for s in spread):.3f}"
         if spread else "")
    print(f"{case:16s} loss {loss.item():.4f} |grad| {norms[0].item():.3f} "
          f"train {losses[0].item():.4f}->{losses[-1].item():.4f}{g} "
          f"{len(tensors)} tensors {os.path.getsize(path)} B")
    return spread


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: make_fixtures.py OUTDIR")
    outdir = sys.argv[1]
    os.makedirs(outdir, exist_ok=True)
    self_check()
    for case, arm, ln_bias, seed in CASES:
        spread = make_case(case, arm, ln_bias, seed, outdir)
        for l, h, gmin, gmax in spread:
            print(f"    layer {l} head {h}: gate min {gmin:.3f} max {gmax:.3f}")


if __name__ == "__main__":
    main()
