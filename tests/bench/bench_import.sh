#!/usr/bin/env bash
# Table 12's incidence survey on a full-size GPT-2 (124M: 12 layers, 12
# heads, width 768, context 1024), sinkgate against Hugging Face
# transformers in one run: `sgtrain import`, then `sgtrain analyze --what
# incidence` on the paper's 16 blocks of 1024 tokens (2 batches of 8), and
# tests/bench/hf_incidence.py (transformers' eager GPT-2 with its attention
# probabilities, the statistics in torch) on the same windows.  The model is
# GPT-2's shape with random weights, written in the Hub's layout (the real
# checkpoints cannot be downloaded here): the work does not depend on the
# values.  Both sides' per-head values are compared, so the figures time the
# same measurement.  BENCH_ONLY=import bash tests/bench/run.sh runs it.
#
#   bash tests/bench/bench_import.sh [BUILD_DIR]
#
# BENCH_IMPORT_DATA (default data/demo-gpt2) holds val.bin; BENCH_THREADS
# the threads of both sides.  transformers comes from BENCH_TORCH_PY (a
# python with torch and transformers); without it only sinkgate is timed.
# Results: $OUT (default BUILD_DIR/bench-results)/import.{txt,json}.
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
hf=$OUT/import-models/gpt2-random
if [ ! -s "$hf/model.safetensors" ]; then
    mkdir -p "$hf"
    "$NPY" - "$hf" <<'PYEOF' || { echo "making the model failed"; exit 1; }
# GPT-2 124M's config and tensors in the Hub's layout (Conv1D [in, out],
# no prefix), random: matrices of std 0.05 (attention far from uniform),
# LayerNorm and biases near their GPT-2 scale
import json, struct, sys
import numpy as np
out = sys.argv[1]
L, H, C, T, V = 12, 12, 768, 1024, 50257
rng = np.random.default_rng(0)
t = {"wte.weight": rng.normal(0, 0.05, (V, C)), "wpe.weight": rng.normal(0, 0.02, (T, C)),
     "ln_f.weight": 1 + rng.normal(0, 0.1, C), "ln_f.bias": rng.normal(0, 0.05, C)}
for l in range(L):
    p = f"h.{l}."
    for n, shape in (("attn.c_attn", (C, 3 * C)), ("attn.c_proj", (C, C)), ("mlp.c_fc", (C, 4 * C)),
                     ("mlp.c_proj", (4 * C, C))):
        t[p + n + ".weight"] = rng.normal(0, 0.05, shape)
        t[p + n + ".bias"] = rng.normal(0, 0.05, shape[1])
    for n in ("ln_1", "ln_2"):
        t[p + n + ".weight"] = 1 + rng.normal(0, 0.1, C)
        t[p + n + ".bias"] = rng.normal(0, 0.05, C)
head, off, blobs = {"__metadata__": {"format": "pt"}}, 0, []
for k, v in t.items():
    b = v.astype("<f4").tobytes()
    head[k] = {"dtype": "F32", "shape": list(v.shape), "data_offsets": [off, off + len(b)]}
    off += len(b)
    blobs.append(b)
h = json.dumps(head).encode()
h += b" " * (-len(h) % 8)
with open(out + "/model.safetensors", "wb") as f:
    f.write(struct.pack("<Q", len(h)) + h)
    for b in blobs:
        f.write(b)
json.dump({"model_type": "gpt2", "n_layer": L, "n_head": H, "n_embd": C, "n_positions": T, "n_ctx": T,
           "vocab_size": V, "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5,
           "architectures": ["GPT2LMHeadModel"]}, open(out + "/config.json", "w"))
PYEOF
fi
echo "=== Table 12's survey on GPT-2 124M (random weights): sgtrain against transformers, 16 x 1024 tokens, $THREADS thread(s)${PY:+, torch $("$PY" -c 'import torch; print(torch.__version__)'), transformers $("$PY" -c 'import transformers; print(transformers.__version__)')} ==="
m=$OUT/import-models/gpt2-random.safetensors
t0=$(date +%s.%N)
"$SG" import "$hf" --out "$m" --force --quiet || { echo "sgtrain import failed"; exit 1; }
t_import=$(python3 -c "import sys; print(float(sys.argv[2]) - float(sys.argv[1]))" "$t0" "$(date +%s.%N)")
an=$OUT/import-analysis
"$SG" analyze "$m" --what incidence --data "$DATA" --batches 2 --batch-size 8 --seq-len 1024 --threads "$THREADS" \
    --out "$an" --quiet >/dev/null || { echo "sgtrain analyze failed"; exit 1; }
if [ -n "$PY" ]; then
    "$PY" tests/bench/hf_incidence.py "$hf" "$DATA" --batches 2 --batch-size 8 --seq-len 1024 --threads "$THREADS" \
        --json "$OUT/import-hf.json" 2>"$OUT/import-hf.log" || { echo "hf_incidence.py failed:"; tail -n 5 "$OUT/import-hf.log"; exit 1; }
fi
python3 - "$an/incidence.json" "$OUT/import-hf.json" "$t_import" "$OUT/import.json" <<'PYEOF' | tee "$OUT/import.txt"
import json, os, sys
sg = json.load(open(sys.argv[1]))
row = {"import_s": float(sys.argv[3]), "sinkgate_s": sg["setup"]["seconds"], "threads": sg["setup"]["threads"]}
print(f"sgtrain import: {row['import_s']:.2f} s (124,439,808 parameters, 498 MB)")
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
