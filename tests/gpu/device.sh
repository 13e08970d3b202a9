#!/usr/bin/env bash
# One call on a lent GPU machine (docs/cuda.md, "Running the GPU checks"):
# `make test-gpu` and `make bench-gpu` with binaries built elsewhere.
#
# The machine has CUDA and PyTorch but not Debian's libyaml, json-c, PCRE2 or
# BLIS, and no compiler time to spare, so the caller builds on the CPU
# machine and carries the result:
#   make B=build/dev MPI=no NCCL=no BLAS=blis CUDA_ARCHS=90 all cuda
#   bash tests/gpu/device.sh --pack          # the shared libraries into build/dev/lib
# and runs `bash tests/gpu/device.sh` there with build/dev carried.  Each
# library is used only where the machine lacks it (ldconfig), so a newer one
# there is never shadowed.  Logs and the benchmark's files come back under
# $OUT as test-gpu.log, bench-gpu.log and bench-gpu.tgz.  DEVICE_AB="VAR=value"
# adds a 124M run of bench_gpu with that setting, for a comparison within
# the same run (several: separated by ';'); by default SG_ATTN=mma, the
# attention tiles that have not yet been timed in whole training steps, and
# that again without the matmuls' bf16 copies and twins (SG_MATMUL_KEEP=0).
# DEVICE_AB= turns it off.
set -u
B=${B:-build/dev}
if [ "${1:-}" = --pack ]; then
    mkdir -p "$B/lib"
    for bin in "$B/sgtrain" "$B/sgsynth" "$B/cuda/sgtrain" "$B/cuda/test_gpu_ops" "$B/cuda/bench_gpu"; do
        ldd "$bin" | awk '$3 ~ /^\// { print $1, $3 }'
    done | sort -u | while read -r name path; do
        case $name in
        libyaml* | libjson-c* | libpcre2* | libblis* | libgomp* | libcrypto* | libz.so*) cp -L "$path" "$B/lib/$name" ;;
        esac
    done
    ls -la "$B/lib"
    exit 0
fi
OUT=${OUT:-/tmp/device-out}
mkdir -p "$OUT" /tmp/sglib
for f in "$B"/lib/*; do
    name=$(basename "$f")
    ldconfig -p | grep -q "^[[:space:]]*$name " || ln -sf "$(cd "$(dirname "$f")" && pwd)/$name" /tmp/sglib/
done
export LD_LIBRARY_PATH=/tmp/sglib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
echo "carried libraries used: $(ls /tmp/sglib | tr '\n' ' ')"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv | tee "$OUT/nvidia-smi.txt"
missing=$(for b in "$B/sgtrain" "$B/cuda/sgtrain" "$B/cuda/test_gpu_ops" "$B/cuda/bench_gpu"; do ldd "$b" | grep "not found"; done)
[ -z "$missing" ] || { echo "missing libraries: $missing"; exit 1; }
t0=$SECONDS
timeout "${TEST_GPU_LIMIT_S:-240}" bash tests/gpu/run.sh "$B" >"$OUT/test-gpu.log" 2>&1
echo "test-gpu: exit $? in $((SECONDS - t0)) s; $(tail -n 1 "$OUT/test-gpu.log")"
grep -E "FAIL|trajectory|passed" "$OUT/test-gpu.log" | head -n 40
t0=$SECONDS
OUT=/tmp/bench-gpu BENCH_GPU_BUDGET_S=${BENCH_GPU_BUDGET_S:-240} bash tests/gpu/bench.sh "$B" >"$OUT/bench-gpu.log" 2>&1
echo "bench-gpu: exit $? in $((SECONDS - t0)) s"
# the same 124M steps with switches flipped: settings separated by ';', each
# one or more VAR=value (e.g. "SG_ATTN=mma;SG_ATTN=mma SG_MATMUL_KEEP=0")
DEVICE_AB=${DEVICE_AB-SG_ATTN=mma;SG_ATTN=mma SG_MATMUL_KEEP=0}
n=0
IFS=';' read -ra settings <<<"$DEVICE_AB"
for setting in "${settings[@]}"; do
    [ -n "${setting// /}" ] || continue
    n=$((n + 1))
    # shellcheck disable=SC2086
    env $setting timeout 60 "$B/cuda/bench_gpu" --tiers 124M --arms baseline,combo2 --no-attn >/tmp/bench-gpu/ab$n.txt 2>&1
    echo "with $setting:"
    grep -A1 "^124M" /tmp/bench-gpu/ab$n.txt
done
tar czf "$OUT/bench-gpu.tgz" -C /tmp bench-gpu
tail -n 30 "$OUT/bench-gpu.log"
