#!/usr/bin/env python3
"""PyTorch's attention alone, per arm, for comparison with bench_gpu's
attention rows (tests/gpu/bench.sh): what a researcher gets from
F.scaled_dot_product_attention with the paper's Appendix A formulation,
on the same shape, forward and backward.

    python3 tests/bench/torch_attention.py --device cuda --json out.json
    python3 tests/bench/torch_attention.py --device cpu --B 1 --T 128 --H 2 --d 16 --iters 2

What is timed is torch_step.attention_core, the function the benchmarked
model runs (so --selfcheck of torch_step.py covers its arithmetic): for a
phantom arm the augmented head dimension, the phantom key and value
concatenated, SDPA with the boolean mask [T, T+1]; for the others SDPA with
is_causal.  Its inputs are laid out as the model's: q, k and v are views of
one [B, T, 3C] projection output (bf16 on the GPU, as autocast leaves it;
float32 on the CPU), and v counts as already gated.  The backward takes a
random dy and produces dq, dk, dv and, where the arm has them, the sink
logit's and the log-biases' gradients.  torch.compile (fullgraph) is applied
as to the model, with eager as the fallback, which the output names.

The arms whose attention differs only in what feeds it share a core: the
gated arms' v is gated before the attention, so normgate and projgate run
the baseline's core, combo and combo2 the sink logit's, and the sink token
is the baseline's at T + 1 positions.  Each distinct core is timed once and
reported under every arm that runs it.

FLOP convention: bench_gpu's, with half = B H T (T + 1) / 2 d, forward 4 half
(two products over the causal half) and backward 10 half (five), so that the
TFLOP/s of both programs compare directly.  Times are CUDA events around
--iters calls after 3 warm-up calls (perf_counter on the CPU); the backward
is (forward + backward) - forward.

On the GPU each time is also taken a second way: the device's busy time
per call, the durations of the kernels (and copies) the call ran, summed
by torch.profiler over --iters more calls (torch_step.profile_steps).
Events around a loop of calls measure the host too wherever it falls
behind, and a compiled fwd+bwd of a few kernels a call can be host-bound;
the busy time is the rate of SDPA's kernels themselves, the fair figure to
set beside another program's kernels ("tflops_busy"; "busy_share" is its
share of the timed loop).

--backend holds SDPA to one of its kernels (flash: PyTorch's
FlashAttention-2; cudnn; efficient; math) where the default lets it
choose; an arm the kernel cannot run (flash takes no explicit mask, so not
the phantom arms) is reported as skipped, with SDPA's reason.  bench.sh runs
the baseline under flash as well, to set our kernels beside FlashAttention-2's
on the same GPU.

Which kernels SDPA chose is read from the profiler's CPU ops of one call
(aten::_scaled_dot_product_flash_attention, ..._efficient_attention,
..._cudnn_attention, the math fallback), so the figures say what they
measure."""

import argparse
import contextlib
import json
import os
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import torch_step  # noqa: E402  (the model's attention_core, the arms' table)

twin = torch_step.twin

# The distinct attention cores: (phantom, learned sink logit, routing bias,
# extra leading position) -> every arm that runs that core.
def core_of(arm):
    spec = twin.ARMS[arm]
    return (spec.zero in ("phantom_fixed", "phantom_learned"), spec.zero == "phantom_learned",
            spec.slot == "routing" and spec.gate != "none", spec.zero == "token")


def backend_of(fn):
    """The SDPA implementation fn() dispatched to, from the profiler's CPU ops."""
    from torch.profiler import ProfilerActivity, profile
    kinds = {"_scaled_dot_product_flash_attention_for_cpu": "flash (CPU)",
             "_scaled_dot_product_flash_attention": "flash",
             "_scaled_dot_product_efficient_attention": "memory-efficient",
             "_scaled_dot_product_cudnn_attention": "cuDNN",
             "_scaled_dot_product_fused_attention_overrideable": "fused (backend override)",
             "_scaled_dot_product_attention_math": "math (unfused)"}
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        fn()
    seen = []
    for e in prof.key_averages():
        name = e.key.split("::")[-1]
        if name in kinds and kinds[name] not in seen:
            seen.append(kinds[name])
    return ", ".join(seen) or "unknown"


def busy_ms(fn, n, cuda):
    """The device's busy time per call of fn, in ms: its kernels' own
    durations from torch.profiler, so a host that falls behind the GPU does
    not count.  None on the CPU, where there is no device to be idle."""
    if not cuda:
        return None
    return torch_step.profile_steps(lambda i: fn(), n, True, torch.cuda.synchronize)["profile_busy_ms"]


BACKENDS = {"flash": "FLASH_ATTENTION", "cudnn": "CUDNN_ATTENTION", "efficient": "EFFICIENT_ATTENTION",
            "math": "MATH"}


def held_to(backend):
    """A context that holds SDPA to one kernel (--backend), or none."""
    if backend == "auto":
        return contextlib.nullcontext()
    from torch.nn.attention import SDPBackend, sdpa_kernel
    return sdpa_kernel([getattr(SDPBackend, BACKENDS[backend])])


def bench_core(key, args, use_compile):
    phantom, learned, routing, token = key
    dev = torch.device(args.device)
    cuda = args.device == "cuda"
    dt = torch.bfloat16 if cuda else torch.float32
    B, H, d = args.B, args.H, args.d
    S, C = args.T + (1 if token else 0), H * d
    augment = learned or routing
    D = torch_step.round_up(d + 1, 8) if augment else d
    g = torch.Generator(device="cpu").manual_seed(1234)
    qkv = torch.randn(B, S, 3 * C, generator=g).to(dev, dt).requires_grad_()
    sink = (0.5 * torch.randn(H, generator=g)).to(dev).requires_grad_() if learned else None
    bias = (-0.02 + 0.01 * torch.randn(B, H, S, generator=g)).to(dev, dt).requires_grad_() if routing else None
    mask = torch.ones(S, S + 1, dtype=torch.bool, device=dev).tril(1) if phantom else None
    dy = torch.randn(B, H, S, d, generator=g).to(dev, dt)
    leaves = [t for t in (qkv, sink, bias) if t is not None]

    def core(qkv, sink, bias):
        q, k, v = qkv.view(B, S, 3, H, d).permute(2, 0, 3, 1, 4).unbind(0)
        return torch_step.attention_core(q, k, v, augment, phantom, D, sink, bias, mask)

    if use_compile:
        # a fresh dynamo state per core: every core compiles the same code
        # object, and past the recompile limit fullgraph would fail
        torch._dynamo.reset()
    run = torch.compile(core, fullgraph=True) if use_compile else core

    def fwd():
        with torch.no_grad(), held_to(args.backend):
            return run(qkv, sink, bias)

    def fwd_bwd():
        with held_to(args.backend):
            y = run(qkv, sink, bias)
        torch.autograd.grad(y, leaves, dy)

    def sync():
        if cuda:
            torch.cuda.synchronize()

    def timed(fn):
        for _ in range(3):
            fn()
        sync()
        if cuda:
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            for _ in range(args.iters):
                fn()
            b.record()
            sync()
            return a.elapsed_time(b) / args.iters
        t0 = time.perf_counter()
        for _ in range(args.iters):
            fn()
        return 1e3 * (time.perf_counter() - t0) / args.iters

    t0 = time.perf_counter()
    fwd_bwd()          # compiles (forward and backward graphs)
    fwd()
    sync()
    compile_s = time.perf_counter() - t0
    f_ms = timed(fwd)
    fb_ms = timed(fwd_bwd)
    b_ms = max(fb_ms - f_ms, 1e-9)
    half = B * H * (S * (S + 1) / 2) * d
    r = {"T": S, "D": D, "fwd_ms": f_ms, "bwd_ms": b_ms,
         "fwd_tflops": 4 * half / (f_ms * 1e-3) / 1e12,
         "bwd_tflops": 10 * half / (b_ms * 1e-3) / 1e12,
         "tflops": 14 * half / (fb_ms * 1e-3) / 1e12,
         "compiled": use_compile, "first_call_s": compile_s,
         "sdpa": backend_of(fwd_bwd)}
    f_busy, fb_busy = busy_ms(fwd, args.iters, cuda), busy_ms(fwd_bwd, args.iters, cuda)
    if f_busy and fb_busy:
        r.update({"fwd_busy_ms": f_busy, "bwd_busy_ms": max(fb_busy - f_busy, 1e-9),
                  "fwd_tflops_busy": 4 * half / (f_busy * 1e-3) / 1e12,
                  "tflops_busy": 14 * half / (fb_busy * 1e-3) / 1e12,
                  "busy_share": fb_busy / fb_ms})
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cuda")
    ap.add_argument("--arms", default="all", help="comma-separated arms or 'all' (default)")
    ap.add_argument("--B", type=int, default=8)
    ap.add_argument("--T", type=int, default=1024)
    ap.add_argument("--H", type=int, default=12)
    ap.add_argument("--d", type=int, default=64)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--no-compile", action="store_true", help="eager SDPA only")
    ap.add_argument("--backend", choices=["auto"] + list(BACKENDS), default="auto",
                    help="hold SDPA to one kernel (default auto: SDPA chooses)")
    ap.add_argument("--json", default=None, metavar="OUT.json")
    args = ap.parse_args()
    for name in ("B", "T", "H", "d", "iters", "threads"):
        if getattr(args, name) < 1:
            sys.exit(f"--{name} must be >= 1")
    torch.set_num_threads(args.threads)
    if args.device == "cuda" and not torch.cuda.is_available():
        print(f"no CUDA device visible to PyTorch {torch.__version__}: nothing to benchmark", file=sys.stderr)
        sys.exit(3)
    names = list(twin.ARMS)
    arms = names if args.arms == "all" else [a.strip() for a in args.arms.split(",") if a.strip()]
    for a in arms:
        if a not in twin.ARMS:
            sys.exit(f"unknown arm {a!r}; known: {', '.join(names)} or 'all'")
    use_compile = not args.no_compile
    cores, results, notes = {}, {}, []

    def write_json():
        if not args.json:
            return
        doc = {"torch_version": torch.__version__, "device": args.device,
               "device_name": torch.cuda.get_device_name() if args.device == "cuda" else "cpu",
               "dtype": "bfloat16" if args.device == "cuda" else "float32",
               "B": args.B, "T": args.T, "H": args.H, "d": args.d, "iters": args.iters, "backend": args.backend,
               "flop_convention": "half = B H T (T+1)/2 d; fwd 4 half, bwd 10 half (bench_gpu's)",
               "arms": results, "notes": notes, "complete": len(results) == len(arms)}
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=2)
            f.write("\n")

    print(f"PyTorch {torch.__version__} SDPA (Appendix A), B {args.B} T {args.T} H {args.H} d {args.d}, "
          f"{'bf16' if args.device == 'cuda' else 'float32'} on {args.device}"
          + ("" if args.backend == "auto" else f", held to its {args.backend} kernel"))
    print(f"{'arm':<10s} {'fwd ms':>8s} {'bwd ms':>8s} {'fwd TF/s':>9s} {'bwd TF/s':>9s} {'TF/s':>7s}"
          f" {'busy TF/s':>10s} {'busy':>5s}  sdpa")
    def why(e):
        return f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"

    def attempt(arm, key):
        """The core's figures; a compile failure goes eager from here on,
        said so.  Where --backend holds SDPA to a kernel that cannot run the
        core, eager fails as well: the arm is skipped with the reason, and
        the compiler stays on for the others."""
        nonlocal use_compile

        def skipped(e):
            if args.backend == "auto":
                raise e
            return {"skipped": f"SDPA's {args.backend} kernel: {why(e)}"}
        try:
            return bench_core(key, args, use_compile)
        except Exception as e:
            if not use_compile:
                return skipped(e)
            torch._dynamo.reset()
            try:
                r = bench_core(key, args, False)
            except Exception as e2:
                return skipped(e2)
            notes.append(f"{arm}: torch.compile failed ({why(e)}); eager from here on")
            print("NOTE:", notes[-1], file=sys.stderr, flush=True)
            use_compile = False
            return r

    for arm in arms:
        key = core_of(arm)
        if key not in cores:
            cores[key] = attempt(arm, key)
        r = dict(cores[key])
        r["core_of"] = next(a for a in names if core_of(a) == key)
        results[arm] = r
        if "skipped" in r:
            print(f"{arm:<10s} skipped: {r['skipped']}", flush=True)
            write_json()
            continue
        busy = (f"{r['tflops_busy']:10.3g} {100 * r['busy_share']:4.0f}%" if "tflops_busy" in r
                else f"{'n/a':>10s} {'':>5s}")
        print(f"{arm:<10s} {r['fwd_ms']:8.3f} {r['bwd_ms']:8.3f} {r['fwd_tflops']:9.3g} {r['bwd_tflops']:9.3g} "
              f"{r['tflops']:7.3g} {busy}  {r['sdpa']}{'' if r['compiled'] else ' (eager)'}"
              f"{'' if r['core_of'] == arm else ' (' + r['core_of'] + ' core)'}", flush=True)
        write_json()
    for n in notes:
        print("note:", n)
    write_json()


if __name__ == "__main__":
    main()
