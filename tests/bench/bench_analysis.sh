#!/usr/bin/env bash
# `sgtrain analyze` against PyTorch forward hooks doing the same injection
# battery (tests/bench/torch_analysis.py), in one run, on the CPU, same model,
# same windows, same shapes.  BENCH_ONLY=analysis bash tests/bench/run.sh runs it.
#
#   bash tests/bench/bench_analysis.sh [BUILD_DIR]
#
# Per arm (BENCH_ANALYSIS_ARMS, default "baseline combo2"):
#  1. a checkpoint of the tier (BENCH_ANALYSIS_TIER, default 10M) from one
#     training step on BENCH_ANALYSIS_DATA (default data/demo-gpt2), made once
#     under $OUT/analysis-models/ and reused while its training flags are the
#     same; exported to model.safetensors.  The speed of a forward pass does
#     not depend on how well the model is trained.
#  2. `sgtrain analyze --batches B --batch-size N` with the default battery
#     (every junk type the arm has x both cutoffs x 4 doses), plus the probes
#     on gated arms: --what injection[,probes], the work the PyTorch script
#     does (sgtrain's default --what all adds the exposure/telemetry measuring
#     pass, which the script does not do).  injection.json's per-condition
#     "seconds" give sinkgate's seconds per injection pass; setup.seconds
#     the whole command (loading included).
#  3. tests/bench/torch_analysis.py on the exported model with the same
#     flags, eager and (BENCH_ANALYSIS_TORCH_MODES) torch.compile'd.
# Then a table: seconds per injection pass on each side and their ratio
# (PyTorch / sinkgate: > 1 means sinkgate is faster), the totals, and both
# clean losses (same windows: they agree to float32 rounding).
#
# Settings (environment):
#   BENCH_ANALYSIS_ARMS        arms (baseline combo2)
#   BENCH_ANALYSIS_TIER        tier of the checkpoint (10M)
#   BENCH_ANALYSIS_DATA        data directory (data/demo-gpt2)
#   BENCH_ANALYSIS_TRAIN_ARGS  extra `sgtrain train` flags (e.g. --vocab_size 61 for synthetic data)
#   BENCH_ANALYSIS_BATCHES     evaluation batches (1)
#   BENCH_ANALYSIS_BATCH_SIZE  sequences per batch (8)
#   BENCH_ANALYSIS_SEQ_LEN     tokens per sequence (the model's context)
#   BENCH_ANALYSIS_JUNK, _CUTOFFS, _DOSES   narrow the battery on both sides (all, all, 0.2,0.4,0.8,1.6)
#   BENCH_ANALYSIS_PROBES      1: probes on gated arms, both sides (1)
#   BENCH_ANALYSIS_TORCH_MODES eager and/or compiled ("eager compiled")
#   BENCH_ANALYSIS_ATTENTION   the script's --attention: auto, sdpa, explicit (auto)
#   BENCH_THREADS              threads on both sides (nproc)
#   BENCH_ANALYSIS_VERIFY      1: also run the script once more with sgtrain's own draws (--draws exact)
#                              and check every loss against sgtrain's files (0)
# Results: $OUT (default BUILD_DIR/bench-results)/analysis.{txt,json} and
# the raw files under $OUT/analysis-*.
set -u
B=${1:-build}
OUT=${OUT:-$B/bench-results}
mkdir -p "$OUT"
ARMS=${BENCH_ANALYSIS_ARMS:-baseline combo2}
TIER=${BENCH_ANALYSIS_TIER:-10M}
DATA=${BENCH_ANALYSIS_DATA:-data/demo-gpt2}
TRAIN_ARGS=${BENCH_ANALYSIS_TRAIN_ARGS:-}
BATCHES=${BENCH_ANALYSIS_BATCHES:-1}
BS=${BENCH_ANALYSIS_BATCH_SIZE:-8}
SEQ=${BENCH_ANALYSIS_SEQ_LEN:-}
JUNK=${BENCH_ANALYSIS_JUNK:-all}
CUTS=${BENCH_ANALYSIS_CUTOFFS:-all}
DOSES=${BENCH_ANALYSIS_DOSES:-0.2,0.4,0.8,1.6}
PROBES=${BENCH_ANALYSIS_PROBES:-1}
MODES=${BENCH_ANALYSIS_TORCH_MODES:-eager compiled}
ATTN=${BENCH_ANALYSIS_ATTENTION:-auto}
THREADS=${BENCH_THREADS:-$(nproc)}
VERIFY=${BENCH_ANALYSIS_VERIFY:-0}

[ -f "$DATA/val.bin" ] || { echo "(no $DATA/val.bin: the analysis benchmark is skipped; \`make data\` makes data/demo-gpt2)"; exit 0; }
make -s B="$B" "$B/sgtrain" >/dev/null || exit 1
SG=$B/sgtrain

PY=
for p in build/venv/bin/python python3; do
    if command -v "$p" >/dev/null 2>&1 && "$p" -c 'import torch' 2>/dev/null; then PY=$p; break; fi
done
if [ -z "$PY" ]; then
    echo "(PyTorch not importable by build/venv/bin/python or python3: only sgtrain analyze is measured;" \
         "build/venv/bin/pip install torch to compare)"
    SUMPY=python3
else
    SUMPY=$PY
fi

common=(--batches "$BATCHES" --batch-size "$BS" --seed 1)
[ -n "$SEQ" ] && common+=(--seq-len "$SEQ")
narrow=()
[ "$JUNK" != all ] && narrow+=(--junk "$JUNK")
[ "$CUTS" != all ] && narrow+=(--cutoffs "$CUTS")
narrow+=(--doses "$DOSES")

echo "=== sgtrain analyze vs PyTorch hooks: tier $TIER, $BATCHES batch(es) x $BS x ${SEQ:-context} tokens," \
     "$THREADS thread(s)${PY:+, PyTorch $("$PY" -c 'import torch; print(torch.__version__)') ($PY)} ==="
fail=0
rows=()
for arm in $ARMS; do
    md=$OUT/analysis-models/$TIER-$arm
    targs="--tier $TIER --arm $arm --iters 1 --warmup 0 --micro_batch 8 --grad_accum 1 --val_every 0"
    targs="$targs --val_batches_final 1 --data $DATA $TRAIN_ARGS"
    if [ ! -f "$md/model.safetensors" ] || [ "$(cat "$md/train-args.txt" 2>/dev/null)" != "$targs" ]; then
        rm -rf "$md"
        mkdir -p "$md"
        echo "--- $arm: training one step of $TIER (checkpoint for the benchmark) ---"
        # shellcheck disable=SC2086
        if ! "$SG" train $targs --out "$md/run" --threads "$THREADS" >"$md/train.log" 2>&1 ||
           ! "$SG" export "$md/run" -o "$md/model.safetensors" >>"$md/train.log" 2>&1; then
            echo "$arm: making the checkpoint failed (see $md/train.log):"; tail -n 5 "$md/train.log"
            fail=1; continue
        fi
        echo "$targs" >"$md/train-args.txt"
    fi
    gated=0
    "$SUMPY" -c 'import json,sys; sys.exit(0 if json.load(open(sys.argv[1]))["arm"] in
        ("normgate","renorm","projgate","combo","combo2") else 1)' "$md/run/result.json" && gated=1
    what=injection
    tprobe=(--no-probes)
    [ "$PROBES" = 1 ] && [ $gated = 1 ] && { what=injection,probes; tprobe=(); }

    an=$OUT/analysis-$TIER-$arm
    rm -rf "$an"
    echo "--- $arm: sgtrain analyze --what $what ---"
    t0=$(date +%s.%N)
    if ! "$SG" analyze "$md/run" --what "$what" "${common[@]}" "${narrow[@]}" --threads "$THREADS" --out "$an" \
            --quiet >"$OUT/analysis-$TIER-$arm.log" 2>&1; then
        echo "$arm: sgtrain analyze failed:"; tail -n 5 "$OUT/analysis-$TIER-$arm.log"
        fail=1; continue
    fi
    t1=$(date +%s.%N)
    wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')
    "$SUMPY" - "$an/injection.json" "$wall" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
r = j["results"]
s = sum(x["seconds"] for x in r) / (len(r) * j["setup"]["batches"])
print(f"  sinkgate: {len(r)} injection conditions, {s:.4f} s/pass; setup.seconds {j['setup']['seconds']:.2f} s "
      f"(wall {float(sys.argv[2]):.2f} s); clean loss {j['clean_val_loss']:.6f}")
PY
    tj=()
    if [ -n "$PY" ]; then
        for mode in $MODES; do
            flag=()
            [ "$mode" = compiled ] && flag=(--compile)
            tjson=$OUT/analysis-$TIER-$arm-torch-$mode.json
            echo "--- $arm: PyTorch, $mode ---"
            if "$PY" tests/bench/torch_analysis.py "$md/model.safetensors" --data "$DATA" "${common[@]}" \
                    "${narrow[@]}" "${tprobe[@]}" "${flag[@]}" --attention "$ATTN" --threads "$THREADS" --quiet \
                    --json "$tjson" 2>"$OUT/analysis-$TIER-$arm-torch-$mode.err"; then
                tj+=("$tjson")
            else
                echo "$arm: torch_analysis.py ($mode) failed:"; tail -n 5 "$OUT/analysis-$TIER-$arm-torch-$mode.err"
                fail=1
            fi
        done
        if [ "$VERIFY" = 1 ]; then
            echo "--- $arm: PyTorch with sgtrain's draws, against injection.json (not timed) ---"
            vout=$("$PY" tests/bench/torch_analysis.py "$md/model.safetensors" --data "$DATA" "${common[@]}" \
                "${narrow[@]}" "${tprobe[@]}" --attention "$ATTN" --threads "$THREADS" --quiet --draws exact \
                --compare "$an/injection.json" --json "$OUT/analysis-$TIER-$arm-torch-verify.json" \
                2>"$OUT/analysis-$TIER-$arm-torch-verify.err")
            vrc=$?
            grep -E "compare with" <<<"$vout"
            [ $vrc = 0 ] || { echo "$arm: the PyTorch hooks and sgtrain analyze disagree (or the check failed:" \
                                   "$OUT/analysis-$TIER-$arm-torch-verify.err)"; fail=1; }
        fi
    fi
    rows+=("$arm|$an/injection.json|$wall|${tj[*]:-}")
done

"$SUMPY" - "$OUT/analysis.json" "${rows[@]}" <<'PY' | tee "$OUT/analysis.txt"
import json, sys
out, rows = sys.argv[1], sys.argv[2:]
doc = {"kind": "bench_analysis", "arms": {}}
lines = []
for row in rows:
    arm, inj, wall, tjs = row.split("|")
    j = json.load(open(inj))
    st = j["setup"]
    res = j["results"]
    sg_pass = sum(x["seconds"] for x in res) / (len(res) * st["batches"])
    a = {"sinkgate": {"injection_seconds_per_pass": sg_pass, "injection_passes": len(res) * st["batches"],
                      "seconds": st["seconds"], "wall_seconds": float(wall), "clean_val_loss": j["clean_val_loss"],
                      "threads": st["threads"], "batches": st["batches"], "batch_size": st["batch_size"],
                      "seq_len": st["seq_len"], "tier": st["tier"]},
         "torch": {}}
    for tf in tjs.split():
        t = json.load(open(tf))
        mode = "compiled" if t["compiled"] else "eager"
        a["torch"][mode] = {k: t[k] for k in ("injection_seconds_per_pass", "passes", "passes_seconds",
                                               "setup_seconds", "warmup_seconds", "total_seconds",
                                               "clean_val_loss", "attention", "torch_version", "other_cpu_frac",
                                               "notes")}
        a["torch"][mode]["ratio"] = t["injection_seconds_per_pass"] / sg_pass
    doc["arms"][arm] = a
json.dump(doc, open(out, "w"), indent=2)

modes = [m for m in ("eager", "compiled") if any(m in a["torch"] for a in doc["arms"].values())]
hdr = f"{'arm':<10s} {'inj. passes':>11s} {'sinkgate s/pass':>15s}"
for m in modes:
    hdr += f" {'PyTorch ' + m + ' s/pass':>24s} {'ratio':>6s}"
hdr += f"   {'total s: sinkgate':>17s}" + "".join(f" {m:>9s}" for m in modes)
print(hdr)
for arm, a in doc["arms"].items():
    s = a["sinkgate"]
    line = f"{arm:<10s} {s['injection_passes']:>11d} {s['injection_seconds_per_pass']:>15.4f}"
    for m in modes:
        t = a["torch"].get(m)
        line += f" {t['injection_seconds_per_pass']:>24.4f} {t['ratio']:>5.2f}x" if t else f" {'n/a':>24s} {'':>6s}"
    line += f"   {s['seconds']:>17.2f}"
    for m in modes:
        t = a["torch"].get(m)
        line += f" {t['setup_seconds'] + t['passes_seconds']:>9.2f}" if t else f" {'n/a':>9s}"
    print(line)
print("ratio: PyTorch s/pass over sinkgate s/pass (> 1: sinkgate is faster); s/pass: the mean injection pass;")
print("totals: sgtrain analyze's setup.seconds, PyTorch's load + every timed pass (clean, injection, probes),")
print("without its untimed warmup/compile pass:")
for arm, a in doc["arms"].items():
    for m, t in a["torch"].items():
        print(f"  {arm} {m}: warmup {t['warmup_seconds']:.1f} s, attention {t['attention']}, clean loss "
              f"{t['clean_val_loss']:.6f} vs sinkgate {a['sinkgate']['clean_val_loss']:.6f}"
              + (f", other processes {100 * t['other_cpu_frac']:.0f}% of the CPU" if t["other_cpu_frac"] is not None
                 else "") + "".join(f"; note: {n}" for n in t["notes"]))
PY
[ "${PIPESTATUS[0]}" = 0 ] || fail=1
[ "$fail" = 0 ] || { echo "analysis benchmark: FAILED (see above)"; exit 1; }
