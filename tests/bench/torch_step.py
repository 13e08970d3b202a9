#!/usr/bin/env python3
"""PyTorch baseline for the CPU and GPU benchmarks: training-step throughput
of the sinkgate model written the way a PyTorch user would write it (and the
way the paper trained it), for comparison with the C trainer.

    python3 tests/bench/torch_step.py --arms baseline,combo2 --shape cpu-tiny \
        --micro-batch 8 --steps 10 --warmup-steps 3 --threads 2 --json out.json
    python3 tests/bench/torch_step.py --device cuda --shape 124M --micro-batch 8 \
        --arms baseline,combo2 --json out.json
    python3 tests/bench/torch_step.py --selfcheck

What is measured, per arm: K untimed warmup steps (the first one includes the
torch.compile compilation), then N timed full training steps, each
    zero_grad -> forward -> cross-entropy loss -> backward
    -> clip_grad_norm_(1.0) -> AdamW step,
timed with time.perf_counter.  tokens/s = N * B * T / elapsed.

The model (GPT-2 style, pre-norm, no linear biases, no LayerNorm bias, tied
embedding, exact GELU, learned positions) is the one of tests/twin/twin.py,
with the same parameter names and the weight-decay split of
twin.param_specs; the initialisation is the paper's (N(0, 0.02), output
projections N(0, 0.02/sqrt(2L)), sink logit 0, tau = -4/beta, gate w = 0,
gate b = 4).  Unlike the twin, it is float32 (there is no autocast on the
CPU) and attention goes through F.scaled_dot_product_attention, built as
Appendix A of the paper describes:

  * phantom arms (offbyone, sinklogit, combo, combo2): an extra key/value
    column at position 0, value 0, kept visible to every query by an explicit
    boolean attn_mask [T, T+1] (is_causal would hide it);
  * learned sink logit (sinklogit, combo, combo2) and the routing-slot control
    (renorm): the head dimension is augmented.  The query gets a constant
    coordinate sqrt(d); the phantom key holds b_h in that coordinate and the
    real keys 0 (renorm: log g_j).  The augmented dimension is zero-padded to
    a multiple of 8; the values are zero-padded to the same width, so that
    the fused CPU kernel accepts them, and the output is cut back to d.  The
    scale is 1/sqrt(d) of the un-augmented d, passed explicitly;
  * off-by-one: the phantom key is the zero vector (logit 0), no augmentation;
  * the gates (read norms, sigmoids, log g) are computed in at least float32.

--device cuda (tests/gpu/bench.sh): the same model and step on the GPU, the
paper's way: float32 master weights, the forward under
torch.autocast("cuda", dtype=torch.bfloat16) (the matmuls and the attention
in bf16; LayerNorm, the loss and the gates in float32), fused AdamW (float32
state), torch.compile, the SDPA formulation above (SDPA picks the fused
kernel: is_causal for the arms without a phantom, an explicit mask with
it).  Timing: torch.cuda.synchronize() before and after the N timed
steps, none in between; per-step times come from CUDA events.
--compile-scope blocks compiles the embedding, one transformer block (the
same code serves every layer) and the head + loss as separate regions
instead of the whole model in one graph: the same kernels, a fraction of
the compile time (the GPU benchmark's time budget); the default, model, is
one fullgraph compile of the whole model.

--selfcheck: float64, the cpu-tiny shape, a batch of 2, non-trivial
parameters (tests/twin/make_fixtures.py's init_params + calibrate); the loss
at those parameters must equal twin.py's within 1e-10 for every arm checked
(and the gradients must agree to 1e-9 relative).
"""

import argparse
import json
import math
import os
import platform
import signal
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
TWIN_DIR = os.path.join(HERE, "..", "twin")
sys.path.insert(0, TWIN_DIR)
_default_dtype = torch.get_default_dtype()
import twin  # noqa: E402  (sets the default dtype to float64 on import)
torch.set_default_dtype(_default_dtype)

ARM_NAMES = list(twin.ARMS)          # baseline offbyone ... combo2 (Table 4 order)
SELFCHECK_ARMS = ["baseline", "sinklogit", "renorm", "combo2"]

SHAPES = {
    "cpu-tiny": dict(n_layer=4, n_head=4, n_embd=128, block_size=128, vocab_size=50257),
    "10M":      dict(n_layer=6, n_head=6, n_embd=384, block_size=512, vocab_size=50257),
    "124M":     dict(n_layer=12, n_head=12, n_embd=768, block_size=1024, vocab_size=50257),
    "350M":     dict(n_layer=24, n_head=16, n_embd=1024, block_size=1024, vocab_size=50257),
}

# The paper's optimisation settings (Appendix A).  The schedule does not
# matter for speed; the lr is held at its peak.
LR, BETAS, EPS, WEIGHT_DECAY, GRAD_CLIP = 6e-4, (0.9, 0.95), 1e-8, 0.1, 1.0
INIT_STD = 0.02
GATE_BETA = 8.0
LN_EPS = twin.LN_EPS
COMPILE_LIMIT_S = 120.0


def round_up(n, m):
    return (n + m - 1) // m * m


# --------------------------------------------------------------------------
# Model.  Module paths give exactly the twin's / C export's parameter names
# (wte, wpe, sink_token, h.<l>.ln_1.weight, h.<l>.attn.c_attn.weight, ...).
# --------------------------------------------------------------------------
class LayerNorm(nn.Module):
    def __init__(self, C):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(C))

    def forward(self, x):
        return F.layer_norm(x, (x.shape[-1],), self.weight, None, LN_EPS)


def attention_core(q, k, v, augment, phantom, D, sink_logit, key_bias, mask):
    """Appendix A's SDPA formulation of one arm's attention: q, k, v [B,H,S,d]
    (v already gated), the arm's learned sink logit [H] or None, the
    routing-slot log-biases [B,H,S] or None, and for the phantom arms the
    boolean mask [S, S+1]; returns [B,H,S,d].  tests/bench/torch_attention.py
    times this function alone."""
    B, H, S, d = q.shape
    if augment:
        pad = D - d - 1
        q = torch.cat([q, q.new_full((B, H, S, 1), math.sqrt(d)),
                       q.new_zeros(B, H, S, pad)], dim=-1)
        kb = key_bias[..., None] if key_bias is not None else k.new_zeros(B, H, S, 1)
        k = torch.cat([k, kb, k.new_zeros(B, H, S, pad)], dim=-1)
        v = F.pad(v, (0, D - d))            # same width as q/k: fused kernel
    if phantom:
        if sink_logit is not None:           # b_h in coordinate d, 0 elsewhere
            ph = F.pad(sink_logit.to(k.dtype).view(H, 1), (d, D - d - 1))
        else:                                # off-by-one: zero key, logit 0
            ph = k.new_zeros(H, D)
        k = torch.cat([ph.view(1, H, 1, D).expand(B, H, 1, D), k], dim=2)
        v = torch.cat([v.new_zeros(B, H, 1, v.shape[-1]), v], dim=2)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=1.0 / math.sqrt(d))
    else:
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=1.0 / math.sqrt(d))
    return y[..., :d] if y.shape[-1] != d else y


class Attention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        C, H, d, T = cfg.n_embd, cfg.n_head, cfg.head_dim, cfg.block_size
        arm = cfg.spec
        self.H, self.d, self.beta = H, d, cfg.gate_beta
        self.zero, self.gate, self.slot = arm.zero, arm.gate, arm.slot
        self.c_attn = nn.Linear(C, 3 * C, bias=False)       # rows q | k | v
        if arm.zero == "phantom_learned":
            self.sink_logit = nn.Parameter(torch.zeros(H))
        if arm.gate == "norm":
            self.gate_tau = nn.Parameter(torch.full((H,), -4.0 / cfg.gate_beta))
        if arm.gate == "proj":
            self.gate_w = nn.Parameter(torch.zeros(H, d))
            self.gate_b = nn.Parameter(torch.full((H,), 4.0))
        self.c_proj = nn.Linear(C, C, bias=False)
        self.phantom = arm.zero in ("phantom_fixed", "phantom_learned")
        # Augment the head dimension for a learned phantom logit or a per-key
        # additive logit (renorm); pad to a multiple of 8 (Appendix A).
        self.augment = arm.zero == "phantom_learned" or arm.slot == "routing"
        self.D = round_up(d + 1, 8) if self.augment else d
        if self.phantom:
            # Column 0 is the phantom (always visible); column j+1 is key j,
            # visible to query i iff j <= i.
            self.register_buffer("mask", torch.ones(T, T + 1, dtype=torch.bool).tril(1),
                                 persistent=False)

    def forward(self, x):
        B, S, C = x.shape
        H, d = self.H, self.d
        q, k, v = self.c_attn(x).view(B, S, 3, H, d).permute(2, 0, 3, 1, 4).unbind(0)  # [B,H,S,d]

        key_bias = None
        if self.gate != "none":
            gdt = torch.promote_types(v.dtype, torch.float32)          # gates in >= fp32
            vg = v.to(gdt)
            # (under --device cuda's autocast the einsum would run in bf16)
            with torch.autocast(vg.device.type, enabled=False):
                if self.gate == "norm":                                 # Eq. 3
                    r = torch.linalg.vector_norm(vg, dim=-1) / math.sqrt(d)
                    z = self.beta * (r - self.gate_tau.to(gdt)[None, :, None])
                else:                                                   # Eq. 4
                    z = torch.einsum("bhsd,hd->bhs", vg, self.gate_w.to(gdt)) \
                        + self.gate_b.to(gdt)[None, :, None]
            if self.slot == "value":
                v = v * torch.sigmoid(z).to(v.dtype)[..., None]
            else:
                key_bias = F.logsigmoid(z).to(v.dtype)                  # log g_j

        y = attention_core(q, k, v, self.augment, self.phantom, self.D,
                           self.sink_logit if self.zero == "phantom_learned" else None,
                           key_bias, self.mask[:S, :S + 1] if self.phantom else None)
        return self.c_proj(y.transpose(1, 2).reshape(B, S, C))


class MLP(nn.Module):
    def __init__(self, C):
        super().__init__()
        self.c_fc = nn.Linear(C, 4 * C, bias=False)
        self.c_proj = nn.Linear(4 * C, C, bias=False)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x)))       # exact (erf) GELU, as the twin


class Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.ln_1 = LayerNorm(cfg.n_embd)
        self.attn = Attention(cfg)
        self.ln_2 = LayerNorm(cfg.n_embd)
        self.mlp = MLP(cfg.n_embd)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        C = cfg.n_embd
        self.cfg = cfg
        self.wte = nn.Parameter(torch.empty(cfg.vocab_size, C))
        self.wpe = nn.Parameter(torch.empty(cfg.block_size, C))
        self.sink = cfg.spec.zero == "token"
        if self.sink:
            self.sink_token = nn.Parameter(torch.empty(C))
        self.h = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.ln_f = LayerNorm(C)
        self.reset_parameters()

    @torch.no_grad()
    def reset_parameters(self):
        """The paper's init (as src/model.c model_init), drawn from torch's RNG."""
        std_out = INIT_STD / math.sqrt(2 * self.cfg.n_layer)
        for name, p in self.named_parameters():
            if name in ("wte", "wpe", "sink_token") or name.endswith("c_attn.weight") \
                    or name.endswith("c_fc.weight"):
                p.normal_(0.0, INIT_STD)
            elif name.endswith("c_proj.weight"):
                p.normal_(0.0, std_out)
        # LayerNorm weights (1), sink_logit (0), gate_tau (-4/beta), gate_w (0)
        # and gate_b (4) keep the values set in the constructors.

    # forward = embed -> blocks -> head_loss; the three are separate methods
    # so that --compile-scope blocks can compile each region on its own.
    def embed(self, idx):
        B, T = idx.shape
        x = self.wte[idx] + self.wpe[:T]
        if self.sink:   # learned token at position 0, no positional embedding
            x = torch.cat([self.sink_token.view(1, 1, -1).expand(B, 1, x.shape[-1]), x], dim=1)
        return x

    def head_loss(self, x, targets):
        if self.sink:
            x = x[:, 1:]
        logits = F.linear(self.ln_f(x), self.wte)                      # tied head
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.reshape(-1))

    def forward(self, idx, targets):
        x = self.embed(idx)
        for block in self.h:
            x = block(x)
        return self.head_loss(x, targets)


def model_config(arm, shape):
    return twin.ModelConfig(arm=arm, ln_bias=0, gate_beta=GATE_BETA, **SHAPES[shape])


def make_optimizer(model, device="cpu"):
    """AdamW, decay on the twin's decayed set (embeddings and linear matrices);
    on the GPU the fused (single-kernel) implementation."""
    decay = {n: dec for n, _, dec in twin.param_specs(model.cfg)}
    named = dict(model.named_parameters())
    assert set(decay) == set(named), (sorted(set(decay) ^ set(named)))
    for n, shape, _ in twin.param_specs(model.cfg):
        assert tuple(named[n].shape) == tuple(shape), n
    groups = [
        {"params": [p for n, p in named.items() if decay[n]], "weight_decay": WEIGHT_DECAY},
        {"params": [p for n, p in named.items() if not decay[n]], "weight_decay": 0.0},
    ]
    if device == "cuda":
        try:
            return torch.optim.AdamW(groups, lr=LR, betas=BETAS, eps=EPS, fused=True)
        except (RuntimeError, TypeError, ValueError):   # no fused AdamW in this build
            return torch.optim.AdamW(groups, lr=LR, betas=BETAS, eps=EPS, foreach=True)
    return torch.optim.AdamW(groups, lr=LR, betas=BETAS, eps=EPS, fused=False, foreach=True)


# --------------------------------------------------------------------------
# Benchmark
# --------------------------------------------------------------------------
def cpu_snapshot():
    """(busy CPU seconds of the whole machine, CPU seconds of this process),
    or None where /proc/stat is missing.  Their difference over the timed steps
    is the CPU time taken by other processes, which skews the figures on a
    shared machine."""
    try:
        with open("/proc/stat") as f:
            ticks = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    busy = sum(ticks[:8]) - ticks[3] - ticks[4]          # minus idle, iowait
    t = os.times()
    return busy / os.sysconf("SC_CLK_TCK"), t.user + t.system


class CompileTimeout(Exception):
    pass


_alarm = {"fired": False}


def _on_alarm(signum, frame):
    _alarm["fired"] = True      # torch may wrap the exception (InductorError)
    raise CompileTimeout()


def compile_regions(model):
    """--compile-scope blocks: the embedding, each block and the head + loss
    as separate compiled regions.  The blocks share one code object (their
    parameters are graph inputs, torch._dynamo.config.inline_inbuilt_nn_modules),
    so one compilation serves every layer."""
    model.embed = torch.compile(model.embed, fullgraph=True)
    for block in model.h:
        block.compile(fullgraph=True)
    model.head_loss = torch.compile(model.head_loss, fullgraph=True)
    return model


def bench_arm(arm, args, use_compile, seed=1234):
    cfg = model_config(arm, args.shape)
    cuda = args.device == "cuda"
    dev = torch.device(args.device)
    torch.manual_seed(seed)
    model = GPT(cfg).to(dev)            # built in float32 on the CPU, as on the CPU path
    opt = make_optimizer(model, args.device)
    params = list(model.parameters())
    if use_compile:
        # A fresh dynamo state per arm: every arm compiles the same GPT.forward
        # code object, and past the recompile limit (8) dynamo would silently
        # run it eagerly.  fullgraph: a graph break is an error, not half-eager.
        torch._dynamo.reset()
        if args.compile_scope == "blocks":
            fwd = compile_regions(model)
        else:
            fwd = torch.compile(model, fullgraph=True)
    else:
        fwd = model

    B, T, V = args.micro_batch, cfg.block_size, cfg.vocab_size
    n_batches = max(1, min(args.steps + args.warmup_steps, 16))
    g = torch.Generator().manual_seed(seed)
    batches = torch.randint(0, V, (n_batches, B, T + 1), generator=g).to(dev)

    def step(s):
        tok = batches[s % n_batches]
        opt.zero_grad(set_to_none=True)
        if cuda:        # bf16 autocast on the forward; backward outside, as usual
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = fwd(tok[:, :-1], tok[:, 1:])
        else:
            loss = fwd(tok[:, :-1], tok[:, 1:])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, GRAD_CLIP, foreach=True)
        opt.step()
        return loss.detach()

    def sync():
        if cuda:
            torch.cuda.synchronize()

    limit = args.compile_limit
    out = {"compiled": use_compile}
    losses = []
    t0 = time.perf_counter()
    for s in range(args.warmup_steps):
        if s == 0 and use_compile:
            _alarm["fired"] = False
            old = signal.signal(signal.SIGALRM, _on_alarm)
            signal.setitimer(signal.ITIMER_REAL, limit)
            try:
                losses.append(step(s))
                sync()
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
                signal.signal(signal.SIGALRM, old)
            out["first_step_s"] = time.perf_counter() - t0
            if _alarm["fired"] or out["first_step_s"] > limit:
                raise CompileTimeout()   # the alarm was swallowed somewhere
        else:
            losses.append(step(s))
    sync()
    out["warmup_s"] = time.perf_counter() - t0

    # The figure is N steps over one perf_counter window; the per-step times
    # (read at each step boundary, no extra synchronisation on the CPU) are
    # kept too, since a shared machine can be noisy.  On the GPU the window
    # starts and ends with a synchronisation, and the per-step times are
    # CUDA events recorded at the step boundaries (no host waits between
    # steps).
    cpu0 = cpu_snapshot()
    marks = [time.perf_counter()]
    events = [torch.cuda.Event(enable_timing=True) for _ in range(args.steps + 1)] if cuda else None
    if cuda:
        events[0].record()
    for s in range(args.warmup_steps, args.warmup_steps + args.steps):
        losses.append(step(s))
        if cuda:
            events[s - args.warmup_steps + 1].record()
        marks.append(time.perf_counter())
    sync()
    marks[-1] = time.perf_counter() if cuda else marks[-1]
    elapsed = marks[-1] - marks[0]
    cpu1 = cpu_snapshot()
    if cpu0 and cpu1:
        own = cpu1[1] - cpu0[1]
        other = max(0.0, (cpu1[0] - cpu0[0]) - own)
        out.update(cpu_util=own / elapsed,
                   other_cpu_frac=other / (elapsed * (os.cpu_count() or 1)))
    if cuda:
        step_ms = sorted(a.elapsed_time(b) for a, b in zip(events, events[1:]))
    else:
        step_ms = sorted(1e3 * (b - a) for a, b in zip(marks, marks[1:]))

    losses = [x.item() for x in losses]
    assert all(math.isfinite(x) for x in losses), (arm, losses)
    if args.profile_steps > 0:
        try:
            out.update(profile_steps(lambda i: step(args.warmup_steps + args.steps + i),
                                     args.profile_steps, cuda, sync))
        except Exception as e:     # a profiler that fails must not cost the timed figure
            out["profile_error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
    out.update(tokens_per_s=args.steps * B * T / elapsed,
               ms_per_step=1e3 * elapsed / args.steps,
               elapsed_s=elapsed,
               step_ms_min=step_ms[0], step_ms_median=step_ms[len(step_ms) // 2],
               n_params=sum(p.numel() for p in params),
               loss_first=losses[0], loss_last=losses[-1])
    if cuda:
        out["max_memory_gib"] = torch.cuda.max_memory_allocated() / 2**30
        torch.cuda.reset_peak_memory_stats()
    return out


# Kernel (GPU) or op (CPU) names -> bench_gpu's categories (src/profile.h),
# first match wins.  Inductor names a fused kernel after the ops it fuses
# (triton_red_fused_add_native_layer_norm_1), so a fused kernel counts in
# the category of the first op of the list it contains; the classifier's
# GEMMs are GEMMs like any other here and count as matmul, while ours count
# as classifier.
PROFILE_CATEGORIES = [
    ("optimizer", ("adam", "multi_tensor", "foreach", "clip_grad")),
    ("attention", ("flash", "fmha", "attention", "sdpa", "cudnn")),
    ("matmul", ("gemm", "nvjet", "cutlass", "xmma", "cublas", "aten::mm", "aten::addmm", "aten::bmm",
                "aten::linear", "splitk", "sm90_", "sm80_", "sm100_", "sm120_", "ampere_")),
    ("classifier", ("log_softmax", "nll_loss", "cross_entropy", "softmax")),
    ("layernorm", ("layer_norm",)),
    ("gate", ("sigmoid", "vector_norm", "einsum")),
    ("embed", ("embedding", "index_put", "aten::index", "_index_", "scatter", "gather")),
    ("pointwise", ("gelu", "erf", "add", "mul", "cat", "pad", "copy", "fill", "where", "clone", "sum")),
]


def profile_category(name):
    n = name.lower()
    for cat, keys in PROFILE_CATEGORIES:
        if any(k in n for k in keys):
            return cat
    return "other"


def profile_steps(run_step, n, cuda, sync):
    """n more steps under torch.profiler, after the timed ones: the device
    time of every kernel (CPU: the self time of every op), summed by
    bench_gpu's categories, per step; the busy total against the steps'
    wall time; and the 14 costliest kernels by name."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA if cuda else ProfilerActivity.CPU]) as prof:
        sync()
        t0 = time.perf_counter()
        for i in range(n):
            run_step(i)
        sync()
        wall = time.perf_counter() - t0
    per = {}
    for e in prof.key_averages():
        if cuda:
            if getattr(e, "device_type", None) != DeviceType.CUDA:
                continue
            us = getattr(e, "self_device_time_total", None)
            if us is None:
                us = getattr(e, "self_cuda_time_total", 0)
        else:
            us = e.self_cpu_time_total
        if us > 0:
            per[e.key] = per.get(e.key, 0.0) + us / 1e3 / n
    cats = {c: 0.0 for c, _ in PROFILE_CATEGORIES}
    cats["other"] = 0.0
    for name, ms in per.items():
        cats[profile_category(name)] += ms
    top = sorted(per.items(), key=lambda kv: -kv[1])[:14]
    return {"profile_ms": cats, "profile_busy_ms": sum(per.values()),
            "profile_wall_ms": 1e3 * wall / n, "profile_steps": n,
            "profile_top": [{"name": k[:160], "ms": v, "category": profile_category(k)} for k, v in top]}


def device_name(device):
    if device == "cuda":
        return torch.cuda.get_device_name()
    return platform.processor() or platform.machine() or "cpu"


def run_benchmark(args):
    torch.set_num_threads(args.threads)
    if args.device == "cuda" and not torch.cuda.is_available():
        print(f"no CUDA device visible to PyTorch {torch.__version__} "
              f"(built for CUDA {torch.version.cuda}): nothing to benchmark", file=sys.stderr)
        sys.exit(3)
    if args.compile_limit <= 0:
        sys.exit("--compile-limit must be > 0")
    if hasattr(torch._dynamo.config, "fail_on_recompile_limit_hit"):
        torch._dynamo.config.fail_on_recompile_limit_hit = True   # never silently eager
    arms = ARM_NAMES if args.arms == "all" else [a.strip() for a in args.arms.split(",") if a.strip()]
    arms = list(dict.fromkeys(arms))                    # drop repeats, keep order
    for a in arms:
        if a not in twin.ARMS:
            sys.exit(f"unknown arm {a!r}; known: {', '.join(ARM_NAMES)} or 'all'")
    if args.steps < 1 or args.micro_batch < 1:
        sys.exit("--steps and --micro-batch must be >= 1")
    if args.profile_steps < 0:
        sys.exit("--profile-steps must be >= 0")
    use_compile = not args.no_compile
    if use_compile and args.warmup_steps < 1:
        sys.exit("--warmup-steps must be >= 1 with torch.compile (the first step compiles)")
    notes = [] if use_compile else ["torch.compile disabled by --no-compile"]

    def write_json(results, notes, arms):
        """The whole document; rewritten after every arm, so that a run cut
        short (tests/gpu/bench.sh's timeouts) keeps the arms it finished."""
        if not args.json:
            return
        compiled = all(r["compiled"] for r in results.values())
        s = SHAPES[args.shape]
        cuda = args.device == "cuda"
        doc = {
            "torch_version": torch.__version__,
            "threads": args.threads,
            "compiled": compiled,
            "shape": args.shape,
            "micro_batch": args.micro_batch,
            "results": {a: {"tokens_per_s": r["tokens_per_s"], "ms_per_step": r["ms_per_step"],
                            "compiled": r["compiled"], "warmup_s": r["warmup_s"],
                            "step_ms_min": r["step_ms_min"], "step_ms_median": r["step_ms_median"],
                            "cpu_util": r.get("cpu_util"), "other_cpu_frac": r.get("other_cpu_frac"),
                            "first_step_s": r.get("first_step_s"), "n_params": r["n_params"],
                            "loss_first": r["loss_first"], "loss_last": r["loss_last"],
                            **{k: r[k] for k in ("profile_ms", "profile_busy_ms", "profile_wall_ms",
                                                 "profile_steps", "profile_top", "profile_error") if k in r},
                            **({"max_memory_gib": r["max_memory_gib"]} if "max_memory_gib" in r else {})}
                        for a, r in results.items()},
            "steps": args.steps,
            "warmup_steps": args.warmup_steps,
            "dtype": "bfloat16-autocast" if cuda else "float32",
            "block_size": s["block_size"],
            "shape_config": s,
            "device": args.device,
            "device_name": device_name(args.device),
            "compile_scope": args.compile_scope if compiled else None,
            "compile_limit_s": args.compile_limit,
            "notes": notes,
            "complete": len(results) == len(arms),
            "machine": {"cpu_count": os.cpu_count(), "platform": platform.platform(),
                        "python": platform.python_version(),
                        "loadavg_start": load_start, "loadavg_end": list(os.getloadavg())},
        }
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=2)
            f.write("\n")

    load_start = list(os.getloadavg())      # other work on the machine skews the figures
    results = {}
    for arm in arms:
        try:
            r = bench_arm(arm, args, use_compile)
        except Exception as e:       # compile failure or > COMPILE_LIMIT_S: go eager
            if not use_compile:
                raise
            why = (f"compile of the first step took > {args.compile_limit:.0f} s"
                   if isinstance(e, CompileTimeout) or _alarm["fired"] else
                   f"torch.compile failed: {type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}")
            note = f"{arm}: {why}; eager from here on"
            print("NOTE:", note, file=sys.stderr, flush=True)
            notes.append(note)
            torch._dynamo.reset()
            use_compile = False
            r = bench_arm(arm, args, use_compile)
        results[arm] = r
        print(f"  {arm:<10s} {'compiled' if r['compiled'] else 'eager':<8s} "
              f"{r['tokens_per_s']:10.1f} tok/s {r['ms_per_step']:10.2f} ms/step   "
              f"(warmup {r['warmup_s']:.1f} s, loss {r['loss_first']:.3f}->{r['loss_last']:.3f})",
              file=sys.stderr, flush=True)
        write_json(results, notes, arms)

    compiled = all(r["compiled"] for r in results.values())
    s = SHAPES[args.shape]
    cuda = args.device == "cuda"
    dtype = "bf16 autocast, fp32 master weights" if cuda else "float32"
    where = f"{device_name('cuda')}, " if cuda else f"{args.threads} thread(s), "
    how = "torch.compile" if compiled else "eager"
    if cuda and compiled and args.compile_scope != "model":
        how += f" ({args.compile_scope})"
    print(f"\nPyTorch {torch.__version__}, shape {args.shape} "
          f"(L{s['n_layer']} H{s['n_head']} C{s['n_embd']} T{s['block_size']} V{s['vocab_size']}), "
          f"micro-batch {args.micro_batch}, {where}{dtype}, "
          f"{how}, "
          f"{args.warmup_steps} warmup + {args.steps} timed steps")
    print(f"{'arm':<10s} {'mode':<8s} {'tokens/s':>12s} {'ms/step':>10s}"
          f" {'(min':>9s} {'median)':>9s} {'other CPU':>10s}")
    for arm, r in results.items():
        oc = r.get("other_cpu_frac")
        print(f"{arm:<10s} {'compiled' if r['compiled'] else 'eager':<8s} "
              f"{r['tokens_per_s']:12.1f} {r['ms_per_step']:10.2f}"
              f" {r['step_ms_min']:9.2f} {r['step_ms_median']:9.2f}"
              f" {'n/a' if oc is None else f'{100 * oc:.0f}%':>10s}")
        if oc is not None and oc > 0.10:
            notes.append(f"{arm}: other processes used {100 * oc:.0f}% of the machine's CPU "
                         f"during the timed steps; its figure is not reliable")
    for arm, r in results.items():
        if "profile_error" in r:
            notes.append(f"{arm}: the profiled steps failed: {r['profile_error']}")
        if "profile_ms" not in r:
            continue
        busy = r["profile_busy_ms"]
        print(f"{arm:<10s} profiled ({r['profile_steps']} steps, {'kernels' if cuda else 'ops'}): "
              f"{busy:.2f} ms busy of {r['profile_wall_ms']:.2f} ms a step:"
              + "".join(f" {c} {ms:.2f} ({100 * ms / busy:.0f}%)" for c, ms in r["profile_ms"].items() if ms > 0))
        for t in r["profile_top"]:
            print(f"{'':<10s} {t['ms']:8.3f} ms  {t['category']:<10s} {t['name'][:100]}")
    for n in notes:
        print("note:", n)

    write_json(results, notes, arms)


# --------------------------------------------------------------------------
# Self-check against the twin (float64)
# --------------------------------------------------------------------------
def selfcheck(args):
    torch.set_num_threads(args.threads)
    prev = torch.get_default_dtype()
    import make_fixtures  # noqa: E402  (twin dir; sets float64 default and 1 thread)
    torch.set_num_threads(args.threads)
    torch.set_default_dtype(torch.float64)
    arms = SELFCHECK_ARMS if args.arms in (None, "") else (
        ARM_NAMES if args.arms == "all" else [a.strip() for a in args.arms.split(",")])
    ok = True
    print(f"selfcheck: float64, shape {args.shape}, B 2, params from make_fixtures.init_params"
          f" + calibrate, {'torch.compile' if not args.no_compile else 'eager'}")
    for arm in arms:
        cfg = model_config(arm, args.shape)
        torch.manual_seed(500 + ARM_NAMES.index(arm))
        tokens = torch.randint(0, cfg.vocab_size, (2, cfg.block_size + 1))
        params = make_fixtures.init_params(cfg)
        make_fixtures.calibrate(params, cfg, tokens[:, :-1])
        _, loss_ref, grads_ref = twin.forward_backward(params, cfg, tokens)

        model = GPT(cfg).to(torch.float64)
        with torch.no_grad():
            for n, p in model.named_parameters():
                p.copy_(params[n])
        fwd = model if args.no_compile else torch.compile(model, fullgraph=True)
        loss = fwd(tokens[:, :-1], tokens[:, 1:])
        loss.backward()
        dl = abs(loss.item() - loss_ref.item())
        gscale = max(t.abs().max().item() for t in grads_ref.values())
        dg = max(((p.grad if p.grad is not None else torch.zeros_like(p)) - grads_ref[n])
                 .abs().max().item() for n, p in model.named_parameters())
        good = dl <= 1e-10 and dg <= 1e-9 * gscale
        ok &= good
        print(f"  {arm:<10s} loss {loss.item():.15f} twin {loss_ref.item():.15f} "
              f"|dloss| {dl:.1e}  max|dgrad| {dg:.1e} (max|grad| {gscale:.1e})  "
              f"{'ok' if good else 'FAIL'}", flush=True)
        torch._dynamo.reset()
    torch.set_default_dtype(prev)
    print("selfcheck", "passed" if ok else "FAILED")
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--arms", default=None,
                    help="comma-separated arms or 'all' (default: baseline,combo2; "
                         "with --selfcheck: " + ",".join(SELFCHECK_ARMS) + ")")
    ap.add_argument("--shape", choices=sorted(SHAPES), default="cpu-tiny")
    ap.add_argument("--micro-batch", type=int, default=8)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup-steps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--no-compile", action="store_true", help="eager mode only")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                    help="cpu (float32) or cuda (bf16 autocast, fused AdamW); default cpu")
    ap.add_argument("--compile-scope", choices=["model", "blocks"], default="model",
                    help="model: one fullgraph compile of the whole model (default); blocks: "
                         "the embedding, one block (shared by every layer) and the head "
                         "compiled as separate regions")
    ap.add_argument("--compile-limit", type=float, default=COMPILE_LIMIT_S, metavar="S",
                    help="seconds the first (compiling) step may take before the arm is "
                         f"rerun eagerly (default {COMPILE_LIMIT_S:.0f})")
    ap.add_argument("--profile-steps", type=int, default=0, metavar="N",
                    help="after the timed steps, N more under torch.profiler: device time by "
                         "category (bench_gpu's) and the costliest kernels (default 0: none)")
    ap.add_argument("--json", default=None, metavar="OUT.json")
    ap.add_argument("--selfcheck", action="store_true",
                    help="float64 loss/grad check against tests/twin/twin.py, then exit")
    args = ap.parse_args()
    if args.selfcheck:
        sys.exit(0 if selfcheck(args) else 1)
    if args.arms is None:
        args.arms = "baseline,combo2"
    run_benchmark(args)


if __name__ == "__main__":
    main()
