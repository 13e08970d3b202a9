#!/usr/bin/env bash
# A short further call on a lent GPU machine, after tests/gpu/device.sh, for
# what the first call left open (built and packed as for device.sh).  Each
# part runs only where its variable asks for it:
#  PROBE_TESTGPU=1  tests/gpu/run.sh (make test-gpu) -> $OUT/test-gpu.log;
#  PROBE_OPS=1      test_gpu_ops alone, its whole output -> $OUT/ops.log;
#  PROBE_SANITIZE=RE  the sanitizer cases whose names match RE
#                   (tests/gpu/sanitize.sh's SANITIZE_ONLY) -> $OUT/sanitize.log
#                   and sanitize.tgz;
#  PROBE_TILES=LIST the attention op alone for those tiles (bench_gpu
#                   --attn-tiles), every arm -> $OUT/attention.txt;
#  PROBE_AB=S1;S2   124M steps of baseline and combo2 under each setting
#                   (';'-separated, as device.sh's DEVICE_AB; an empty one is
#                   the defaults), each under AB_LIMIT_S (30 s) -> $OUT/abN.txt.
# The lines that matter are printed as each part ends.
set -u
B=${B:-build/dev}
. tests/gpu/device_env.sh
if [ "${PROBE_TESTGPU:-0}" = 1 ]; then
    t0=$SECONDS
    timeout "${TEST_GPU_LIMIT_S:-140}" bash tests/gpu/run.sh "$B" >"$OUT/test-gpu.log" 2>&1
    echo "test-gpu: exit $? in $((SECONDS - t0)) s; $(tail -n 1 "$OUT/test-gpu.log")"
    grep -E "FAIL|trajectory|default" "$OUT/test-gpu.log" | head -n 40
fi
if [ "${PROBE_OPS:-0}" = 1 ]; then
    t0=$SECONDS
    timeout "${PROBE_OPS_LIMIT_S:-120}" "$B/cuda/test_gpu_ops" >"$OUT/ops.log" 2>&1
    echo "test_gpu_ops: exit $? in $((SECONDS - t0)) s: $(tail -n 1 "$OUT/ops.log")"
    grep -E "^FAIL" "$OUT/ops.log" | head -n 40
fi
if [ -n "${PROBE_SANITIZE:-}" ]; then
    t0=$SECONDS
    SANITIZE_ONLY=$PROBE_SANITIZE SANITIZE_BUDGET_S=${SANITIZE_BUDGET_S:-60} OUT=$OUT \
        timeout $((${SANITIZE_BUDGET_S:-60} + 30)) bash tests/gpu/sanitize.sh "$B" >"$OUT/sanitize.log" 2>&1
    echo "sanitize: exit $? in $((SECONDS - t0)) s; $(tail -n 1 "$OUT/sanitize.log")"
    grep -E "^(pass|FAIL|note:)" "$OUT/sanitize.log"
    # one log a case, in one file: the device tool brings back 8 files at most
    [ ! -d "$OUT/sanitize" ] || { tar czf "$OUT/sanitize.tgz" -C "$OUT" sanitize && rm -rf "$OUT/sanitize"; }
fi
if [ -n "${PROBE_TILES:-}" ]; then
    t0=$SECONDS
    timeout "${PROBE_ATTN_LIMIT_S:-60}" "$B/cuda/bench_gpu" --no-train --arms all --attn-tiles "$PROBE_TILES" \
        >"$OUT/attention.txt" 2>&1
    echo "attention: exit $? in $((SECONDS - t0)) s"
    grep -E "/|ran on cuDNN" "$OUT/attention.txt"
fi
if [ -n "${PROBE_AB+set}" ]; then
    IFS=';' read -ra settings <<<"$PROBE_AB"
    [ ${#settings[@]} -gt 0 ] || settings=("")
    n=0
    for setting in "${settings[@]}"; do
        n=$((n + 1))
        # shellcheck disable=SC2086
        env $setting timeout "${AB_LIMIT_S:-30}" "$B/cuda/bench_gpu" --tiers 124M --arms baseline,combo2 --no-attn \
            >"$OUT/ab$n.txt" 2>&1
        echo "with ${setting:-the defaults}: exit $?"
        grep -A1 "^124M" "$OUT/ab$n.txt"
    done
fi
