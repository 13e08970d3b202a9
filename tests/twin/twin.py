"""The PyTorch twin of sinkgate: a plain reference for the model and its arms.

The C trainer is tested against this file.  It is written to be *different*
from the trainer's kernels, so that the two cannot share a mistake:

  * attention builds the explicit T x T (or T x (T+1)) score matrix and calls
    an ordinary softmax, where the C kernel streams over key tiles with an
    online softmax and never materialises the matrix;
  * the phantom key of the off-by-one / sink-logit arms and the log-gate bias
    of the routing-slot control follow the paper's own implementation notes
    (Appendix A, "Implementation of the arms") literally: the query gets one
    extra coordinate equal to sqrt(d); each key carries its additive logit in
    that coordinate; the phantom is a real extra key/value column with its
    value fixed at zero and a mask that keeps it visible to every query;
  * every gradient comes from torch.autograd, never from hand-written
    backward formulas.

Everything is float64 on the CPU.  The model (GPT-2 style, pre-norm):

    x      = wte[tok] + wpe[pos]                 (sinktoken: a learned row first)
    x      = x + attn(ln_1(x))                   per layer
    x      = x + mlp(ln_2(x))
    logits = ln_f(x) @ wte^T                     (tied embedding)

No linear layer has a bias; LayerNorm has a bias only when ln_bias = 1.
"""

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

torch.set_default_dtype(torch.float64)

LN_EPS = 1e-5


# --------------------------------------------------------------------------
# Arms (Section 3.3, Table 4).  Each arm is described by what it supplies:
#   zero: "none"            rows of attention sum to one
#         "phantom_fixed"   phantom key with logit 0, value 0   (off-by-one)
#         "phantom_learned" phantom key with logit b_h, value 0 (sink logit)
#         "token"           a learned d_model token prepended   (sink token)
#   gate: "none" | "norm" (Eq. 3) | "proj" (Eq. 4)
#   slot: "value"   v_j <- g_j v_j after the gate
#         "routing" s_ij <- s_ij + log g_j, values untouched (renorm control)
# --------------------------------------------------------------------------
@dataclass(frozen=True)
class Arm:
    name: str
    zero: str
    gate: str
    slot: str


ARMS = {a.name: a for a in [
    Arm("baseline",  "none",            "none", "value"),
    Arm("offbyone",  "phantom_fixed",   "none", "value"),
    Arm("sinklogit", "phantom_learned", "none", "value"),
    Arm("sinktoken", "token",           "none", "value"),
    Arm("normgate",  "none",            "norm", "value"),
    Arm("renorm",    "none",            "norm", "routing"),
    Arm("projgate",  "none",            "proj", "value"),
    Arm("combo",     "phantom_learned", "norm", "value"),
    Arm("combo2",    "phantom_learned", "proj", "value"),
]}


@dataclass
class ModelConfig:
    arm: str
    n_layer: int
    n_head: int
    n_embd: int
    block_size: int   # T: the number of input positions (and rows of wpe)
    vocab_size: int   # V, unpadded
    ln_bias: int = 0
    gate_beta: float = 8.0

    @property
    def head_dim(self):
        return self.n_embd // self.n_head

    @property
    def spec(self):
        return ARMS[self.arm]


@dataclass
class TrainConfig:
    lr: float
    lr_min: float
    warmup: int
    iters: int
    beta1: float
    beta2: float
    adam_eps: float
    weight_decay: float
    grad_clip: float


# --------------------------------------------------------------------------
# Parameters: names, shapes and file order are the C trainer's export names.
# --------------------------------------------------------------------------
def param_specs(cfg):
    """[(name, shape, decayed)] in file order.

    Weight decay goes on the embeddings and the linear matrices only.  The
    LayerNorm parameters, the sink token, the sink logit and the gate
    parameters are not decayed: for the sink logit and the gates, decay would
    pull them toward zero, which has a mechanistic meaning (Appendix A).  Note
    that gate_w is a matrix and is still excluded, so the rule is by name,
    not by tensor rank."""
    C, H, d, V, T = cfg.n_embd, cfg.n_head, cfg.head_dim, cfg.vocab_size, cfg.block_size
    arm = cfg.spec
    specs = [("wte", (V, C), True), ("wpe", (T, C), True)]
    if arm.zero == "token":
        specs.append(("sink_token", (C,), False))
    for l in range(cfg.n_layer):
        p = f"h.{l}."
        specs.append((p + "ln_1.weight", (C,), False))
        if cfg.ln_bias:
            specs.append((p + "ln_1.bias", (C,), False))
        specs.append((p + "attn.c_attn.weight", (3 * C, C), True))
        if arm.zero == "phantom_learned":
            specs.append((p + "attn.sink_logit", (H,), False))
        if arm.gate == "norm":
            specs.append((p + "attn.gate_tau", (H,), False))
        if arm.gate == "proj":
            specs.append((p + "attn.gate_w", (H, d), False))
            specs.append((p + "attn.gate_b", (H,), False))
        specs.append((p + "attn.c_proj.weight", (C, C), True))
        specs.append((p + "ln_2.weight", (C,), False))
        if cfg.ln_bias:
            specs.append((p + "ln_2.bias", (C,), False))
        specs.append((p + "mlp.c_fc.weight", (4 * C, C), True))
        specs.append((p + "mlp.c_proj.weight", (C, 4 * C), True))
    specs.append(("ln_f.weight", (C,), False))
    if cfg.ln_bias:
        specs.append(("ln_f.bias", (C,), False))
    return specs


# --------------------------------------------------------------------------
# Building blocks
# --------------------------------------------------------------------------
def layer_norm(x, weight, bias):
    """(x - mean) / sqrt(var + eps) * weight + bias over the last dim, with the
    biased (1/C) variance, as torch.nn.LayerNorm."""
    mean = x.mean(dim=-1, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)
    y = (x - mean) / torch.sqrt(var + LN_EPS) * weight
    return y + bias if bias is not None else y


def gelu(x):
    """Exact GELU: 0.5 x (1 + erf(x / sqrt 2))."""
    return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))


def gate_logit(v, cfg, params, l):
    """The pre-sigmoid gate signal z with g = sigmoid(z), one per read.

    v: raw reads [B, H, S, d] (head slices of the value rows).
      norm gate (Eq. 3): z = beta (||v|| / sqrt(d) - tau_h)
      proj gate (Eq. 4): z = w_h . v + b_h
    """
    arm, d = cfg.spec, cfg.head_dim
    a = f"h.{l}.attn."
    if arm.gate == "norm":
        r = torch.linalg.vector_norm(v, dim=-1) / math.sqrt(d)          # [B,H,S]
        return cfg.gate_beta * (r - params[a + "gate_tau"][None, :, None])
    if arm.gate == "proj":
        wv = torch.einsum("bhsd,hd->bhs", v, params[a + "gate_w"])
        return wv + params[a + "gate_b"][None, :, None]
    raise ValueError("arm has no gate")


def causal_attention(q, k, v, phantom_logit=None, key_bias=None):
    """Causal attention over the explicit score matrix.

    q, k, v: [B, H, S, d].
    phantom_logit: None (no phantom) or [H]: the logit of a phantom key that
        sits at key column 0, has value exactly zero, and is visible to every
        query.  Off-by-one passes zeros, the sink-logit arms pass b_h.
    key_bias: None or [B, H, S]: an additive logit per key (log g_j for the
        routing-slot control).

    Appendix A's construction: augment the head dimension by one coordinate.
    Every query gets sqrt(d) there; every real key gets its bias (0 when
    there is none); the phantom key is the zero vector except b_h there.  With
    the scale fixed at 1/sqrt(d) (of the *un*augmented d):
        s_ij   = (q_i . k_j + sqrt(d) * bias_j) / sqrt(d) = q_i.k_j/sqrt(d) + bias_j
        s_i,ph = (0 + sqrt(d) * b_h) / sqrt(d)             = b_h
    so the phantom adds exp(b_h) to every row's softmax denominator (Miller's
    "+1" when b_h = 0), and, its value being zero, whatever mass lands on it
    is removed from the output.

    Returns (y [B, H, S, d], a [B, H, S, K]) where a is the full routing
    matrix, including the phantom column 0 when there is one (K = S + 1).
    """
    B, H, S, d = q.shape
    scale = 1.0 / math.sqrt(d)

    # --- augmented queries and keys ---
    q_aug = torch.cat([q, torch.full((B, H, S, 1), math.sqrt(d))], dim=-1)
    bias = key_bias if key_bias is not None else torch.zeros(B, H, S)
    k_aug = torch.cat([k, bias[..., None]], dim=-1)                   # [B,H,S,d+1]
    v_all = v
    if phantom_logit is not None:
        k_ph = torch.cat([torch.zeros(B, H, 1, d),
                          phantom_logit.reshape(1, H, 1, 1).expand(B, H, 1, 1)], dim=-1)
        k_aug = torch.cat([k_ph, k_aug], dim=2)                        # [B,H,S+1,d+1]
        v_all = torch.cat([torch.zeros(B, H, 1, d), v], dim=2)         # phantom value 0

    # --- explicit scores and mask ---
    scores = (q_aug @ k_aug.transpose(-1, -2)) * scale                 # [B,H,S,K]
    visible = torch.ones(S, S).tril().bool()                           # key j <= query i
    if phantom_logit is not None:
        visible = torch.cat([torch.ones(S, 1).bool(), visible], dim=1)  # phantom: always
    scores = scores.masked_fill(~visible, float("-inf"))

    a = torch.softmax(scores, dim=-1)
    return a @ v_all, a


def attention_block(x, params, cfg, l, rec=None):
    """Multi-head causal self-attention of layer l with the arm's mechanisms.

    c_attn [3C, C]: rows 0..C-1 make q, C..2C-1 make k, 2C..3C-1 make v; head
    h uses columns h*d..(h+1)*d-1 of each."""
    B, S, C = x.shape
    H, d = cfg.n_head, cfg.head_dim
    arm = cfg.spec
    a = f"h.{l}.attn."

    qkv = x @ params[a + "c_attn.weight"].T                            # [B,S,3C]
    q, k, v = qkv.split(C, dim=-1)
    heads = lambda t: t.reshape(B, S, H, d).transpose(1, 2)            # [B,H,S,d]
    q, k, v = heads(q), heads(k), heads(v)
    if rec is not None:
        rec["v"] = v.detach().clone()

    # Gate (value slot: scale the read; routing slot: bias its logit by log g).
    key_bias = None
    if arm.gate != "none":
        z = gate_logit(v, cfg, params, l)                              # [B,H,S]
        g = torch.sigmoid(z)
        if rec is not None:
            rec["g"] = g.detach().clone()
        if arm.slot == "value":
            v = g[..., None] * v
        else:
            key_bias = F.logsigmoid(z)    # log g = -softplus(-z), finite for any z

    # Zero option by phantom key.
    phantom = None
    if arm.zero == "phantom_fixed":
        phantom = torch.zeros(H)
    elif arm.zero == "phantom_learned":
        phantom = params[a + "sink_logit"]

    y, att = causal_attention(q, k, v, phantom_logit=phantom, key_bias=key_bias)
    if rec is not None:
        rec["a"] = att.detach().clone()
        rec["y"] = y.detach().clone()

    y = y.transpose(1, 2).reshape(B, S, C)                             # concat heads
    return y @ params[a + "c_proj.weight"].T


def mlp_block(x, params, l):
    m = f"h.{l}.mlp."
    return gelu(x @ params[m + "c_fc.weight"].T) @ params[m + "c_proj.weight"].T


def forward(params, cfg, idx, records=None):
    """Logits [B, T, V] for input tokens idx [B, T] (any integer dtype).

    records: optional list; one dict per layer is appended holding the raw
    reads v, the gates g, the routing matrix a (incl. phantom column) and the
    head outputs y, all [B, H, ...] (for calibration and the self-checks)."""
    B, T = idx.shape
    assert T <= cfg.block_size
    idx = idx.long()
    get = lambda n: params.get(n)          # absent biases -> None

    x = params["wte"][idx] + params["wpe"][:T][None]                   # [B,T,C]
    if cfg.spec.zero == "token":
        # The sink token is position 0 of every sequence, without a positional
        # embedding; the real tokens keep positions 0..T-1.  Attention then
        # runs causally over T+1 positions, so every query sees the sink.
        sink = params["sink_token"].reshape(1, 1, -1).expand(B, 1, cfg.n_embd)
        x = torch.cat([sink, x], dim=1)                                # [B,T+1,C]

    for l in range(cfg.n_layer):
        p = f"h.{l}."
        rec = {} if records is not None else None
        x = x + attention_block(layer_norm(x, params[p + "ln_1.weight"], get(p + "ln_1.bias")),
                                params, cfg, l, rec)
        x = x + mlp_block(layer_norm(x, params[p + "ln_2.weight"], get(p + "ln_2.bias")),
                          params, l)
        if records is not None:
            records.append(rec)

    if cfg.spec.zero == "token":
        x = x[:, 1:]                       # drop the sink's output position
    x = layer_norm(x, params["ln_f.weight"], get("ln_f.bias"))
    return x @ params["wte"].T                                         # tied head


def loss_fn(params, cfg, tokens):
    """Mean cross-entropy over all B*T positions; tokens [B, T+1]:
    inputs tokens[:, :-1], targets tokens[:, 1:].  Returns (loss, logits)."""
    logits = forward(params, cfg, tokens[:, :-1])
    V = logits.shape[-1]
    loss = F.cross_entropy(logits.reshape(-1, V), tokens[:, 1:].reshape(-1).long())
    return loss, logits


def forward_backward(params, cfg, tokens):
    """One forward and backward at the given parameters (left untouched).
    Returns (logits, loss, {name: grad})."""
    leaves = {n: t.detach().clone().requires_grad_(True) for n, t in params.items()}
    loss, logits = loss_fn(leaves, cfg, tokens)
    loss.backward()
    return logits.detach(), loss.detach(), {n: t.grad.detach() for n, t in leaves.items()}


# --------------------------------------------------------------------------
# Training: torch.optim.AdamW with two groups, global-norm clipping, warmup
# plus cosine schedule.
# --------------------------------------------------------------------------
def lr_at(step, tc):
    """Learning rate set before 0-based step `step`: linear warmup to lr over
    `warmup` steps, then a cosine from lr down to lr_min at step iters-1."""
    if step < tc.warmup:
        return tc.lr * (step + 1) / tc.warmup
    progress = (step - tc.warmup) / max(1, tc.iters - 1 - tc.warmup)
    return tc.lr_min + 0.5 * (tc.lr - tc.lr_min) * (1.0 + math.cos(math.pi * progress))


def train(params, cfg, tc, batches):
    """Train from `params` on batches [steps, B, T+1], one batch per step.

    Per step s: set the lr, forward/backward, clip the global grad norm to
    grad_clip with torch.nn.utils.clip_grad_norm_ (whose factor is
    min(1, grad_clip / (norm + 1e-6))), then one AdamW step.
    Returns (losses [steps], grad norms before clipping [steps], final params)."""
    leaves = {n: t.detach().clone().requires_grad_(True) for n, t in params.items()}
    decay_of = {n: dec for n, _, dec in param_specs(cfg)}
    order = [n for n, _, _ in param_specs(cfg)]
    groups = [
        {"params": [leaves[n] for n in order if decay_of[n]], "weight_decay": tc.weight_decay},
        {"params": [leaves[n] for n in order if not decay_of[n]], "weight_decay": 0.0},
    ]
    opt = torch.optim.AdamW(groups, lr=tc.lr, betas=(tc.beta1, tc.beta2), eps=tc.adam_eps,
                            foreach=False)
    all_params = [leaves[n] for n in order]

    losses, norms = [], []
    for s in range(batches.shape[0]):
        for group in opt.param_groups:
            group["lr"] = lr_at(s, tc)
        opt.zero_grad(set_to_none=True)
        loss, _ = loss_fn(leaves, cfg, batches[s])
        loss.backward()
        gn = torch.nn.utils.clip_grad_norm_(all_params, tc.grad_clip, foreach=False)
        opt.step()
        losses.append(loss.item())
        norms.append(gn.item())
    final = {n: t.detach().clone() for n, t in leaves.items()}
    return torch.tensor(losses), torch.tensor(norms), final
