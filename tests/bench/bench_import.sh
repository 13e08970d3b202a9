#!/usr/bin/env bash
# Table 12's incidence survey on a full-size GPT-2 (124M: 12 layers, 12
# heads, width 768, context 1024) and Pythia-160m (GPT-NeoX: the same
# trunk with rotary positions on a quarter of each head, attention and MLP
# in parallel, an untied head, vocabulary 50304), sinkgate against Hugging
# Face transformers in one run: `sgtrain import`, then `sgtrain analyze
# --what incidence` on the paper's 16 blocks of 1024 tokens (2 batches of
# 8), and tests/bench/hf_incidence.py (transformers' eager model with its
# attention probabilities, the statistics in torch) on the same windows.
# The models have their shapes with random weights, written in the Hub's
# layouts (the real checkpoints cannot be downloaded here): the work does
# not depend on the values.  Both sides' per-head values are compared, so
# the figures time the same measurement.  BENCH_ONLY=import bash
# tests/bench/run.sh runs it.
#
#   bash tests/bench/bench_import.sh [BUILD_DIR]
#
# BENCH_IMPORT_DATA (default data/demo-gpt2) holds val.bin; BENCH_THREADS
# the threads of both sides.  transformers comes from BENCH_TORCH_PY (a
# python with torch and transformers); without it only sinkgate is timed.
# Results: $OUT (default BUILD_DIR/bench-results)/import.{txt,json} (GPT-2)
# and import-neox.{txt,json} (Pythia).
set -u
B=${1:-build}
OUT=${OUT:-$B/bench-results}
mkdir -p "$OUT"
DATA=${BENCH_IMPORT_DATA:-data/demo-gpt2}
THREADS=${BENCH_THREADS:-$(nproc)}
[ -f "$DATA/val.bin" ] || { echo "(no $DATA/val.bin: the import benchmark is skipped; \`make data\` makes it)"; exit 0; }
make -s B="$B" "$B/sgtrain" >/dev/null || exit 1
SG=$B/sgtrain
NPY=build/venv/bin/python
"$NPY" -c 'import numpy' 2>/dev/null || NPY=python3
PY=
for p in ${BENCH_TORCH_PY:-} build/venv/bin/python python3; do
    if command -v "$p" >/dev/null 2>&1 && "$p" -c 'import torch, transformers' 2>/dev/null; then PY=$p; break; fi
done
[ -n "$PY" ] || echo "(transformers not importable: only sinkgate is measured; BENCH_TORCH_PY names a python with torch and transformers)"
hf=$OUT/import-models/gpt2-random hfn=$OUT/import-models/pythia160m-random
for d in "$hf:gpt2" "$hfn:pythia"; do
    if [ ! -s "${d%:*}/model.safetensors" ]; then
        mkdir -p "${d%:*}"
        "$NPY" tests/bench/write_random_hf.py "${d#*:}" "${d%:*}" || { echo "making the model failed"; exit 1; }
    fi
done
# the same windows under Pythia's vocabulary size (every token below 50257 < 50304)
DATAN=$OUT/import-models/val-50304
mkdir -p "$DATAN"
python3 - "$DATA/val.bin" "$DATAN/val.bin" <<'PYEOF'
import struct, sys
b = bytearray(open(sys.argv[1], "rb").read())
struct.pack_into("<I", b, 20, 50304)
b[32:64] = bytes(32)  # no vocabulary identity: the model has none either
open(sys.argv[2], "wb").write(b)
PYEOF
survey() { # NAME HF_DIR DATA_DIR PARAMS_TEXT RESULT_STEM
    local name=$1 hf=$2 data=$3 what=$4 stem=$5
    echo "=== Table 12's survey on $name (random weights): sgtrain against transformers, 16 x 1024 tokens, $THREADS thread(s)${PY:+, torch $("$PY" -c 'import torch; print(torch.__version__)'), transformers $("$PY" -c 'import transformers; print(transformers.__version__)')} ==="
    local m an t0 t_import
    m=$OUT/import-models/$(basename "$hf").safetensors an=$OUT/$stem-analysis
    t0=$(date +%s.%N)
    "$SG" import "$hf" --out "$m" --force --quiet || { echo "sgtrain import failed"; return 1; }
    t_import=$(python3 -c "import sys; print(float(sys.argv[2]) - float(sys.argv[1]))" "$t0" "$(date +%s.%N)")
    "$SG" analyze "$m" --what incidence --data "$data" --batches 2 --batch-size 8 --seq-len 1024 --threads "$THREADS" \
        --out "$an" --quiet >/dev/null || { echo "sgtrain analyze failed"; return 1; }
    rm -f "$OUT/$stem-hf.json"
    if [ -n "$PY" ]; then
        "$PY" tests/bench/hf_incidence.py "$hf" "$data" --batches 2 --batch-size 8 --seq-len 1024 --threads "$THREADS" \
            --json "$OUT/$stem-hf.json" 2>"$OUT/$stem-hf.log" || { echo "hf_incidence.py failed:"; tail -n 5 "$OUT/$stem-hf.log"; return 1; }
    fi
    python3 - "$an/incidence.json" "$OUT/$stem-hf.json" "$t_import" "$OUT/$stem.json" "$what" <<'PYEOF' | tee "$OUT/$stem.txt"
import json, os, sys
sg = json.load(open(sys.argv[1]))
row = {"import_s": float(sys.argv[3]), "sinkgate_s": sg["setup"]["seconds"], "threads": sg["setup"]["threads"]}
print(f"sgtrain import: {row['import_s']:.2f} s ({sys.argv[5]})")
line = f"sgtrain analyze --what incidence: {row['sinkgate_s']:.2f} s"
if os.path.exists(sys.argv[2]):
    hf = json.load(open(sys.argv[2]))
    row["transformers_s"] = hf["seconds"]
    worst = {}
    for l, layer in enumerate(sg["layers"]):
        for h, a in enumerate(layer["heads"]):
            b = hf["heads"][l][h]
            for k in ("sink_mass", "r0_ratio"):
                worst[k] = max(worst.get(k, 0), abs(a[k] - b[k]))
            for k in ("blind_mass_ratio", "content_share"):
                worst[k] = max([worst.get(k, 0)] + [abs(x - y) for x, y in zip(a[k], b[k])])
    row["worst_difference"] = worst
    line += (f"; transformers + torch: {hf['seconds']:.2f} s; sinkgate {hf['seconds'] / row['sinkgate_s']:.2f}x as fast"
             f"\nper-head values, largest difference: " + ", ".join(f"{k} {v:.1e}" for k, v in worst.items()))
print(line)
json.dump(row, open(sys.argv[4], "w"), indent=1)
PYEOF
}
rc=0
survey "GPT-2 124M" "$hf" "$DATA" "124,439,808 parameters, 498 MB" import || rc=1
survey "Pythia-160m" "$hfn" "$DATAN" "162,322,944 parameters, 649 MB" import-neox || rc=1
exit $rc
