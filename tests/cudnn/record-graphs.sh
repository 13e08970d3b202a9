#!/usr/bin/env bash
# Records the attention graphs sgtrain asks cuDNN for (SG_ATTN=cudnn) at the
# paper's tiers and at test-gpu's two shapes (tests/gpu/run.sh: d 16 and
# d 64), as lines of tests/cudnn/sdpa_line.h: the emulated CUDA sgtrain
# (tests/e2e_cuda_sgtrain_emu.sh builds it) runs one forward and backward of
# each with EMU_CUDNN_LOG set.  tests/cudnn/graphs.txt
# is this script's output, kept in git so that tests/e2e_cuda_build.sh can
# put it to the real cuDNN for GPUs this machine lacks (plan_check.cpp), and
# tests/e2e_cuda_sgtrain_emu.sh checks that it is not stale.
#
# usage: record-graphs.sh SGTRAIN_EMU SGTRAIN_CPU DATA OUT
#   SGTRAIN_EMU  the emulated CUDA sgtrain;  SGTRAIN_CPU  the CPU build (its
#   tier table);  DATA  token shards of a vocabulary of 512 (sgsynth)
#
# The emulator's products are taken as zero (EMU_GEMM=zero: the graphs do
# not depend on the values).  For a tier, one layer, a 512-token vocabulary
# and a micro-batch of 1 keep the runs short: the attention's shapes and
# strides are the tier's (heads, width, context: no stride depends on the
# batch), and B is then set to the tier's micro-batch.  test-gpu's shapes
# run as test-gpu runs them, also without the matmuls' twins
# (SG_MATMUL_KEEP=0: dq, dk and dv go through scratch of their own), and
# they and the 124M tier (device.sh's A/B runs) also with qkv and dO stored
# in fp32 (SG_BF16_OPERANDS=0: q, k, v and dO packed).  The arms are those whose graphs differ: no phantom or one
# (offbyone's zero logits are sinklogit's graph), the value gates' v apart
# from the qkv row (projgate and combo are normgate's and combo2's graphs),
# and the sink token's longer context.  renorm's log-bias never reaches
# cuDNN (attention_cudnn.cu).
set -u
[ $# -eq 4 ] || { echo "usage: record-graphs.sh SGTRAIN_EMU SGTRAIN_CPU DATA OUT" >&2; exit 2; }
EMU=$1 CPU=$2 DATA=$3 OUT=$4
TIERS="10M 50M 124M 350M"
ARMS="baseline sinklogit sinktoken normgate combo2"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# run NAME ENV... -- FLAGS...: the arms' graphs into $tmp/NAME.log, the arms
# side by side (the emulated cuDNN appends a line in one write)
run() {
    local name=$1 arm i failed=0
    shift
    local envs=() pids=() arms=()
    while [ "$1" != -- ]; do envs+=("$1"); shift; done
    shift
    for arm in $ARMS; do
        env "${envs[@]}" EMU_GEMM=zero EMU_CUDNN_LOG="$tmp/$name.log" SG_ATTN=cudnn "$EMU" grads "$@" \
            --arm "$arm" --seed 1 --data "$DATA" -o "$tmp/$arm.st" >"$tmp/run-$arm.log" 2>&1 &
        pids+=($!) arms+=("$arm")
    done
    for i in "${!pids[@]}"; do
        wait "${pids[$i]}" && continue
        echo "record-graphs: the $name ${arms[$i]} run failed (grads $*):" >&2
        cat "$tmp/run-${arms[$i]}.log" >&2
        failed=1
    done
    [ $failed = 0 ] || exit 1
}
{
    echo "# The attention graphs sgtrain asks cuDNN for (SG_ATTN=cudnn) at the paper's tiers and test-gpu's"
    echo "# shapes: written by tests/cudnn/record-graphs.sh (see there), read by tests/cudnn/plan_check.cpp."
    echo "# Format: tests/cudnn/sdpa_line.h.  Arms: $ARMS."
} >"$tmp/out"
for tier in $TIERS; do
    micro=$("$CPU" tiers | awk -v t="$tier" '$1 == t { split($6, b, "x"); print b[1] }')
    [ -n "$micro" ] || { echo "record-graphs: no tier $tier in \`$CPU tiers\`" >&2; exit 1; }
    run "$tier" -- --tier "$tier" --n_layer 1 --vocab_size 512 --micro_batch 1
    also=
    if [ "$tier" = 124M ]; then
        run "$tier" SG_BF16_OPERANDS=0 -- --tier "$tier" --n_layer 1 --vocab_size 512 --micro_batch 1
        also=", also with SG_BF16_OPERANDS=0"
    fi
    echo "# $tier: micro-batch $micro$also" >>"$tmp/out"
    awk -v b="$micro" '{ $2 = b; print }' "$tmp/$tier.log" | LC_ALL=C sort -u >>"$tmp/out"
done
for cfg in "d16:--tier test" "d64:--tier test --n_embd 128 --n_head 2 --block_size 64"; do
    name=${cfg%%:*} flags=${cfg#*:}
    # shellcheck disable=SC2086
    run "$name" -- $flags
    # shellcheck disable=SC2086
    run "$name" SG_MATMUL_KEEP=0 -- $flags
    # shellcheck disable=SC2086
    run "$name" SG_BF16_OPERANDS=0 -- $flags
    echo "# test-gpu $name ($flags): defaults, SG_MATMUL_KEEP=0, SG_BF16_OPERANDS=0" >>"$tmp/out"
    LC_ALL=C sort -u "$tmp/$name.log" >>"$tmp/out"
done
mv "$tmp/out" "$OUT"
