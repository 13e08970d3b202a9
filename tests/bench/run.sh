#!/usr/bin/env bash
# `make bench`: the CPU benchmarks behind docs/performance.md, in one run so
# that ratios are comparable.
#  1. bench_train with every BLAS found (OpenBLAS, BLIS, MKL): sgemm peak, tokens/s
#     of a full training step per arm on the cpu-tiny and 10M shapes, time
#     split by op category.  The BLAS the Makefile picks by default is the
#     one that wins here.
#  2. PyTorch (if importable) on the same shapes and arms: what a user would
#     run instead (tests/bench/torch_step.py).
#  3. The tokenizer: bench_tok (sgtok's encoder, 1 thread and 1..nproc
#     threads) and tiktoken (tests/bench/tok_tiktoken.py) on the same corpora
#     (BENCH_TOK_CORPORA, default data/text/demo and data/text/mixed), text in
#     memory, BENCH_TOK_REPS runs each (default 3); both must give the same
#     tokens.
# Figures go to $OUT (default build/bench-results) as text and JSON.
#  4. sgreport on a synthetic sweep of 10,000 finished runs (tests/bench/report_sweep.sh):
#     tables only, best of 5 (the goal is under a second).
#  5. `sgtrain analyze` (injection battery and probes) against PyTorch forward
#     hooks doing the same passes (tests/bench/bench_analysis.sh,
#     tests/bench/torch_analysis.py): a 10M checkpoint, baseline and combo2,
#     seconds per injection pass on both sides; BENCH_ANALYSIS_* settings.
#  5b. `sgtrain generate` against PyTorch with a hand-written key-value cache
#     and nanoGPT's cacheless generate (tests/bench/bench_generate.sh,
#     tests/bench/torch_generate.py): greedy tokens/s at 10M and 124M.
#  5c. Table 12's incidence survey on a GPT-2 124M and a Pythia-160m
#     imported with `sgtrain import`, against transformers on the same
#     16 x 1024 tokens
#     (tests/bench/bench_import.sh, tests/bench/hf_incidence.py).
#  6. `sgtrain toy`: the whole of Figure 3 (4 loads x 5 arms x 2 conditions
#     x 3 seeds, 4000 steps each); the goal is under 15 minutes on 2 cores.
#  7. Data parallelism: 1 and 2 ranks, the gradient sum after the backward
#     or overlapped with it (tests/bench/bench_dist.sh).
#  8. The LM head: op_classifier whole against its three GEMMs alone, in
#     chunks of 128 to 1024 rows (tests/bench/bench_classifier.c), with the
#     default BLAS.
# BENCH_ONLY=train|torch|tok|report|analysis|generate|import|toy|dist|classifier runs one part.
set -u
B=${1:-build}
OUT=${OUT:-$B/bench-results}
mkdir -p "$OUT"
SHAPE=${BENCH_SHAPE:-all}
ONLY=${BENCH_ONLY:-all}
part() { [ "$ONLY" = all ] || [ "$ONLY" = "$1" ]; }
blis_dir=$(ls -d /usr/include/*/blis-openmp 2>/dev/null | head -n 1)
part train && for blas in ${BENCH_BLAS:-openblas blis mkl}; do
    [ "$blas" = blis ] && [ -z "$blis_dir" ] && { echo "(BLIS not installed: skipped)"; continue; }
    [ "$blas" = mkl ] && [ ! -f build/deps/mkl/include/mkl_cblas.h ] && { echo "(MKL not fetched: skipped; bash tools/fetch-mkl.sh)"; continue; }
    bdir=$B/blas-$blas
    make -s BLAS=$blas B="$bdir" "$bdir/bench/bench_train" >/dev/null || exit 1
    echo "=== $blas ==="
    "$bdir/bench/bench_train" --shape "$SHAPE" --json "$OUT/train-$blas.json" | tee "$OUT/train-$blas.txt"
done
if ! part torch; then
    :
elif python3 -c 'import torch' 2>/dev/null; then
    echo "=== PyTorch $(python3 -c 'import torch; print(torch.__version__)') on the same shapes ==="
    for shape in cpu-tiny 10M; do
        [ "$SHAPE" != all ] && [ "$SHAPE" != "$shape" ] && continue
        mb=8; steps=5; [ "$shape" = 10M ] && { mb=4; steps=3; }
        python3 tests/bench/torch_step.py --arms baseline,sinklogit,normgate,combo2 --shape "$shape" \
            --micro-batch $mb --steps $steps --warmup-steps 2 --threads "$(nproc)" \
            --json "$OUT/torch-$shape.json" | tee "$OUT/torch-$shape.txt"
    done
else
    echo "(PyTorch not importable: the comparison with PyTorch is skipped; pip install torch to run it)"
fi
if part classifier; then
    echo "=== LM head: op_classifier against its GEMMs alone ==="
    make -s B="$B" "$B/bench/bench_classifier" >/dev/null || exit 1
    "$B/bench/bench_classifier" --shape "$SHAPE" | tee "$OUT/classifier.txt"
fi

fail=0
if part tok; then
    echo "=== tokenizer: sgtok vs tiktoken ==="
    VOCAB=${SG_VOCAB:-data/vocab/gpt2.tiktoken}
    if [ ! -f "$VOCAB" ]; then
        echo "(no vocabulary at $VOCAB: the tokenizer benchmark is skipped; \`make data\` fetches it)"
    else
        make -s B="$B" "$B/bench/bench_tok" >/dev/null || exit 1
        PY=python3
        if [ -x build/venv/bin/python ] && build/venv/bin/python -c 'import tiktoken' 2>/dev/null; then
            PY=build/venv/bin/python
        fi
        have_tt=1
        "$PY" -c 'import tiktoken' 2>/dev/null || {
            have_tt=0
            echo "(tiktoken not importable by $PY: only sgtok is measured; pip install tiktoken)"
        }
        REPS=${BENCH_TOK_REPS:-3}
        for corpus in ${BENCH_TOK_CORPORA:-data/text/demo data/text/mixed}; do
            [ -e "$corpus" ] || { echo "($corpus missing: skipped; \`make data\` fetches it)"; continue; }
            name=$(basename "$corpus")
            echo "--- $corpus: sgtok (bench_tok) ---"
            "$B/bench/bench_tok" --vocab "$VOCAB" --reps "$REPS" --json "$OUT/tok-$name-sgtok.json" \
                "$corpus" | tee "$OUT/tok-$name-sgtok.txt"
            [ "${PIPESTATUS[0]}" = 0 ] || { fail=1; continue; }
            [ "$have_tt" = 1 ] || continue
            echo "--- $corpus: tiktoken $("$PY" -c 'import tiktoken; print(tiktoken.__version__)') ---"
            "$PY" tests/bench/tok_tiktoken.py --vocab "$VOCAB" --reps "$REPS" \
                --json "$OUT/tok-$name-tiktoken.json" "$corpus" | tee "$OUT/tok-$name-tiktoken.txt"
            [ "${PIPESTATUS[0]}" = 0 ] || { fail=1; continue; }
            "$PY" - "$OUT/tok-$name-sgtok.json" "$OUT/tok-$name-tiktoken.json" "$name" <<'PY' | tee "$OUT/tok-$name-summary.txt"
import json, sys
s, t = (json.load(open(p)) for p in sys.argv[1:3])
def get(j, mode, nt=None):
    rs = [r for r in j["runs"] if r["mode"] == mode and (nt is None or r["threads"] == nt)]
    return max(rs, key=lambda r: r["threads"]) if rs else None
s1, t1 = get(s, "docs"), get(t, "docs")
sn, tn = get(s, "items"), get(t, "batch")
if s["tokens"] != t["tokens"] or s["sha256_ids"] != t["sha256_ids"]:
    print(f"{sys.argv[3]}: MISMATCH: sgtok {s['tokens']} tokens sha256 {s['sha256_ids']}, "
          f"tiktoken {t['tokens']} sha256 {t['sha256_ids']}")
    sys.exit(1)
sb1, tb1 = get(s, "items", 1), get(t, "batch", 1)
print(f"{sys.argv[3]}: {s['bytes'] / 1e6:.1f} MB, {s['tokens']} tokens (equal, same sha256): "
      f"1 thread sgtok {s1['best_mb_s']:.1f} / tiktoken {t1['best_mb_s']:.1f} MB/s = "
      f"{s1['best_mb_s'] / t1['best_mb_s']:.2f}x; "
      f"{sn['threads']} threads sgtok {sn['best_mb_s']:.1f} / tiktoken {tn['best_mb_s']:.1f} MB/s = "
      f"{sn['best_mb_s'] / tn['best_mb_s']:.2f}x (scaling {sn['best_mb_s'] / sb1['best_mb_s'] / sn['threads']:.0%} "
      f"vs {tn['best_mb_s'] / tb1['best_mb_s'] / tn['threads']:.0%})")
PY
            [ "${PIPESTATUS[0]}" = 0 ] || fail=1
        done
    fi
fi
if part report; then
    echo "=== sgreport: a sweep of 10,000 runs ==="
    sw=$(mktemp -d)
    bash tests/bench/report_sweep.sh "$sw/sweep" 10000
    best=""
    for i in 1 2 3 4 5; do
        line=$("$B/sgreport" --no-figures --out "$sw/report" "$sw/sweep" 2>&1 | tail -n 1)
        t=$(sed -nE 's/.*\(([0-9.]+) s: scan.*/\1/p' <<<"$line")
        echo "  run $i: $line"
        if [ -z "$best" ] || awk -v a="$t" -v b="$best" 'BEGIN { exit !(a < b) }'; then best=$t; fi
    done
    echo "sgreport: 10000 runs, tables in ${best} s (best of 5; goal < 1 s)" | tee "$OUT/report-10k.txt"
    rm -rf "$sw"
fi
afail=0
if part analysis; then
    OUT=$OUT bash tests/bench/bench_analysis.sh "$B" || afail=1
fi
if part generate; then
    OUT=$OUT bash tests/bench/bench_generate.sh "$B" || afail=1
fi
if part import; then
    OUT=$OUT bash tests/bench/bench_import.sh "$B" || afail=1
fi
if part toy; then
    t0=$(date +%s.%N)
    if "$B/sgtrain" toy --out "$OUT/toy" --quiet; then
        secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.0f", b - a }')
        echo "sgtrain toy: Figure 3 (120 runs) in ${secs} s (goal < 900 s); tables in $OUT/toy/toy.md" | tee "$OUT/toy.txt"
    else
        echo "sgtrain toy: FAILED"; afail=1
    fi
fi
if part dist; then
    OUT=$OUT bash tests/bench/bench_dist.sh "$B" || afail=1
fi
echo "results in $OUT"
[ "$fail" = 0 ] || { echo "tokenizer benchmark: FAILED (token streams differ or a run failed; see above)"; exit 1; }
[ "$afail" = 0 ] || exit 1
