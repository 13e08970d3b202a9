#!/usr/bin/env bash
# Records the attention graphs sgtrain asks cuDNN for (SG_ATTN=cudnn) at the
# paper's tiers, as lines of tests/cudnn/sdpa_line.h: the emulated CUDA
# sgtrain (tests/e2e_cuda_sgtrain_emu.sh builds it) runs one forward and
# backward of each tier's shapes with EMU_CUDNN_LOG set.  tests/cudnn/graphs.txt
# is this script's output, kept in git so that tests/e2e_cuda_build.sh can
# put it to the real cuDNN for GPUs this machine lacks (plan_check.cpp), and
# tests/e2e_cuda_sgtrain_emu.sh checks that it is not stale.
#
# usage: record-graphs.sh SGTRAIN_EMU SGTRAIN_CPU DATA OUT
#   SGTRAIN_EMU  the emulated CUDA sgtrain;  SGTRAIN_CPU  the CPU build (its
#   tier table);  DATA  token shards of a vocabulary of 512 (sgsynth)
#
# One layer, a 512-token vocabulary, a micro-batch of 1 and the emulator's
# products taken as zero (EMU_GEMM=zero: the graphs do not depend on the
# values) keep the runs short.  The attention's shapes and strides are the tier's (heads, width,
# context: no stride depends on the batch), and B is then set to the tier's
# micro-batch.  The arms are those whose graphs differ: no phantom or one
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
{
    echo "# The attention graphs sgtrain asks cuDNN for (SG_ATTN=cudnn) at the paper's tiers:"
    echo "# written by tests/cudnn/record-graphs.sh (see there), read by tests/cudnn/plan_check.cpp."
    echo "# Format: tests/cudnn/sdpa_line.h.  Arms: $ARMS."
} >"$tmp/out"
for tier in $TIERS; do
    micro=$("$CPU" tiers | awk -v t="$tier" '$1 == t { split($6, b, "x"); print b[1] }')
    [ -n "$micro" ] || { echo "record-graphs: no tier $tier in \`$CPU tiers\`" >&2; exit 1; }
    for arm in $ARMS; do
        if ! EMU_GEMM=zero EMU_CUDNN_LOG="$tmp/$tier.log" SG_ATTN=cudnn "$EMU" grads --tier "$tier" --n_layer 1 --vocab_size 512 \
            --micro_batch 1 --arm "$arm" --seed 1 --data "$DATA" -o "$tmp/g.st" >"$tmp/run.log" 2>&1; then
            echo "record-graphs: the $tier $arm run failed:" >&2
            cat "$tmp/run.log" >&2
            exit 1
        fi
    done
    echo "# $tier: micro-batch $micro" >>"$tmp/out"
    awk -v b="$micro" '{ $2 = b; print }' "$tmp/$tier.log" | LC_ALL=C sort -u >>"$tmp/out"
done
mv "$tmp/out" "$OUT"
