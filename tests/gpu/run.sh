#!/usr/bin/env bash
# make test-gpu: the CUDA backend against the CPU backend, on a machine with
# a GPU.  Ends with "test_gpu: N passed, N failed".
#  1. every CUDA op against the CPU op on random inputs, and twice for
#     bitwise determinism (build/cuda/test_gpu_ops; tolerances stated there);
#  2. every arm's full forward and backward against the CPU on tiny configs
#     (head dims 16 and 64): the loss and every gradient tensor
#     (sgtrain grads + tests/gpu/compare_grads.py); baseline and combo2 again
#     in GPT-2's form (linear biases, tanh GELU) and GPT-NeoX's (rotary
#     positions, the parallel block, an untied head): `sgtrain import`'s models;
#  3. a 50-step loss trajectory of four arms against the CPU (each step's
#     loss within 2% relative: bf16 matmuls versus fp32);
#  4. determinism of training: two CUDA runs give the same parameters bit for
#     bit, and so does a run without the kept bf16 copies (SG_MATMUL_KEEP=0);
#  (2-4 under each attention kernel: wmma, the register-resident tiles
#  SG_ATTN=mma, the default, which a run with SG_ATTN unset must match
#  bitwise, and cuDNN's; 2 also with dQ from the stored dS,
#  SG_ATTN_DQ=stored, and with the forward and dK/dV kernel on Hopper's
#  warpgroup products, SG_ATTN_WGMMA=1, and with the pipelined forward, =2
#  (test_gpu_ops wgmma too, both, under a time limit of its own); and under SG_ATTN=mma, the gradients with
#  SG_MATMUL_TUNE=1 and with SG_ATTN_WARP_ROWS=16 bitwise those without)
#  5. auto_micro_batch: the split it chooses trains bitwise like the split
#     given, and at 124M its measured choice fits the device;
#  6. `sgtrain analyze` of the same checkpoints on both backends: every loss of
#     the injection battery and the probes within 2% relative, exposure,
#     telemetry and incidence within 0.02, a blind-mass ratio at percentile Q
#     within 0.02 / (Q/100) (bf16 matmuls on the GPU; the explicit attention
#     and the corruption are fp32 on both).
#  7. `sgtrain zeroshot` (LAMBADA, HellaSwag, WikiText-2 on the hand-made
#     files of tests/zeroshot) of one CPU-trained model with GPT-2's
#     vocabulary on both backends: every NLL within 2% relative, the counts
#     equal (tests/gpu/compare_zeroshot.py); skipped, with a note, without
#     data/vocab/gpt2.tiktoken (`make data`, or device.sh --pack carries it).
#  8. `sgtrain generate` (the key-value cache: one-row products, the decode
#     attention) of the same model on the GPU against tests/generate/
#     ref_generate.py at bf16's tolerance (log-probabilities within 0.05).
# Everything runs with SG_TWIN_POISON=1: the fp32 tensors the model promised
# to matmuls alone, which the GPU leaves unstored, read as NaN, so a reader
# that broke the promise fails the comparisons (kernels/cuda/matmul.cu); and
# a broken promise must stop the program (test_gpu_ops broken-promise).
set -u
export SG_TWIN_POISON=1
B=${1:-build}
CB=$B/cuda
PY=${PYTHON:-python3}
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*" >&2; }
check() { if eval "$1"; then ok; else bad "$2"; fi; }

out=$("$CB/test_gpu_ops" 2>&1); rc=$?
# every failure (a device run's only record of them), then the end
grep -E "^FAIL" <<<"$out" | head -n 60
echo "$out" | tail -n 25
line=$(grep -E "^test_gpu_ops: [0-9]+ passed, [0-9]+ failed$" <<<"$out")
p=$(sed -E 's/.*: ([0-9]+) passed.*/\1/' <<<"$line"); f=$(sed -E 's/.*passed, ([0-9]+) failed/\1/' <<<"$line")
pass=$((pass + ${p:-0})); fail=$((fail + ${f:-1}))
[ "$rc" -eq 0 ] || [ "${f:-1}" -gt 0 ] || bad "test_gpu_ops exited $rc"
# the attention on Hopper's warpgroup products (SG_ATTN_WGMMA=1 and 2; on other
# GPUs the mma tiles run and it says so): a time limit of its own, so that a
# kernel that hangs costs its minute, not the run
out=$(timeout "${WGMMA_LIMIT_S:-150}" "$CB/test_gpu_ops" wgmma 2>&1); rc=$?
grep -E "^FAIL" <<<"$out" | head -n 40
grep -E "warpgroup|sm_90" <<<"$out" | head -n 3
line=$(grep -E "^test_gpu_ops: [0-9]+ passed, [0-9]+ failed$" <<<"$out")
echo "wgmma: ${line:-no result} (exit $rc)"
p=$(sed -E 's/.*: ([0-9]+) passed.*/\1/' <<<"$line"); f=$(sed -E 's/.*passed, ([0-9]+) failed/\1/' <<<"$line")
pass=$((pass + ${p:-0})); fail=$((fail + ${f:-1}))
[ "$rc" -eq 0 ] || [ "${f:-1}" -gt 0 ] || bad "test_gpu_ops wgmma exited $rc"
out=$(SG_TWIN_POISON=0 "$CB/test_gpu_ops" twins 2>&1)
check 'grep -qE "^test_gpu_ops: [0-9]+ passed, 0 failed$" <<<"$out"' "test_gpu_ops twins with SG_TWIN_POISON=0: $(grep -m 10 FAIL <<<"$out")"
for how in fwd dw dout; do
    out=$("$CB/test_gpu_ops" broken-promise $how 2>&1); rc=$?
    check '[ $rc -eq 1 ] && grep -q "promised to matmuls alone (op_matmul_only)" <<<"$out"' \
        "a broken promise ($how) stops the program (exit $rc): $(tail -n 2 <<<"$out")"
done

"$B/sgsynth" --out "$W/data" --vocab 512 --val-tokens 40000 --train-tokens 200000 --shard-tokens 100000 >/dev/null
ARMS="baseline offbyone sinklogit sinktoken normgate renorm projgate combo combo2"
for cfg in "d16:--tier test" "d64:--tier test --n_embd 128 --n_head 2 --block_size 64"; do
    name=${cfg%%:*} flags=${cfg#*:}
    for arm in $ARMS; do
        "$B/sgtrain" grads $flags --arm $arm --seed 3 --data "$W/data" -o "$W/cpu-$name-$arm.st" >/dev/null
        # the attention's two tile kernels (SG_ATTN), the mma backward
        # with dQ from the stored dS (SG_ATTN_DQ=stored) and with its strips
        # pipelined (SG_ATTN_BWD_PIPE=1: bitwise the plain strips' too), and
        # cuDNN's fused attention (SG_ATTN=cudnn; renorm's log-bias on the
        # mma tiles)
        for tiles in wmma mma mma-dqs mma-bp cudnn wgmma wgmma2; do
            SG_ATTN=$(case $tiles in mma-* | wgmma*) echo mma ;; *) echo $tiles ;; esac) \
                SG_ATTN_DQ=$([ $tiles = mma-dqs ] && echo stored || echo recompute) \
                SG_ATTN_BWD_PIPE=$([ $tiles = mma-bp ] && echo 1 || echo 0) \
                SG_ATTN_WGMMA=$(case $tiles in wgmma) echo 1 ;; wgmma2) echo 2 ;; *) echo 0 ;; esac) \
                timeout 60 "$CB/sgtrain" grads $flags --arm $arm --seed 3 --data "$W/data" -o "$W/gpu-$name-$arm-$tiles.st" >/dev/null
            out=$("$PY" tests/gpu/compare_grads.py "$W/cpu-$name-$arm.st" "$W/gpu-$name-$arm-$tiles.st" \
                "$name $arm $tiles" 2>&1)
            if grep -q "all within tolerance" <<<"$out" && grep -q "loss .* ok" <<<"$out"; then ok; else bad "$out"; fi
            tail -n 1 <<<"$out"
        done
        if cmp -s "$W/gpu-$name-$arm-mma-bp.st" "$W/gpu-$name-$arm-mma.st"; then ok; else
            bad "$name $arm: the gradients with SG_ATTN_BWD_PIPE=1 are not bitwise the plain strips'"
        fi
    done
done

# GPT-2's form: the bias ops and the tanh GELU, with the promises the
# model then does not make (src/model.c, promise_acts)
gpt2="--tier test --n_embd 128 --n_head 2 --block_size 64 --ln_bias true --linear_bias true --gelu_tanh true"
for arm in baseline combo2; do
    # shellcheck disable=SC2086
    "$B/sgtrain" grads $gpt2 --arm $arm --seed 3 --data "$W/data" -o "$W/cpu-gpt2-$arm.st" >/dev/null
    for tiles in wmma mma; do
        # shellcheck disable=SC2086
        SG_ATTN=$tiles "$CB/sgtrain" grads $gpt2 --arm $arm --seed 3 --data "$W/data" -o "$W/gpu-gpt2-$arm-$tiles.st" >/dev/null
        out=$("$PY" tests/gpu/compare_grads.py "$W/cpu-gpt2-$arm.st" "$W/gpu-gpt2-$arm-$tiles.st" "gpt2 $arm $tiles" 2>&1)
        if grep -q "all within tolerance" <<<"$out" && grep -q "loss .* ok" <<<"$out"; then ok; else bad "$out"; fi
        tail -n 1 <<<"$out"
    done
done

# GPT-NeoX's form (Pythia): rotary positions on a quarter of each head, the
# parallel block, an untied head
neox="--tier test --n_embd 128 --n_head 2 --block_size 64 --ln_bias true --linear_bias true --rotary_dims 16 --parallel_residual true --tie_embeddings false"
for arm in baseline sinktoken combo2; do
    # shellcheck disable=SC2086
    "$B/sgtrain" grads $neox --arm $arm --seed 3 --data "$W/data" -o "$W/cpu-neox-$arm.st" >/dev/null
    for tiles in wmma mma; do
        # shellcheck disable=SC2086
        SG_ATTN=$tiles "$CB/sgtrain" grads $neox --arm $arm --seed 3 --data "$W/data" -o "$W/gpu-neox-$arm-$tiles.st" >/dev/null
        out=$("$PY" tests/gpu/compare_grads.py "$W/cpu-neox-$arm.st" "$W/gpu-neox-$arm-$tiles.st" "neox $arm $tiles" 2>&1)
        if grep -q "all within tolerance" <<<"$out" && grep -q "loss .* ok" <<<"$out"; then ok; else bad "$out"; fi
        tail -n 1 <<<"$out"
    done
done

# switches that must change no bit: the matmuls' tuned algorithms
# (SG_MATMUL_TUNE=1: only candidates with the first choice's bits), and one
# 16-row m-tile a warp in the mma attention (SG_ATTN_WARP_ROWS=16)
flags="--tier test --n_embd 128 --n_head 2 --block_size 64"
for arm in baseline combo2; do
    for setting in "SG_MATMUL_TUNE=1" "SG_ATTN_WARP_ROWS=16"; do
        # shellcheck disable=SC2086
        env SG_ATTN=mma $setting "$CB/sgtrain" grads $flags --arm $arm --seed 3 --data "$W/data" \
            -o "$W/sw-$arm.st" >/dev/null 2>&1
        check 'cmp -s "$W/sw-$arm.st" "$W/gpu-d64-$arm-mma.st"' \
            "d64 $arm SG_ATTN=mma $setting: gradients bitwise those without"
    done
done

T="train --tier test --iters 50 --warmup 5 --val_every 0 --ckpt_every 0 --data $W/data"
trajectory() { # arm, GPU run dir, label: every step's loss within 2% of the CPU's
    local worst
    worst=$(paste <(grep '"loss"' "$W/cpu-$1/metrics.jsonl" | sed -E 's/.*"loss":([^,]*),.*/\1/') \
                  <(grep '"loss"' "$2/metrics.jsonl" | sed -E 's/.*"loss":([^,]*),.*/\1/') |
            awk 'BEGIN { w = 0; n = 0 } { n++; e = ($2 - $1) / $1; if (e < 0) e = -e; if (e > w) w = e } END { printf "%d %.2e", n, w }')
    check '[ "${worst% *}" = 50 ] && awk -v w="${worst#* }" "BEGIN { exit !(w <= 0.02) }"' "$3: 50-step trajectory within 2% of the CPU (steps, worst relative): $worst"
    echo "trajectory $3: steps and worst relative difference $worst"
}
for arm in baseline sinklogit normgate combo2; do
    "$B/sgtrain" $T --arm $arm --out "$W/cpu-$arm" 2>/dev/null
    SG_ATTN=wmma "$CB/sgtrain" $T --arm $arm --out "$W/gpu-$arm" 2>/dev/null
    trajectory $arm "$W/gpu-$arm" "$arm SG_ATTN=wmma"
done
for arm in baseline combo2; do # the register-resident attention tiles (SG_ATTN=mma)
    SG_ATTN=mma "$CB/sgtrain" $T --arm $arm --out "$W/gpu-mma-$arm" 2>/dev/null
    trajectory $arm "$W/gpu-mma-$arm" "$arm SG_ATTN=mma"
done
crc() { sed -nE 's/.*"params_crc32": "([0-9a-f]+)".*/\1/p' "$1/result.json"; }
for arm in baseline combo2; do # cuDNN's fused attention (SG_ATTN=cudnn), its calls counted
    SG_ATTN=cudnn SG_MATMUL_STATS=1 "$CB/sgtrain" $T --arm $arm --out "$W/gpu-cudnn-$arm" 2>"$W/gpu-cudnn-$arm.log"
    trajectory $arm "$W/gpu-cudnn-$arm" "$arm SG_ATTN=cudnn"
    echo "$arm SG_ATTN=cudnn: $(grep -E "ran on cuDNN|cuDNN does not take" "$W/gpu-cudnn-$arm.log" | tr '\n' ' ')"
    check '! grep -q "cuDNN does not take" "$W/gpu-cudnn-$arm.log" && grep -qE " [1-9][0-9]* backwards ran on cuDNN" "$W/gpu-cudnn-$arm.log"' \
        "$arm SG_ATTN=cudnn ran on cuDNN: $(grep -E "cuDNN" "$W/gpu-cudnn-$arm.log" | head -n 3)"
done
SG_ATTN=cudnn "$CB/sgtrain" $T --arm combo2 --out "$W/gpu-cudnn-combo2-again" 2>/dev/null
check '[ -n "$(crc $W/gpu-cudnn-combo2)" ] && [ "$(crc $W/gpu-cudnn-combo2)" = "$(crc $W/gpu-cudnn-combo2-again)" ]' "two CUDA runs of combo2 with SG_ATTN=cudnn give bitwise equal parameters (cuDNN's deterministic backward)"
SG_ATTN=mma "$CB/sgtrain" $T --arm combo2 --out "$W/gpu-mma-combo2-again" 2>/dev/null
SG_ATTN=wmma "$CB/sgtrain" $T --arm combo2 --out "$W/gpu-combo2-again" 2>/dev/null
check '[ -n "$(crc $W/gpu-combo2)" ] && [ "$(crc $W/gpu-combo2)" = "$(crc $W/gpu-combo2-again)" ]' "two CUDA runs of combo2 with SG_ATTN=wmma give bitwise equal parameters"
# SG_ATTN unset: the mma tiles, the default (kernels/cuda/attention_tiles_env.h)
env -u SG_ATTN "$CB/sgtrain" $T --arm combo2 --out "$W/gpu-default-combo2" 2>/dev/null
check '[ -n "$(crc $W/gpu-mma-combo2)" ] && [ "$(crc $W/gpu-default-combo2)" = "$(crc $W/gpu-mma-combo2)" ]' "combo2 with SG_ATTN unset gives the parameters of SG_ATTN=mma bitwise (the default)"
check '[ -n "$(crc $W/gpu-mma-combo2)" ] && [ "$(crc $W/gpu-mma-combo2)" = "$(crc $W/gpu-mma-combo2-again)" ]' "two CUDA runs of combo2 with SG_ATTN=mma give bitwise equal parameters"
# the matmuls' kept bf16 copies, the producers' twins and the weights' copies
# that AdamW keeps (kernels/cuda/matmul.cu, weight_copies.cu) hold the bits
# of the casts they replace: without them (SG_MATMUL_KEEP=0), the same
# parameters, over steps (AdamW) and micro-batches
SG_ATTN=mma "$CB/sgtrain" $T --arm combo2 --grad_accum 2 --out "$W/gpu-mma-combo2-acc" 2>/dev/null
SG_ATTN=mma SG_MATMUL_KEEP=0 "$CB/sgtrain" $T --arm combo2 --grad_accum 2 --out "$W/gpu-mma-combo2-nokeep" 2>/dev/null
check '[ -n "$(crc $W/gpu-mma-combo2-acc)" ] && [ "$(crc $W/gpu-mma-combo2-acc)" = "$(crc $W/gpu-mma-combo2-nokeep)" ]' \
    "combo2 with SG_ATTN=mma, 2 micro-batches a step: SG_MATMUL_KEEP=0 gives bitwise the parameters of the kept copies ($(crc $W/gpu-mma-combo2-acc) $(crc $W/gpu-mma-combo2-nokeep))"

# auto_micro_batch (src/batch_split.h) on the device: the test tier's 4
# sequences a step as one micro-batch, bitwise the explicit split; and the
# 124M tier's 32, whose probes measure the real footprint: the choice
# measured within the budget, the run's peak within the device, and the
# next larger split over the budget, if there is one
bsv() { sed -nE "s/.*\"batch_split\": \{.*\"$2\": ([0-9a-z]+).*/\1/p" "$1/result.json" 2>/dev/null; }
peak() { sed -nE 's/.*"device_peak_bytes": ([0-9]+).*/\1/p' "$1/result.json" 2>/dev/null; }
A="train --tier test --arm combo2 --iters 6 --warmup 2 --val_every 0 --ckpt_every 0 --data $W/data"
SG_ATTN=mma "$CB/sgtrain" $A --micro_batch 1 --grad_accum 4 --auto_micro_batch true --out "$W/auto" 2>"$W/auto.log"
SG_ATTN=mma "$CB/sgtrain" $A --micro_batch 4 --grad_accum 1 --out "$W/auto-exp" 2>/dev/null
check '[ "$(bsv "$W/auto" micro_batch)" = 4 ] && [ -n "$(crc "$W/auto")" ] && [ "$(crc "$W/auto")" = "$(crc "$W/auto-exp")" ]' \
    "auto_micro_batch: the test tier's 4 sequences as one micro-batch, bitwise micro_batch 4 ($(crc "$W/auto") $(crc "$W/auto-exp")): $(grep -m1 auto_micro_batch "$W/auto.log")"
"$B/sgsynth" --out "$W/data50k" --vocab 50257 --val-tokens 40000 --train-tokens 200000 --shard-tokens 100000 >/dev/null
# 5 steps: the first sets up, 2 to 4 give the training loop's own rate
# and MFU (result.json's throughput), the 5th its split by op
SG_ATTN=mma "$CB/sgtrain" train --tier 124M --arm combo2 --iters 5 --warmup 1 --val_every 0 --val_batches_final 1 \
    --ckpt_every 0 --auto_micro_batch true --profile_every 5 --data "$W/data50k" --out "$W/auto124" 2>"$W/auto124.log"
room=$(bsv "$W/auto124" room_bytes) kept=$(bsv "$W/auto124" kept_free_bytes) mb=$(bsv "$W/auto124" micro_batch)
check '[ -n "$mb" ] && [ "$(bsv "$W/auto124" measured_bytes)" -le $((room - kept)) ] && [ "$(peak "$W/auto124")" -le "$room" ] &&
       { nx=$(bsv "$W/auto124" next_predicted_bytes); [ "$nx" = 0 ] || [ "$nx" -gt $((room - kept)) ]; }' \
    "auto_micro_batch at 124M: $(grep -m1 auto_micro_batch "$W/auto124.log"); the run's peak $(peak "$W/auto124") B"
echo "auto_micro_batch 124M: $(grep -m1 auto_micro_batch "$W/auto124.log"); device peak $(peak "$W/auto124") B; $(grep -m1 '^done:' "$W/auto124.log")"
echo "124M combo2 under auto_micro_batch, the training loop: $(sed -nE 's/.*"throughput": (\{[^}]*\}).*/\1/p' "$W/auto124/result.json")"
echo "$(grep -m1 'profile of' "$W/auto124.log")"

AN="--batches 2 --batch-size 4 --quiet"
for arm in baseline sinklogit normgate combo2; do
    "$B/sgtrain" analyze "$W/cpu-$arm" --out "$W/an-cpu-$arm" $AN
    "$CB/sgtrain" analyze "$W/cpu-$arm" --out "$W/an-gpu-$arm" $AN
    out=$("$PY" tests/gpu/compare_analysis.py "$W/an-cpu-$arm" "$W/an-gpu-$arm" 2>&1)
    check 'grep -q "analysis within tolerance" <<<"$out"' "$arm: analyze on the GPU vs the CPU"$'\n'"$out"
    echo "analyze $arm: $out"
done
V=data/vocab/gpt2.tiktoken
if [ -s "$V" ]; then
    "$B/sgtrain" train --tier test --arm combo2 --seed 1 --vocab_size 50257 --iters 3 --data "$W/data50k" \
        --out "$W/zs" >/dev/null 2>&1
    zs_ok=1
    for t in lambada:lambada.jsonl hellaswag:hellaswag.jsonl wikitext:wikitext.raw; do
        "$B/sgtrain" zeroshot "$W/zs" --task ${t%%:*} --file "tests/zeroshot/${t#*:}" --vocab "$V" --out "$W/zs-cpu" \
            --quiet || zs_ok=0
        "$CB/sgtrain" zeroshot "$W/zs" --task ${t%%:*} --file "tests/zeroshot/${t#*:}" --vocab "$V" --out "$W/zs-gpu" \
            --quiet || zs_ok=0
    done
    out=$("$PY" tests/gpu/compare_zeroshot.py "$W/zs-cpu" "$W/zs-gpu" 2>&1)
    check '[ $zs_ok = 1 ] && grep -q "zeroshot within tolerance" <<<"$out"' "zeroshot on the GPU vs the CPU"$'\n'"$out"
    echo "zeroshot: $out"
    # generation through the key-value cache on the GPU (docs/generate.md),
    # against the reference at bf16's tolerance (tests/generate/ref_generate.py
    # --bf16: the products' operands rounded as the GPU rounds them)
    "$B/sgtrain" export "$W/zs" -o "$W/zs/model.safetensors" 2>/dev/null
    gen_ok=1
    "$CB/sgtrain" generate "$W/zs" --prompt "The cat sat" --temperature 0 --vocab "$V" --json "$W/gen-greedy.json" \
        --quiet >/dev/null || gen_ok=0
    "$CB/sgtrain" generate "$W/zs" --prompt "The cat sat" --temperature 0.8 --top-k 5 --samples 2 --seed 3 --telemetry \
        --vocab "$V" --json "$W/gen-sampled.json" --quiet >/dev/null || gen_ok=0
    if "$PY" -c 'import numpy' 2>/dev/null; then
        out=$("$PY" tests/generate/ref_generate.py --bf16 --atol 0.05 --tie 0.05 "$W/zs/model.safetensors" "$V" \
            "$W/gen-greedy.json" "$W/gen-sampled.json" 2>&1)
        check '[ $gen_ok = 1 ] && grep -qE "ref_generate: [0-9]+ passed, 0 failed" <<<"$out"' \
            "generate on the GPU against the reference"$'\n'"$out"
        echo "generate: $(tr '\n' ' ' <<<"$out")"
    else
        check '[ $gen_ok = 1 ]' "generate on the GPU runs"
        echo "note: no NumPy for $PY: generation is checked for its exit status only"
    fi
else
    echo "note: no $V: the zero-shot and generation comparisons are skipped"
fi
echo "test_gpu: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
