#!/usr/bin/env bash
# `sgtrain generate` against PyTorch on the CPU, in one run, same model, same
# prompt, same greedy tokens (tests/bench/torch_generate.py): PyTorch with
# a key-value cache written by hand, and nanoGPT's generate, which runs a
# whole forward pass for every token.  BENCH_ONLY=generate bash
# tests/bench/run.sh runs it.
#
#   bash tests/bench/bench_generate.sh [BUILD_DIR]
#
# Per tier (BENCH_GEN_TIERS, default "10M 124M") and arm (BENCH_GEN_ARMS,
# default "baseline combo2"): a checkpoint from one training step on
# BENCH_GEN_DATA (default data/demo-gpt2; the speed does not depend on
# training), made once under $OUT/generate-models/; then, for 1 and
# BENCH_GEN_SAMPLES (default 8) samples, BENCH_GEN_TOKENS (default 128)
# greedy tokens after a 9-token prompt, timed on each side: sgtrain's
# setup.seconds (prompt and draws, after loading), PyTorch's
# time.perf_counter around the same work.  PyTorch's nocache mode runs
# with one sample only (BENCH_GEN_NOCACHE=0 skips it).  Every side's
# tokens for sample 0 must equal sgtrain's (greedy: ties aside, the same
# model gives the same tokens).
# Results: $OUT (default BUILD_DIR/bench-results)/generate.{txt,json}.
set -u
B=${1:-build}
OUT=${OUT:-$B/bench-results}
mkdir -p "$OUT"
TIERS=${BENCH_GEN_TIERS:-10M 124M}
ARMS=${BENCH_GEN_ARMS:-baseline combo2}
DATA=${BENCH_GEN_DATA:-data/demo-gpt2}
N=${BENCH_GEN_TOKENS:-128}
NS=${BENCH_GEN_SAMPLES:-8}
NOCACHE=${BENCH_GEN_NOCACHE:-1}
THREADS=${BENCH_THREADS:-$(nproc)}
V=data/vocab/gpt2.tiktoken
PROMPT="The meaning of the word is given in the"

[ -f "$DATA/val.bin" ] && [ -s "$V" ] || { echo "(no $DATA or $V: the generation benchmark is skipped; \`make data\` makes them)"; exit 0; }
make -s B="$B" "$B/sgtrain" >/dev/null || exit 1
SG=$B/sgtrain
PY=
for p in ${BENCH_TORCH_PY:-} build/venv/bin/python python3; do
    if command -v "$p" >/dev/null 2>&1 && "$p" -c 'import torch, numpy' 2>/dev/null; then PY=$p; break; fi
done
[ -n "$PY" ] || echo "(PyTorch not importable: only sgtrain is measured; BENCH_TORCH_PY names a python with torch)"
echo "=== sgtrain generate vs PyTorch: greedy, $N new tokens, $THREADS thread(s)${PY:+, PyTorch $("$PY" -c 'import torch; print(torch.__version__)')} ==="
rows=$OUT/generate-rows.jsonl
: >"$rows"
fail=0
for tier in $TIERS; do
    for arm in $ARMS; do
        md=$OUT/generate-models/$tier-$arm
        targs="--tier $tier --arm $arm --iters 1 --warmup 0 --micro_batch 1 --grad_accum 1 --val_every 0 --val_batches_final 1 --data $DATA"
        if [ ! -f "$md/model.safetensors" ] || [ "$(cat "$md/train-args.txt" 2>/dev/null)" != "$targs" ]; then
            rm -rf "$md" && mkdir -p "$md"
            # shellcheck disable=SC2086
            if ! "$SG" train $targs --out "$md/run" --threads "$THREADS" >"$md/train.log" 2>&1 ||
               ! "$SG" export "$md/run" -o "$md/model.safetensors" >>"$md/train.log" 2>&1; then
                echo "$tier $arm: making the checkpoint failed (see $md/train.log)"; fail=1; continue
            fi
            echo "$targs" >"$md/train-args.txt"
        fi
        for S in 1 $NS; do
            j=$OUT/generate-$tier-$arm-s$S
            if ! "$SG" generate "$md/run" --prompt "$PROMPT" --tokens "$N" --samples "$S" --temperature 0 --vocab "$V" \
                    --threads "$THREADS" --quiet --json "$j.json" >/dev/null 2>"$j.log"; then
                echo "$tier $arm: sgtrain generate failed:"; tail -n 3 "$j.log"; fail=1; continue
            fi
            prompt=$(python3 -c 'import json,sys; print(",".join(map(str, json.load(open(sys.argv[1]))["prompt"]["tokens"])))' "$j.json")
            modes=""
            [ -n "$PY" ] && modes="cache" && [ "$NOCACHE" = 1 ] && [ "$S" = 1 ] && modes="cache nocache"
            for mode in $modes; do
                "$PY" tests/bench/torch_generate.py "$md/model.safetensors" --prompt-tokens "$prompt" --tokens "$N" \
                    --samples "$S" --mode $mode --threads "$THREADS" --json "$j-torch-$mode.json" >/dev/null ||
                    { echo "$tier $arm: torch_generate.py --mode $mode failed"; fail=1; }
            done
            python3 - "$j" "$tier" "$arm" "$S" >>"$rows" <<'PYEOF'
import json, os, sys
j, tier, arm, S = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
g = json.load(open(j + ".json"))
sg = g["samples"][0]["tokens"]
n = g["setup"]["max_tokens"]
row = {"tier": tier, "arm": arm, "samples": S, "tokens": n, "sinkgate_s": g["setup"]["seconds"],
       "sinkgate_tok_s": S * n / g["setup"]["seconds"]}
for mode in ("cache", "nocache"):
    p = f"{j}-torch-{mode}.json"
    if os.path.exists(p):
        t = json.load(open(p))
        same = 0
        while same < min(len(sg), len(t["sample0"])) and sg[same] == t["sample0"][same]:
            same += 1
        row[f"torch_{mode}_s"] = t["seconds"]
        row[f"torch_{mode}_tok_s"] = t["tokens_per_s"]
        row[f"torch_{mode}_same_tokens"] = same
print(json.dumps(row))
PYEOF
        done
    done
done
python3 - "$rows" "$OUT/generate.json" <<'PYEOF' | tee "$OUT/generate.txt"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
json.dump(rows, open(sys.argv[2], "w"), indent=1)
print("| tier | arm | samples | sinkgate tok/s | PyTorch, cache | ratio | PyTorch, nanoGPT (no cache) | ratio | same greedy tokens |")
print("|---|---|---:|---:|---:|---:|---:|---:|---|")
for r in rows:
    def cell(mode):
        k = f"torch_{mode}_tok_s"
        return (f"{r[k]:.1f}", f"{r['sinkgate_tok_s'] / r[k]:.2f}x") if k in r else ("-", "-")
    c, nc = cell("cache"), cell("nocache")
    same = " / ".join(f"{r[f'torch_{m}_same_tokens']} of {r['tokens']}" for m in ("cache", "nocache")
                      if f"torch_{m}_same_tokens" in r) or "-"
    print(f"| {r['tier']} | {r['arm']} | {r['samples']} | {r['sinkgate_tok_s']:.1f} | {c[0]} | {c[1]} | {nc[0]} | {nc[1]} | {same} |")
PYEOF
exit $fail
