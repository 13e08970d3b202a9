#!/usr/bin/env bash
# `make bench-gpu`: the GPU benchmarks behind the goals of docs/cuda.md, in one
# run on one GPU so that the ratios are comparable.  Builds nothing (`make
# bench-gpu` depends on `cuda`); needs a GPU.
#  1. build/cuda/bench_gpu, one process per tier (10M, 124M, 350M; the tier's
#     micro-batch), baseline and combo2: ms/step, tokens/s, MFU against the
#     GPU's dense bf16 peak.
#  2. build/cuda/bench_gpu --no-train --matmul: the linear layers' TFLOP/s at
#     the 124M shapes against one 8192^3 product (the library's own rate),
#     untuned and tuned (SG_MATMUL_TUNE), and attention forward + backward
#     TFLOP/s for every arm at the 124M shape, for the wmma tiles and the mma
#     tiles with two and with one m-tile a warp (SG_ATTN_WARP_ROWS), with
#     dQ from the stored dS (SG_ATTN_DQ=stored), and cuDNN's fused attention
#     (SG_ATTN=cudnn);
#     then bench_gpu --gates: the gate ops' GB/s at the 124M shape against a
#     device-to-device copy's in the same process.
#  3. The PyTorch twin (tests/bench/torch_step.py --device cuda: bf16
#     autocast, torch.compile, fused AdamW, SDPA with the head dimension
#     augmented for the phantom) on the same tiers, micro-batches and arms,
#     and after its 124M tier its attention alone for every arm
#     (tests/bench/torch_attention.py) at the attention rows' shape, then
#     the baseline's held to SDPA's flash kernel (FlashAttention-2, the
#     scheme of our mma tiles); skipped, with a note, where torch or its
#     CUDA is missing.
#  4. After PyTorch's 124M tier (before its 10M and 350M tiers; without
#     PyTorch, after the gates): the 124M tier with its whole batch of 32
#     sequences in one micro-batch (the tier runs 8 x 4: the same sequences
#     and one optimizer step per 32 of them), baseline and combo2.  Its
#     products have 32768 rows instead of 8192, and a step's AdamW is spread
#     over 4 times the tokens.  Then the tier as it trains, 4 micro-batches
#     of 8 and one AdamW update a step (bench_gpu --grad-accum 4), which
#     sets the whole batch's gain apart from the optimizer's.
#  5. A summary: per tier sinkgate vs PyTorch tokens/s, combo2/baseline, MFU
#     at 124M (at micro-batch 8, with the whole batch, and as it trains),
#     and which goals are met.
# Everything goes to $OUT (default $B/bench-gpu-results) as text and JSON.
#
# Time: every command runs under `timeout`, and the whole script keeps to
# BENCH_GPU_BUDGET_S seconds (default 240): a step that would start with too
# little time left is skipped with a note (the PyTorch tiers run 124M first,
# then 10M, then 350M).  Knobs: BENCH_GPU_TIERS ("10M 124M 350M"),
# BENCH_GPU_ARMS (baseline,combo2), BENCH_GPU_STEPS (10 timed steps after 2
# warm-up), BENCH_GPU_PEAK_TFLOPS (else from the device name),
# TORCH_COMPILE_SCOPE (blocks: the embedding, one block shared by every layer
# and the head compiled as regions, the same kernels for a fraction of the
# compile time; model: one fullgraph compile of the whole model, slower to
# compile), TORCH_COMPILE_LIMIT_S (60: a first step slower than that reruns
# the arm eagerly, and the summary says so), PYTHON (python3).
set -u
B=${1:-build}
CB=$B/cuda
OUT=${OUT:-$B/bench-gpu-results}
BUDGET=${BENCH_GPU_BUDGET_S:-240}
TIERS=${BENCH_GPU_TIERS:-10M 124M 350M}
ARMS=${BENCH_GPU_ARMS:-baseline,combo2}
STEPS=${BENCH_GPU_STEPS:-10}
SCOPE=${TORCH_COMPILE_SCOPE:-blocks}
CLIMIT=${TORCH_COMPILE_LIMIT_S:-60}
PY=${PYTHON:-python3}
PEAK=()
[ -n "${BENCH_GPU_PEAK_TFLOPS:-}" ] && PEAK=(--peak-tflops "$BENCH_GPU_PEAK_TFLOPS")

mkdir -p "$OUT"
rm -f "$OUT"/sinkgate-*.* "$OUT"/torch-*.* "$OUT"/summary.* "$OUT"/notes.txt "$OUT"/nvidia-smi.txt
NOTES=$OUT/notes.txt
: >"$NOTES"
START=$SECONDS
note() { echo "note: $*" | tee -a "$NOTES"; }
left() { echo $((BUDGET - (SECONDS - START))); }
# The tiers' micro-batches (src/config.c, Table 3 of the paper).
micro_batch() { case $1 in 10M) echo 64 ;; 50M) echo 16 ;; *) echo 8 ;; esac; }

# run NAME CAP MIN CMD...: CMD under timeout min(CAP, time left), output to
# $OUT/NAME.txt and the terminal; skipped when less than MIN seconds are left.
run() {
    local name=$1 cap=$2 min=$3 t
    shift 3
    t=$(left)
    if [ "$t" -lt "$min" ]; then
        note "$name skipped: ${t}s of the ${BUDGET}s budget left (it needs ${min}s)"
        return 124
    fi
    [ "$t" -gt "$cap" ] && t=$cap
    echo "--- $name (limit ${t}s)"
    timeout -k 5 "$t" "$@" 2>&1 | tee "$OUT/$name.txt"
    local rc=${PIPESTATUS[0]}
    if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then note "$name timed out after ${t}s"
    elif [ "$rc" != 0 ]; then note "$name exited with status $rc"; fi
    return "$rc"
}

if [ ! -x "$CB/bench_gpu" ]; then
    echo "bench-gpu: $CB/bench_gpu is missing: make cuda first" >&2
    exit 2
fi
echo "=== GPU benchmarks -> $OUT (budget ${BUDGET}s) ==="
if command -v nvidia-smi >/dev/null; then
    timeout 15 nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit,clocks.max.sm,clocks.sm \
        --format=csv >"$OUT/nvidia-smi.txt" 2>&1 && cat "$OUT/nvidia-smi.txt"
fi

fail=0
echo "=== sinkgate: training steps (tiers: $TIERS; arms: $ARMS) ==="
for tier in $TIERS; do
    case $tier in 350M) cap=75 ;; *) cap=45 ;; esac
    run "sinkgate-$tier" $cap 15 "$CB/bench_gpu" --tiers "$tier" --arms "$ARMS" --steps "$STEPS" --warmup 2 \
        --no-attn "${PEAK[@]}" --json "$OUT/sinkgate-$tier.json" || fail=1
done
echo "=== sinkgate: linear layers, and attention forward + backward for every arm ==="
# SG_MATMUL_STATS=1: each shape's tuning (candidates, rejections, times) at exit
run sinkgate-attention 120 10 env SG_MATMUL_STATS=1 "$CB/bench_gpu" --no-train --matmul --arms all \
    --json "$OUT/sinkgate-attention.json" || fail=1
echo "=== sinkgate: the gates alone, against a device-to-device copy ==="
run sinkgate-gates 30 10 "$CB/bench_gpu" --no-train --no-attn --gates --json "$OUT/sinkgate-gates.json" || fail=1

# after PyTorch's 124M tier, or after the torch section where it is missing
whole_batch_done=0
whole_batch() {
    [ $whole_batch_done = 1 ] && return
    whole_batch_done=1
    case " $TIERS " in *" 124M "*) ;; *) return ;; esac
    echo "=== sinkgate: 124M with the tier's whole batch (32) in one micro-batch ==="
    run sinkgate-124M-mb32 45 20 "$CB/bench_gpu" --tiers 124M --arms "$ARMS" --micro-batch 32 --steps "$STEPS" \
        --warmup 2 --no-attn "${PEAK[@]}" --json "$OUT/sinkgate-124M-mb32.json" || fail=1
    # and as the tier trains: 4 micro-batches of 8, one AdamW update per 32
    # sequences (the rows above update after every 8)
    echo "=== sinkgate: 124M as it trains, 4 micro-batches of 8 a step ==="
    run sinkgate-124M-8x4 45 20 "$CB/bench_gpu" --tiers 124M --arms "$ARMS" --micro-batch 8 --grad-accum 4 \
        --steps "$STEPS" --warmup 2 --no-attn "${PEAK[@]}" --json "$OUT/sinkgate-124M-8x4.json" || fail=1
}

echo "=== PyTorch twin on the same GPU ==="
tv=$(timeout 60 "$PY" -c 'import sys, torch
print(torch.__version__)
sys.exit(0 if torch.cuda.is_available() else 3)' 2>/dev/null)
trc=$?
if [ $trc = 0 ]; then
    echo "PyTorch $tv; torch.compile scope: $SCOPE; compile limit ${CLIMIT}s per arm"
    for tier in 124M 10M 350M; do
        case " $TIERS " in *" $tier "*) ;; *) continue ;; esac
        case $tier in 350M) cap=110 ;; 124M) cap=90 ;; *) cap=75 ;; esac
        run "torch-$tier" $cap 30 "$PY" tests/bench/torch_step.py --device cuda --shape "$tier" \
            --micro-batch "$(micro_batch "$tier")" --arms "$ARMS" --steps "$STEPS" --warmup-steps 2 \
            --compile-scope "$SCOPE" --compile-limit "$CLIMIT" --profile-steps 2 --json "$OUT/torch-$tier.json"
        # SDPA alone at the attention rows' shape, after the 124M tier: the
        # arms ordered so that a run cut short keeps the baseline's and
        # combo2's cores first (the gated arms share the ungated arms' cores)
        [ "$tier" = 124M ] && run torch-attention 50 15 "$PY" tests/bench/torch_attention.py --device cuda \
            --arms baseline,combo2,offbyone,renorm,sinktoken,sinklogit,normgate,projgate,combo \
            --json "$OUT/torch-attention.json"
        # the baseline's again on SDPA's flash kernel: FlashAttention-2 on
        # this GPU, the scheme our mma tiles follow (docs/cuda.md, "Against
        # FlashAttention-2's kernels")
        [ "$tier" = 124M ] && run torch-attention-flash 30 10 "$PY" tests/bench/torch_attention.py --device cuda \
            --arms baseline --backend flash --json "$OUT/torch-attention-flash.json"
        [ "$tier" = 124M ] && whole_batch
    done
elif [ $trc = 3 ]; then
    note "PyTorch $tv sees no CUDA device: the PyTorch comparison is skipped"
else
    note "PyTorch is not importable with $PY (or timed out importing): the PyTorch comparison is skipped"
fi

whole_batch

echo "=== summary ==="
if command -v "$PY" >/dev/null; then
    OUT="$OUT" TIERS="$TIERS" "$PY" - <<'EOF' | tee "$OUT/summary.txt"
import json, os
out, tiers = os.environ["OUT"], os.environ["TIERS"].split()

def load(name):
    try:
        with open(os.path.join(out, name)) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None

def fmt(x, f="{:.0f}"):
    return "n/a" if x is None else f.format(x)

summary = {"tiers": {}, "goals": {}}
peak = None
print(f"{'tier':<5} {'arm':<9} {'sinkgate tok/s':>15} {'PyTorch tok/s':>14} {'ratio':>6} {'MFU':>6}"
      f" {'combo2/base':>12}")
for tier in tiers:
    sg, pt = load(f"sinkgate-{tier}.json"), load(f"torch-{tier}.json")
    sgr = ((sg or {}).get("train") or {}).get(tier, {})
    if sg and sg.get("peak_tflops"):
        peak = sg["peak_tflops"]
    ptr = (pt or {}).get("results", {})
    row = {}
    for arm in ("baseline", "combo2"):
        a, p = sgr.get(arm), ptr.get(arm)
        s_tok = a["tokens_per_s"] if a and a.get("ok") else None
        p_tok = p["tokens_per_s"] if p else None
        row[arm] = {"sinkgate_tokens_per_s": s_tok, "mfu": a.get("mfu") if a else None,
                    "torch_tokens_per_s": p_tok, "torch_compiled": p.get("compiled") if p else None,
                    "ratio_vs_torch": s_tok / p_tok if s_tok and p_tok else None}
    b, c = row["baseline"]["sinkgate_tokens_per_s"], row["combo2"]["sinkgate_tokens_per_s"]
    row["combo2_over_baseline"] = c / b if b and c else None
    summary["tiers"][tier] = row
    for i, arm in enumerate(("baseline", "combo2")):
        r = row[arm]
        eager = " (eager!)" if r["torch_compiled"] is False else ""
        print(f"{tier if i == 0 else '':<5} {arm:<9} {fmt(r['sinkgate_tokens_per_s']):>15}"
              f" {fmt(r['torch_tokens_per_s']):>14} {fmt(r['ratio_vs_torch'], '{:.2f}x'):>6}"
              f" {fmt(r['mfu'] and 100 * r['mfu'], '{:.1f}%'):>6}"
              f" {fmt(row['combo2_over_baseline'], '{:.3f}') if i == 0 else '':>12}{eager}")

# Where a step's time goes, ours (each op synchronised) beside PyTorch's
# (kernel time from torch.profiler); the LM head's GEMMs count as
# classifier in ours and as matmul in PyTorch's.
for tier in tiers:
    sgr = ((load(f"sinkgate-{tier}.json") or {}).get("train") or {}).get(tier, {})
    ptr = (load(f"torch-{tier}.json") or {}).get("results", {})
    for arm in ("baseline", "combo2"):
        a, p = (sgr.get(arm) or {}).get("profile_ms"), (ptr.get(arm) or {}).get("profile_ms")
        if not a or not p:
            continue
        cats = [c for c in a if a[c] > 0 or p.get(c, 0) > 0] + [c for c in p if c not in a and p[c] > 0]
        print(f"{tier} {arm} ms a step, sinkgate / PyTorch: "
              + ", ".join(f"{c} {a.get(c, 0):.2f}/{p.get(c, 0):.2f}" for c in cats)
              + f" (PyTorch's kernels busy {ptr[arm]['profile_busy_ms']:.2f} of {ptr[arm]['profile_wall_ms']:.2f})")
        summary.setdefault("profile_ms", {})[f"{tier}/{arm}"] = {"sinkgate": a, "torch": p}

att = load("sinkgate-attention.json")
# bench_gpu's tile sets: the JSON key, the summary's key, what they are
ATT_SETS = [("arms_mma", "attention_tflops_mma", "SG_ATTN=mma (the default, register-resident tiles)"),
            ("arms_mma_bp", "attention_tflops_mma_bp", "SG_ATTN_BWD_PIPE=1 (the mma backward's strips pipelined)"),
            ("arms_wgmma2", "attention_tflops_wgmma2", "SG_ATTN_WGMMA=2 (the same, the forward pipelined)"),
            ("arms_wgmma", "attention_tflops_wgmma", "SG_ATTN_WGMMA=1 (forward and dK/dV on Hopper's wgmma)"),
            ("arms_cudnn", "attention_tflops_cudnn", "SG_ATTN=cudnn (cuDNN's fused attention; renorm on the mma tiles)"),
            ("arms_mma_dqs", "attention_tflops_mma_dqs", "SG_ATTN=mma SG_ATTN_DQ=stored (dQ from the stored dS)"),
            ("arms_mma16", "attention_tflops_mma16", "SG_ATTN=mma SG_ATTN_WARP_ROWS=16 (one m-tile a warp)"),
            ("arms", "attention_tflops", "SG_ATTN=wmma")]
a = (att or {}).get("attention") or {}
if any(a.get(k) for k, _, _ in ATT_SETS):
    print(f"\nattention fwd+bwd, B {a['B']} T {a['T']} H {a['H']} d {a['d']}:")
    for key, skey, what in ATT_SETS:
        if a.get(key):
            print(f"  {what}: TFLOP/s " + ", ".join(f"{k} {v['tflops']:.0f}" for k, v in a[key].items()))
            summary[skey] = {k: v["tflops"] for k, v in a[key].items()}
ta = {k: v for k, v in ((load("torch-attention.json") or {}).get("arms") or {}).items() if v.get("tflops")}
fa = {k: v for k, v in ((load("torch-attention-flash.json") or {}).get("arms") or {}).items() if v.get("tflops")}
if ta or fa:
    ours = {}
    for key, _, _ in ATT_SETS:
        for k, v in ((att or {}).get("attention", {}).get(key) or {}).items():
            ours[k] = max(ours.get(k, 0), v["tflops"])
    if fa:
        # FlashAttention-2 (SDPA held to its flash kernel), by busy time
        # where there is one, against the mma tiles (its scheme) and our best
        mma = {k: v["tflops"] for k, v in ((att or {}).get("attention", {}).get("arms_mma") or {}).items()}
        fx = {k: v.get("tflops_busy") or v["tflops"] for k, v in fa.items()}
        def against(k, x):
            parts = ([f"the mma tiles {mma[k] / x:.2f}x"] if k in mma else []) + \
                    ([f"our best {ours[k] / x:.2f}x"] if k in ours else [])
            return f" ({', '.join(parts)})" if parts else ""
        print("  FlashAttention-2 (SDPA's flash kernel), its kernels alone: TFLOP/s "
              + ", ".join(f"{k} {x:.0f}{against(k, x)}" for k, x in fx.items()))
        summary["flash_attention_tflops"] = fx
        summary["attention_mma_over_flash"] = {k: mma[k] / x for k, x in fx.items() if k in mma}
        summary["attention_best_over_flash"] = {k: ours[k] / x for k, x in fx.items() if k in ours}
if ta:
    print("  PyTorch SDPA (tests/bench/torch_attention.py), same shape: TFLOP/s "
          + ", ".join(f"{k} {v['tflops']:.0f}" + (f" (ours {ours[k] / v['tflops']:.2f}x)" if k in ours else "")
                      for k, v in ta.items()))
    # the same calls by the device's busy time: SDPA's kernels alone, which
    # a host that falls behind the GPU does not slow (torch_attention.py)
    tb = {k: v["tflops_busy"] for k, v in ta.items() if v.get("tflops_busy")}
    if tb:
        print("    its kernels alone (device busy time): TFLOP/s "
              + ", ".join(f"{k} {x:.0f}" + (f" (ours {ours[k] / x:.2f}x)" if k in ours else "")
                          + f", busy {100 * ta[k]['busy_share']:.0f}% of the calls' time"
                          for k, x in tb.items()))
        summary["torch_attention_tflops_busy"] = tb
        summary["attention_best_over_torch_kernels"] = {k: ours[k] / x for k, x in tb.items() if k in ours}
    print("    SDPA kernels: " + "; ".join(sorted({f"{v['core_of']}: {v['sdpa']}" for v in ta.values()})))
    summary["torch_attention_tflops"] = {k: v["tflops"] for k, v in ta.items()}
    summary["attention_best_over_torch"] = {k: ours[k] / v["tflops"] for k, v in ta.items() if k in ours}
if att and att.get("matmul"):
    print("linear layers (op_matmul) TFLOP/s fwd/bwd: "
          + ", ".join(f"{k} {v['fwd_tflops']:.0f}/{v['bwd_tflops']:.0f}" for k, v in att["matmul"].items()))
    if all("fwd_tflops_tuned" in v for v in att["matmul"].values()):
        print("  tuned (SG_MATMUL_TUNE=1): "
              + ", ".join(f"{k} {v['fwd_tflops_tuned']:.0f}/{v['bwd_tflops_tuned']:.0f}"
                          for k, v in att["matmul"].items()))
    summary["matmul_tflops"] = att["matmul"]

gt = (load("sinkgate-gates.json") or {}).get("gates") or {}
if gt.get("copy_gbs"):
    rows = {k: v for k, v in gt.items() if isinstance(v, dict) and "gbs" in v}
    fused = {k: v for k, v in gt.items() if isinstance(v, dict) and "one_op_ms" in v}
    pv = rows.get("proj_value")
    print(f"gates fwd+bwd, B {gt['B']} T {gt['T']} H {gt['H']} d {gt['d']}: GB/s "
          + ", ".join(f"{k} {v['gbs']:.0f}" for k, v in rows.items())
          + f" (device copy {gt['copy_gbs']:.0f})"
          + (f"; combo2's (proj/value) x12 layers {12 * (pv['fwd_ms'] + pv['bwd_ms']):.3f} ms" if pv else ""))
    summary["gates_gbs"] = {k: v["gbs"] for k, v in rows.items()}
    if fused:
        print("value gates' backward with the attention's, ms a call (two ops / op_attention_gate_bwd): "
              + ", ".join(f"{k} {v['two_ops_ms']:.4f} / {v['one_op_ms']:.4f}" for k, v in fused.items()))
        summary["gates_fused_ms"] = fused
    summary["gates_copy_gbs"] = gt["copy_gbs"]

def verdict(ok):
    return "n/a (not measured)" if ok is None else ("MET" if ok else "NOT met")

# Goal 1: combo2 within 3% of the baseline's tokens/s, at every tier measured.
r1 = {t: v["combo2_over_baseline"] for t, v in summary["tiers"].items() if v["combo2_over_baseline"]}
g1 = None if not r1 else all(x >= 0.97 for x in r1.values())
# Goal 2: the 124M tier at 45% MFU or more (the baseline arm; combo2 shown too).
m = summary["tiers"].get("124M", {})
mb, mc = (m.get("baseline") or {}).get("mfu"), (m.get("combo2") or {}).get("mfu")
# ... and in the other ways the 124M tier can run the same 32 sequences a
# step: its MFU per arm (where the run was ok), and its row for summary.json
def other_124m(name, keys):
    r = (((load(name) or {}).get("train") or {}).get("124M") or {})
    mfus = tuple((r.get(a) or {}).get("mfu") if (r.get(a) or {}).get("ok") else None for a in ("baseline", "combo2"))
    return mfus, {"124M": {a: {k: (r.get(a) or {}).get(src) for k, src in keys.items()} for a in ("baseline", "combo2")}}
ROW = {"mfu": "mfu", "sinkgate_tokens_per_s": "tokens_per_s", "micro_batch": "micro_batch"}
# the whole batch in one micro-batch (the same training)
(wb, wc), summary["tiers_whole_batch"] = other_124m("sinkgate-124M-mb32.json", ROW)
# as the tier trains, 8 x 4 with one AdamW update a step
(tb, tc), summary["tiers_as_trained"] = other_124m("sinkgate-124M-8x4.json", {**ROW, "grad_accum": "grad_accum"})
best_mfu = max((x for x in (mb, wb, tb) if x is not None), default=None)
g2 = None if best_mfu is None else best_mfu >= 0.45
# Goal 3: at least 1.3x PyTorch's tokens/s, every tier and arm where both ran
# (PyTorch runs that fell back to eager do not count).
r3 = {f"{t}/{arm}": v[arm]["ratio_vs_torch"] for t, v in summary["tiers"].items()
      for arm in ("baseline", "combo2") if v[arm]["ratio_vs_torch"] and v[arm]["torch_compiled"]}
g3 = None if not r3 else all(x >= 1.3 for x in r3.values())
eager = [f"{t}/{arm}" for t, v in summary["tiers"].items() for arm in ("baseline", "combo2")
         if v[arm]["torch_compiled"] is False]
print("\ngoals:")
print(f"  1. combo2 within 3% of baseline tokens/s: {verdict(g1)}"
      + (" (" + ", ".join(f"{t} {x:.3f}" for t, x in r1.items()) + ")" if r1 else ""))
no_peak = m.get("baseline", {}).get("sinkgate_tokens_per_s") and mb is None
print(f"  2. 124M at >= 45% MFU: {verdict(g2)}"
      + (" (the GPU's peak is unknown: set BENCH_GPU_PEAK_TFLOPS)" if no_peak else "")
      + (f" (baseline {fmt(mb and 100 * mb, '{:.1f}%')}, combo2 {fmt(mc and 100 * mc, '{:.1f}%')}"
         f", peak {peak} TFLOP/s)" if mb is not None else "")
      + (f"; with the whole batch of 32 in one micro-batch: baseline {fmt(100 * wb, '{:.1f}%')}, combo2"
         f" {fmt(wc and 100 * wc, '{:.1f}%')}" if wb is not None else "")
      + (f"; as the tier trains, 8 x 4: baseline {fmt(100 * tb, '{:.1f}%')}, combo2"
         f" {fmt(tc and 100 * tc, '{:.1f}%')}" if tb is not None else ""))
print(f"  3. >= 1.3x PyTorch tokens/s: {verdict(g3)}"
      + (" (" + ", ".join(f"{k} {x:.2f}x" for k, x in r3.items()) + ")" if r3 else "")
      + (f"; not counted, PyTorch fell back to eager: {', '.join(eager)}" if eager else ""))
summary["goals"] = {"combo2_within_3pct": g1, "mfu_124M_ge_45pct": g2, "torch_ratio_ge_1_3": g3}
try:
    with open(os.path.join(out, "notes.txt")) as f:
        notes = [l.strip() for l in f if l.strip()]
except OSError:
    notes = []
for n in notes:
    print(n)
summary["notes"] = notes
with open(os.path.join(out, "summary.json"), "w") as f:
    json.dump(summary, f, indent=2)
    f.write("\n")
EOF
else
    note "no $PY: no summary (the figures are in $OUT)"
fi
echo "(${SECONDS}s in all; figures in $OUT)"
exit $fail
