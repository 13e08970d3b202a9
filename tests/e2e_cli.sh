#!/usr/bin/env bash
# End-to-end tests of the sgtrain command line on synthetic shards: a run
# from start to result.json, determinism, resume after stop_at and after a
# signal (bitwise equal to an uninterrupted run), micro-batch/accumulation
# equivalence, export, and every bad input a user can give: each must exit
# non-zero with a clear message and leave existing files untouched.
set -u
B=${1:-build}
# The runs here are tiny: a second thread only adds fork/join overhead, and
# its spin-waiting burns the CPU another process may need (under
# oversubscription that slows a run a hundredfold). Threads are tested in test_attention.
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
SG=$(cd "$(dirname "$B")" && pwd)/$(basename "$B")/sgtrain
SYN=$(dirname "$SG")/sgsynth
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
E2E_NAME=e2e
source "$(dirname "$0")/lib.sh"

json() { sed -nE "s/.*\"$2\": \"?([^\",]*)\"?,?$/\1/p" "$1" | head -n 1; }

D=$W/data
"$SYN" --out "$D" --vocab 512 --val-tokens 20000 --train-tokens 120000 --shard-tokens 50000 >/dev/null
check '[ -f $D/val.bin ] && [ -f $D/train_002.bin ]' "sgsynth wrote the data directory"
T="train --tier test --data $D"

# --- a run, and its run directory -----------------------------------------
expect 0 "final val_loss" -- "$SG" $T --arm combo2 --out "$W/a"
for f in config.yaml metrics.jsonl checkpoint.bin result.json; do
    check "[ -s $W/a/$f ]" "run directory holds $f"
done
check '[ "$(grep -c "\"loss\"" $W/a/metrics.jsonl)" -eq 20 ]' "20 training lines in metrics.jsonl"
check 'grep -q "\"final\":true" $W/a/metrics.jsonl' "final validation line"
check '[ "$(json $W/a/result.json arm)" = combo2 ] && [ "$(json $W/a/result.json steps)" = 20 ]' "result.json arm/steps"
check 'grep -q "\"arm_extra\": 72" $W/a/result.json' "combo2 extra params: H(d+2) per layer = 2*18*2 = 72"
expect 0 "already complete" -- "$SG" $T --arm combo2 --out "$W/a"

# --- determinism: same config and seed, same bits ------------------------
"$SG" $T --arm combo2 --out "$W/b" 2>/dev/null
check '[ "$(json $W/a/result.json params_crc32)" = "$(json $W/b/result.json params_crc32)" ]' "two runs give bitwise equal parameters"
check '[ "$(json $W/a/result.json final_val_loss)" = "$(json $W/b/result.json final_val_loss)" ]' "two runs give the same final loss"
"$SG" $T --arm combo2 --threads 2 --out "$W/t2a" 2>/dev/null
"$SG" $T --arm combo2 --threads 2 --out "$W/t2b" 2>/dev/null
check '[ "$(json $W/t2a/result.json params_crc32)" = "$(json $W/t2b/result.json params_crc32)" ]' "two runs on 2 threads give bitwise equal parameters"
check 'grep -q "\"threads\": 2" $W/t2a/result.json' "result.json records the thread count"
"$SG" $T --arm combo2 --seed 1 --out "$W/c" 2>/dev/null
check '[ "$(json $W/a/result.json params_crc32)" != "$(json $W/c/result.json params_crc32)" ]' "another seed gives another model"

# --- MFU (src/mfu.h): none on the CPU unless --peak_tflops gives a peak ---
check 'grep -q "\"peak_tflops_per_rank\": null, \"peak_source\": null, \"mfu\": null}" $W/a/result.json &&
       ! grep -q "\"mfu\"" $W/a/metrics.jsonl' "no peak on the CPU: result.json's mfu is null, metrics.jsonl has none"
# the test tier: L 2, C 32, V 512, T 16, non-embedding 2 x (12 x 32 x 32 + 2 x 32) + 32 = 24,736
# and combo2's 72; FLOP a token 6 (24,808 + 512 x 32) + 6 x 2 x 16 x 32 = 253,296
expect 0 "MFU against 0.002 TFLOP/s a rank \(--peak_tflops\), 0.0002533 GFLOP a token" -- \
    "$SG" $T --arm combo2 --peak_tflops 0.002 --out "$W/mfu"
check 'python3 - "$W/mfu" <<'"'"'PY'"'"'
import json, sys
d = sys.argv[1]
r = json.load(open(d + "/result.json"))
t = r["throughput"]
assert t["flop_per_token"] == 253296, t
assert t["peak_tflops_per_rank"] == 0.002 and t["peak_source"] == "--peak_tflops", t
assert t["steady_steps"] == 19 and t["steady_tokens_per_s"] > 0, t
assert abs(t["mfu"] - 253296 * t["steady_tokens_per_s"] / 2e9) <= 1e-5 * t["mfu"], t
assert r["config"]["peak_tflops"] == 0.002, r["config"]
lines = [json.loads(l) for l in open(d + "/metrics.jsonl") if "\"loss\"" in l]
assert len(lines) == 20
for l in lines:
    assert abs(l["mfu"] - 253296 * l["tokens_per_s"] / 2e9) <= 1e-6 + 1e-3 * l["mfu"], l
PY' "--peak_tflops: metrics.jsonl's and result.json's mfu are FLOP a token x tokens/s over the peak (253,296 FLOP a token)"
check '[ "$(json $W/a/result.json params_crc32)" = "$(json $W/mfu/result.json params_crc32)" ]' "--peak_tflops changes nothing trained"
expect 2 "peak_tflops: expected a number >= 0, got '-1'" -- "$SG" $T --arm combo2 --peak_tflops -1 --out "$W/mfu_bad"
expect 2 'SG_DIST_TIMES must be "1" .* or "0" \(or unset: off\), not "yes"' -- env SG_DIST_TIMES=yes "$SG" $T --out "$W/dt_bad"
check '[ ! -e $W/dt_bad ]' "a bad SG_DIST_TIMES leaves no run directory"
check '[ ! -e $W/mfu_bad ]' "a bad --peak_tflops leaves no run directory"

# --- profile_every (src/profile.h): every 5th step with each op timed -----
expect 0 "profile of 4 steps \(each op synchronised\): [0-9.]+ ms a step: matmul [0-9.]+ \([0-9]+%\) attention .* gate .* classifier .*, other " -- \
    "$SG" $T --arm combo2 --profile_every 5 --out "$W/prof"
check 'python3 - "$W/prof" <<'"'"'PY'"'"'
import json, sys
d = sys.argv[1]
r = json.load(open(d + "/result.json"))
p, t = r["profile"], r["throughput"]
assert p["steps"] == 4 and t["steady_steps"] == 15, (p["steps"], t)
cats = p["categories_ms"]
assert set(cats) == {"matmul", "attention", "gate", "classifier", "layernorm", "pointwise", "embed", "optimizer"}, cats
assert all(v > 0 for v in cats.values()), cats
assert abs(sum(cats.values()) + p["other_ms"] - p["ms_per_step"]) < 1e-4, p
assert p["other_ms"] > -1e-6, p
sites = p["sites"]
assert 0 < len(sites) <= 14 and all(a["ms"] >= b["ms"] for a, b in zip(sites, sites[1:])), sites
assert any(s["category"] == "matmul" and s["tflops"] > 0 for s in sites), sites
lines = [json.loads(l) for l in open(d + "/metrics.jsonl") if "\"loss\"" in l]
assert [l["step"] for l in lines if l.get("profiled")] == [5, 10, 15, 20], lines
PY' "--profile_every 5: steps 5, 10, 15, 20 profiled, the categories and other add up to the step, 15 steady steps"
check '[ "$(json $W/a/result.json params_crc32)" = "$(json $W/prof/result.json params_crc32)" ] &&
       grep -q "\"profile\": null," $W/a/result.json' "profiling changes nothing trained; without it result.json's profile is null"

# --- resume: stop_at, then continue: bitwise equal to uninterrupted -------
for arm in baseline sinktoken combo; do
    "$SG" $T --arm $arm --iters 30 --out "$W/u_$arm" 2>/dev/null
    expect 75 "stop_at reached at step 13" -- "$SG" $T --arm $arm --iters 30 --stop_at 13 --out "$W/r_$arm"
    check "[ ! -f $W/r_$arm/result.json ]" "an interrupted run has no result.json"
    expect 0 "resuming .* at step 13" -- "$SG" $T --arm $arm --iters 30 --out "$W/r_$arm"
    check "[ \"\$(json $W/u_$arm/result.json params_crc32)\" = \"\$(json $W/r_$arm/result.json params_crc32)\" ]" "$arm: resumed run is bitwise identical"
    check "diff <(grep '\"loss\"' $W/u_$arm/metrics.jsonl | sed 's/,\"tokens_per_s.*//') <(grep '\"loss\"' $W/r_$arm/metrics.jsonl | sed 's/,\"tokens_per_s.*//') >/dev/null" "$arm: resumed metrics.jsonl has the same 30 losses"
done

# --- GPT-NeoX's parts (rotary positions, parallel blocks, an untied head):
# trained, resumed bitwise, exported with their own tensors -------------
NX="--rotary_dims 8 --parallel_residual true --tie_embeddings false --ln_bias true --linear_bias true"
"$SG" $T --arm combo2 $NX --iters 30 --out "$W/u_nx" 2>/dev/null
expect 75 "stop_at reached at step 13" -- "$SG" $T --arm combo2 $NX --iters 30 --stop_at 13 --out "$W/r_nx"
expect 0 "resuming .* at step 13" -- "$SG" $T --arm combo2 $NX --iters 30 --out "$W/r_nx"
check '[ "$(json $W/u_nx/result.json params_crc32)" = "$(json $W/r_nx/result.json params_crc32)" ]' "rotary + parallel + untied: resumed run is bitwise identical"
check 'python3 - "$W/u_nx/metrics.jsonl" <<'"'"'PY'"'"'
import json, math, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
val = [r["val_loss"] for r in rows if "val_loss" in r]
assert len(val) == 3 and val[-1] < val[0] < math.log(512) - 0.1, val
PY' "rotary + parallel + untied: the validation loss falls from ln 512 in 30 steps"
"$SG" $T --arm combo2 $NX --iters 30 --stop_at 5 --out "$W/m_nx" >/dev/null 2>&1
expect 2 "tie_embeddings: false -> true" -- "$SG" $T --arm combo2 --rotary_dims 8 --parallel_residual true --ln_bias true --linear_bias true --iters 30 --out "$W/m_nx"
expect 0 "wrote" -- "$SG" export "$W/u_nx" -o "$W/nx.safetensors"
if command -v python3 >/dev/null; then
    "$SG" info --tier test --arm combo2 $NX >"$W/nx_info.json"
    check 'python3 tests/check_export.py "$W/nx.safetensors" "$W/nx_info.json"' "rotary + untied export: names, shapes and dtypes match the model"
    check 'grep -q "\"lm_head.weight\"" $W/nx_info.json && ! grep -q "\"wpe\"" $W/nx_info.json' "an untied head is lm_head.weight; rotary positions have no wpe"
fi
expect 2 "rotary_dims 7 must be even and at most the head dim 16" -- "$SG" $T --rotary_dims 7 --out "$W/x"
expect 2 "rotary_dims 18 must be even and at most the head dim 16" -- "$SG" $T --rotary_dims 18 --out "$W/x"
expect 2 "rotary_base: expected a number > 0" -- "$SG" $T --rotary_dims 8 --rotary_base -1 --out "$W/x"
check '[ ! -e $W/x ]' "refused configs create no run directory"

# --- a signal: checkpoint and exit 75, then resume to the same end -------
"$SG" $T --arm sinklogit --iters 4000 --ckpt_every 0 --log_every 1 --out "$W/sig" >"$W/sig.log" 2>&1 &
pid=$!
nlines() { local n; n=$(grep -c '"loss"' "$W/sig/metrics.jsonl" 2>/dev/null); echo "${n:-0}"; }
for _ in $(seq 1000); do
    [ "$(nlines)" -ge 3 ] && break
    sleep 0.01
done
kill -USR1 $pid
wait $pid
rc=$?
check "[ $rc -eq 75 ]" "SIGUSR1 ends the run with status 75 (got $rc)"
check 'grep -q "SIGUSR1 received" $W/sig.log' "the signal is named"
check "[ -s $W/sig/checkpoint.bin ] && [ ! -f $W/sig/result.json ]" "checkpoint written, no result"
"$SG" $T --arm sinklogit --iters 4000 --ckpt_every 0 --out "$W/sig" --stop_at 0 >/dev/null 2>&1 &
pid=$!
first=$(nlines)
for _ in $(seq 1000); do
    [ "$(nlines)" -ge $((first + 20)) ] && break
    sleep 0.01
done
kill -TERM $pid
wait $pid
check "[ $? -eq 75 ]" "SIGTERM also checkpoints and exits 75"
expect 0 "final val_loss" -- "$SG" $T --arm sinklogit --iters 4000 --ckpt_every 0 --out "$W/sig"
expect 0 "final val_loss" -- "$SG" $T --arm sinklogit --iters 4000 --ckpt_every 0 --out "$W/sig_u"
check '[ "$(json $W/sig/result.json params_crc32)" = "$(json $W/sig_u/result.json params_crc32)" ]' "run interrupted twice by signals is bitwise identical to an uninterrupted one"

# --- the same global batch in micro-batches: the same training -----------
for split in "8 1" "4 2" "2 4"; do
    set -- $split
    "$SG" $T --arm normgate --micro_batch $1 --grad_accum $2 --iters 10 --out "$W/acc_$1" 2>/dev/null
done
same_traj() { # two metrics files: every training loss within 1e-5 relative
    paste -d' ' <(grep '"loss"' "$1" | sed -E 's/.*"loss":([^,]*).*/\1/') \
                <(grep '"loss"' "$2" | sed -E 's/.*"loss":([^,]*).*/\1/') |
        awk '{d=$1-$2; if (d<0) d=-d; if (d > 1e-5*$2) bad=1; n++} END {exit (bad || n != 10)}'
}
check 'same_traj $W/acc_8/metrics.jsonl $W/acc_4/metrics.jsonl' "8x1 and 4x2 train alike (1e-5 relative)"
check 'same_traj $W/acc_8/metrics.jsonl $W/acc_2/metrics.jsonl' "8x1 and 2x4 train alike (1e-5 relative)"

# --- export --------------------------------------------------------------
expect 0 "wrote" -- "$SG" export "$W/a" -o "$W/a.safetensors"
if command -v python3 >/dev/null; then
    "$SG" info --tier test --arm combo2 >"$W/info.json"
    check 'python3 tests/check_export.py "$W/a.safetensors" "$W/info.json"' "export: names, shapes and dtypes match the model (safetensors spec)"
fi
# info's sizing figures: the paper's token budgets (1.6B at 124M, 5.8B at
# 350M) and the FLOP count of src/mfu.h (124M baseline: 797,930,496 a token,
# tests/test_mfu.c)
check 'python3 - "$SG" <<'"'"'PY'"'"'
import json, subprocess, sys
i = json.loads(subprocess.check_output([sys.argv[1], "info", "--tier", "124M"]))
assert i["flop_per_token"] == 797930496 and i["train_tokens"] == 48800 * 32 * 1024, i
assert i["train_flop"] == 797930496 * 48800 * 32 * 1024, i["train_flop"]
assert round(i["train_tokens"] / 1e9, 1) == 1.6, i["train_tokens"]
j = json.loads(subprocess.check_output([sys.argv[1], "info", "--tier", "350M"]))
assert round(j["train_tokens"] / 1e9, 1) == 5.8, j["train_tokens"]
PY' "info: FLOP a token, training tokens (the paper's 1.6B and 5.8B) and training FLOP"
expect 2 "cannot open|No such file" -- "$SG" export "$W/nothing"
expect 2 "usage" -- "$SG" export

# --- bad flags and configs ------------------------------------------------
expect 2 "unknown arm 'sinklogits'" -- "$SG" $T --arm sinklogits --out "$W/x"
expect 2 "unknown tier '7M'" -- "$SG" train --tier 7M --data "$D" --out "$W/x"
expect 2 "unknown flag '--lrr'" -- "$SG" $T --lrr 1e-3 --out "$W/x"
expect 2 "missing|needs a value|expects a value" -- "$SG" $T --out
expect 2 "lr: " -- "$SG" $T --lr abc --out "$W/x"
expect 2 "not divisible" -- "$SG" $T --n_embd 30 --n_head 4 --out "$W/x"
expect 2 "pass --out" -- "$SG" $T
expect 2 "unknown command" -- "$SG" trian
printf 'tier: test\nn_heads: 4\n' >"$W/bad.yaml"
expect 2 "bad.yaml:2:1: unknown key 'n_heads', did you mean 'n_head'" -- "$SG" train --config "$W/bad.yaml" --data "$D" --out "$W/x"
printf 'lr: [1, 2]\n' >"$W/bad2.yaml"
expect 2 "bad2.yaml:1:5" -- "$SG" train --config "$W/bad2.yaml" --data "$D" --out "$W/x"
check "[ ! -e $W/x ]" "rejected runs create no run directory"

# --- sgsynth's own inputs ------------------------------------------------
expect 2 "unknown flag '--vocb'" -- "$SYN" --out "$W/y" --vocb 10
expect 2 "vocab" -- "$SYN" --out "$W/y" --vocab 3
expect 2 "non-negative integer, got '-5'" -- "$SYN" --out "$W/y" --seed -5
check "[ ! -e $W/y ]" "rejected sgsynth calls write nothing"

# --- bad data -------------------------------------------------------------
expect 2 "nowhere" -- "$SG" train --tier test --data "$W/nowhere" --out "$W/x"
mkdir -p "$W/d_trunc" && cp "$D"/*.bin "$W/d_trunc/"
truncate -s -7 "$W/d_trunc/train_001.bin"
expect 2 "train_001.bin.*truncated" -- "$SG" train --tier test --data "$W/d_trunc" --out "$W/x"
expect 2 "vocabulary size 512.*expects 1000" -- "$SG" $T --vocab_size 1000 --out "$W/x"
mkdir -p "$W/d_magic" && cp "$D"/*.bin "$W/d_magic/" && printf 'hello world, not tokens' >"$W/d_magic/val.bin"
expect 2 "val.bin" -- "$SG" train --tier test --data "$W/d_magic" --out "$W/x"
mkdir -p "$W/d_range" && cp "$D"/*.bin "$W/d_range/"
# claim a vocabulary of 300 in one shard's header (bytes 20..23) although it holds tokens up to 511
for f in "$W"/d_range/*.bin; do printf '\x2c\x01\x00\x00' | dd of="$f" bs=1 seek=20 conv=notrunc status=none; done
expect 2 "token|out of range|>= *300" -- "$SG" train --tier test --vocab_size 300 --data "$W/d_range" --out "$W/x"
mkdir -p "$W/d_noval" && cp "$D"/train_*.bin "$W/d_noval/"
expect 2 "val.bin" -- "$SG" train --tier test --data "$W/d_noval" --out "$W/x"

# --- checkpoints that cannot continue this run ---------------------------
"$SG" $T --arm baseline --iters 30 --stop_at 10 --out "$W/k" >/dev/null 2>&1
cp "$W/k/checkpoint.bin" "$W/k.orig"
expect 2 "arm 'baseline', this run is arm 'combo'" -- "$SG" $T --arm combo --iters 30 --out "$W/k"
expect 2 "different config.*lr: " -- "$SG" $T --arm baseline --iters 30 --lr 1e-3 --out "$W/k"
expect 2 "different config.*iters: 30 -> 40" -- "$SG" $T --arm baseline --iters 40 --out "$W/k"
check "cmp -s $W/k/checkpoint.bin $W/k.orig" "a rejected resume leaves the checkpoint untouched"
cp "$W/k.orig" "$W/k2.bin"
printf '\xff' | dd of="$W/k2.bin" bs=1 seek=5000 conv=notrunc status=none
mkdir -p "$W/k2" && cp "$W/k2.bin" "$W/k2/checkpoint.bin"
expect 2 "checksum|corrupt" -- "$SG" $T --arm baseline --iters 30 --out "$W/k2"
check "cmp -s $W/k2/checkpoint.bin $W/k2.bin" "a corrupt checkpoint is left for inspection, not overwritten"
mkdir -p "$W/k3" && head -c 3000 "$W/k.orig" >"$W/k3/checkpoint.bin"
expect 2 "truncated" -- "$SG" $T --arm baseline --iters 30 --out "$W/k3"
expect 0 "resuming" -- "$SG" $T --arm baseline --iters 30 --out "$W/k"

# --- a diverging run stops at the step, keeping the last good checkpoint --
expect 1 "(NaN|infinite|not finite).* at step [0-9]+" -- "$SG" $T --arm projgate --lr 1e30 --lr_min 0 --warmup 0 --ckpt_every 1 --out "$W/nan"
check "[ ! -f $W/nan/result.json ]" "no result.json after divergence"
check "grep -qE '\"status\": \"failed\", \"step\": [0-9]+, \"reason\": \"the (training loss is (NaN|infinite)|gradient norm is not finite)\"' $W/nan/failed.json" "failed.json names the step and the reason"
if [ -f "$W/nan/checkpoint.bin" ]; then
    expect 0 "wrote" -- "$SG" export "$W/nan" -o "$W/nan.safetensors"
fi

finish
