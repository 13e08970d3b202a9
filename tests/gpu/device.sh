#!/usr/bin/env bash
# One call on a lent GPU machine (docs/cuda.md, "Running the GPU checks"):
# `make test-gpu`, `make sanitize-gpu` and `make bench-gpu` with binaries
# built elsewhere.
#
# The machine has CUDA and PyTorch but not Debian's libyaml, json-c, PCRE2 or
# BLIS, nor compute-sanitizer, and no compiler time to spare, so the caller
# builds on the CPU machine and carries the result:
#   make B=build/dev MPI=no NCCL=no BLAS=blis CUDA_ARCHS=90 OPT="-O3 -march=x86-64-v3" all cuda
#   bash tests/gpu/device.sh --pack          # the shared libraries into build/dev/lib,
#                                            # compute-sanitizer into build/dev/sanitizer.whl
# and runs `bash tests/gpu/device.sh` there with build/dev/carry.tar.xz and
# build/dev/sanitizer.whl carried (about 18 MB).  The binaries and
# build/dev/lib come to 77 MB as they are (2026-12-01: each CUDA program
# holds the same 14.6 MB fatbin), over the device tool's 64 MiB; --pack
# therefore also puts them in one xz archive with a 64 MiB dictionary, which
# stores the three copies of the device code once (6 MB), and the run
# unpacks it first.  Each library is used only where the machine lacks it
# (ldconfig), so a newer one there is never shadowed; the sanitizer wheel is
# unpacked into build/dev/sanitizer only where the machine has no
# compute-sanitizer.
# Logs and the benchmark's files come back under $OUT as test-gpu.log,
# sanitize.log with sanitize.tgz (sanitize/NAME.log for every case, in one
# file: the device tool brings back 8 files at most), bench-gpu.log and
# bench-gpu.tgz.
#
# A/B runs, before the benchmarks: 124M steps of bench_gpu (baseline and
# combo2) with the defaults and then with each setting of DEVICE_AB
# ("VAR=value ...", several separated by ';'), each under AB_LIMIT_S (30 s;
# one took about 25 s on the H200).  By default (run 4 settled the rest,
# within 1% or worse) the defaults, SG_ATTN_BWD_PIPE=1 (the mma backward's
# strips pipelined), SG_ATTN_DQ=stored (dQ from the dS the dK/dV kernel
# stores: a third of the recomputing dq kernel's products, docs/cuda.md
# "Issue cycles from the control codes"), SG_ATTN_WGMMA=2 (the attention
# on Hopper's warpgroup products, the forward pipelined) and
# SG_ATTN=cudnn, cuDNN's fused attention (the libraries: below).  Others to try: SG_MATMUL_TUNE=1, SG_ATTN_WARP_ROWS=16,
# SG_BF16_OPERANDS=0.  If test-gpu passed, the benchmarks then run under
# the fastest of them (tests/gpu/ab_choose.py: baseline's and combo2's
# tokens/s added), so that one call measures the goals with the best
# settings there are; otherwise, and when DEVICE_AB_PICK=0, under the
# defaults.  The choice is in $OUT/ab-choice.txt.  DEVICE_AB= runs none.
#
# --pack fetches the sanitizer with pip (nvidia-cuda-sanitizer-api, version
# SANITIZER_WHEEL_VERSION, default 13.5.25), or takes the wheel
# SANITIZER_WHEEL names, and keeps only the 64-bit tool (no docs, headers or
# 32-bit launcher: 12 MB instead of 18).  Not 13.0.x although the machine's
# driver is 580 (CUDA 13.0): the wheels 13.0.48, 13.0.85, 13.1.118 and
# 13.2.87 hold compute-sanitizer without the TreeLauncherSubreaper it starts
# the application with, so it cannot run a program; 13.5.25 has it, and its
# library asks for driver 580 or newer.  Without the wheel the sanitizer
# phase is skipped with a note.
#
# Time: one call may run 600 s.  The defaults keep to 590 s: the wgmma
# probe (60 s at most, seconds in fact), the attention's phase clocks (90 s
# at most, seconds in fact), test-gpu at most
# TEST_GPU_LIMIT_S=240 s (137 s in run 4's last call, more now), the sanitizer
# SANITIZE_BUDGET_S=60 s (with 30 s of grace), five 30 s A/B runs, and the
# benchmarks whatever of DEVICE_LIMIT_S=590 s those leave, less 20 s, and
# at least 160 s (BENCH_GPU_BUDGET_S fixes it instead).  With test-gpu and
# the A/B runs taking what they took in run 5, the benchmarks get about
# 290 s (316 in run 5, with four A/B runs), enough for PyTorch's 350M tier
# too.
set -u
B=${B:-build/dev}
if [ "${1:-}" = --pack ]; then
    mkdir -p "$B/lib"
    for bin in "$B/sgtrain" "$B/sgsynth" "$B/cuda/sgtrain" "$B/cuda/test_gpu_ops" "$B/cuda/bench_gpu" "$B/cuda/wgmma_probe"; do
        ldd "$bin" | awk '$3 ~ /^\// { print $1, $3 }'
    done | sort -u | while read -r name path; do
        case $name in
        libyaml* | libjson-c* | libpcre2* | libblis* | libgomp* | libcrypto* | libz.so*) cp -L "$path" "$B/lib/$name" ;;
        esac
    done
    ls -la "$B/lib"
    if [ ! -f "$B/sanitizer.whl" ]; then
        tmp=$(mktemp -d)
        whl=${SANITIZER_WHEEL:-}
        if [ -z "$whl" ]; then
            v=${SANITIZER_WHEEL_VERSION:-13.5.25}
            if python3 -m pip download --no-deps --only-binary=:all: "nvidia-cuda-sanitizer-api==$v" -d "$tmp" >"$tmp/pip.log" 2>&1; then
                whl=$(ls "$tmp"/nvidia_cuda_sanitizer_api-*.whl)
            else
                echo "note: no compute-sanitizer: pip download nvidia-cuda-sanitizer-api==$v failed" \
                    "($(tail -n 1 "$tmp/pip.log")); the sanitizer phase will be skipped"
            fi
        fi
        if [ -n "$whl" ]; then
            # the 64-bit tool only: no docs/, include/ or x86/ (the 32-bit launcher)
            python3 - "$whl" "$tmp/s.whl" <<'EOF' && mv "$tmp/s.whl" "$B/sanitizer.whl"
import re, sys, zipfile
drop = re.compile(r"/compute-sanitizer/(docs|include|x86)/")
with zipfile.ZipFile(sys.argv[1]) as zi, zipfile.ZipFile(sys.argv[2], "w", zipfile.ZIP_DEFLATED) as zo:
    for i in zi.infolist():
        if not drop.search(i.filename):
            zo.writestr(i, zi.read(i))
EOF
        fi
        rm -rf "$tmp"
    fi
    [ ! -f "$B/sanitizer.whl" ] || ls -la "$B/sanitizer.whl"
    # the programs and their libraries in one solid archive (see above)
    # and GPT-2's vocabulary (test-gpu's zero-shot check), which git ignores
    vocab=; [ -s data/vocab/gpt2.tiktoken ] && vocab=data/vocab/gpt2.tiktoken
    tar cf - "$B/sgtrain" "$B/sgsynth" "$B/cuda/sgtrain" "$B/cuda/test_gpu_ops" "$B/cuda/bench_gpu" \
        "$B/cuda/wgmma_probe" "$B/lib" $vocab |
        xz -T2 -9 --lzma2=dict=64MiB >"$B/carry.tar.xz.tmp" && mv "$B/carry.tar.xz.tmp" "$B/carry.tar.xz" || exit 1
    ls -la "$B/carry.tar.xz"
    exit 0
fi
. tests/gpu/device_env.sh
# Hopper's warpgroup products (tests/gpu/wgmma_probe.cu): which descriptor
# readings give the right product, and their rates against mma.sync's; a
# few seconds, first, so that a later failure cannot cost it.
# Where it finds that the warpgroup kernels' no-swizzle descriptors must be
# read the other way round (wgmma_ptx.h, wg_desc_core), the rest of the run
# takes SG_WGMMA_SWAP from it, so that SG_ATTN_WGMMA=1 is still measured;
# the code's readings are then to be fixed, and the run says so.
if [ -x "$B/cuda/wgmma_probe" ]; then
    timeout 60 "$B/cuda/wgmma_probe" >"$OUT/wgmma.log" 2>&1
    echo "wgmma_probe: exit $?"
    grep -vE "^    thread" "$OUT/wgmma.log"
    swap=$(sed -nE 's/^wgmma_probe: SG_WGMMA_SWAP=([0-3])$/\1/p' "$OUT/wgmma.log")
    if [ -n "$swap" ] && [ "$swap" != 0 ] && [ -z "${SG_WGMMA_SWAP:-}" ]; then
        export SG_WGMMA_SWAP=$swap
        echo "NOTE: the device reads the warpgroup descriptors otherwise: SG_WGMMA_SWAP=$swap for the rest of the run (fix wg_desc_core's readings)"
    fi
fi
# Where the attention kernels' cycles go (bench_gpu --attn-trace,
# kernels/cuda/attention_trace.h): the phase clocks of the mma kernels and
# of the pipelined warpgroup forward (SG_ATTN_WGMMA=2) at the 124M shape,
# baseline and combo2, with the rates of those two and of the backward's
# pipelined strips (mma-bp, not traced), seconds; early, since it says what
# to change next.
# The log goes into bench-gpu.tgz and is printed here.
mkdir -p /tmp/bench-gpu
timeout 90 "$B/cuda/bench_gpu" --no-train --attn-tiles mma,mma-bp,wgmma2 --attn-trace --attn-iters 20 \
    --json /tmp/bench-gpu/attn-trace.json >/tmp/bench-gpu/attn-trace.log 2>&1
echo "attention phase clocks: exit $?"
sed -n '/^attention phase clocks/,$p' /tmp/bench-gpu/attn-trace.log
# A first look at cuDNN's graphs (SG_ATTN=cudnn), with the frontend's and
# the library's own logs on (both go into bench-gpu.tgz): combo2's
# gradients at d 64, which builds the forward and backward graphs with the
# sink token.  What it says of cuDNN is printed here.
mkdir -p /tmp/bench-gpu
"$B/sgsynth" --out /tmp/cudnn-data --vocab 512 --val-tokens 8000 --train-tokens 20000 --shard-tokens 20000 >/dev/null
SG_ATTN=cudnn SG_MATMUL_STATS=1 CUDNN_FRONTEND_LOG_INFO=1 CUDNN_FRONTEND_LOG_FILE=/tmp/bench-gpu/cudnn-frontend.log \
    CUDNN_LOGLEVEL_DBG=2 CUDNN_LOGDEST_DBG=/tmp/bench-gpu/cudnn-backend.log timeout 60 "$B/cuda/sgtrain" grads \
    --tier test --n_embd 128 --n_head 2 --block_size 64 --arm combo2 --seed 3 --data /tmp/cudnn-data \
    -o /tmp/bench-gpu/cudnn-combo2.st >/tmp/bench-gpu/cudnn-smoke.log 2>&1
echo "cuDNN smoke (combo2 grads, SG_ATTN=cudnn): exit $?; $(grep -E "cuDNN|CUDA error" /tmp/bench-gpu/cudnn-smoke.log | head -n 4)"
grep -iE "error|not supported|fail" /tmp/bench-gpu/cudnn-frontend.log 2>/dev/null | head -n 8
t0=$SECONDS
timeout "${TEST_GPU_LIMIT_S:-240}" bash tests/gpu/run.sh "$B" >"$OUT/test-gpu.log" 2>&1
test_rc=$?
echo "test-gpu: exit $test_rc in $((SECONDS - t0)) s; $(tail -n 1 "$OUT/test-gpu.log")"
grep -E "FAIL|trajectory|passed" "$OUT/test-gpu.log" | head -n 40
# compute-sanitizer (tests/gpu/sanitize.sh): the carried wheel, unpacked where
# the machine has none of its own; zipfile keeps no file modes
if [ -f "$B/sanitizer.whl" ] && [ -z "${SANITIZER:-}" ] && ! command -v compute-sanitizer >/dev/null &&
    [ ! -x /usr/local/cuda/bin/compute-sanitizer ]; then
    rm -rf "$B/sanitizer"
    if python3 -m zipfile -e "$B/sanitizer.whl" "$B/sanitizer"; then
        find "$B/sanitizer" -type f \( -name compute-sanitizer -o -name 'TreeLauncher*' \) -exec chmod +x {} +
    else
        echo "note: could not unpack $B/sanitizer.whl"
    fi
fi
t0=$SECONDS
SB=${SANITIZE_BUDGET_S:-60}
OUT=$OUT SANITIZE_BUDGET_S=$SB timeout $((SB + 30)) bash tests/gpu/sanitize.sh "$B" >"$OUT/sanitize.log" 2>&1
echo "sanitize: exit $? in $((SECONDS - t0)) s; $(tail -n 1 "$OUT/sanitize.log")"
grep -E "^(compute-sanitizer:|failed:|note:|sanitize: compute)" "$OUT/sanitize.log"
[ ! -d "$OUT/sanitize" ] || { tar czf "$OUT/sanitize.tgz" -C "$OUT" sanitize && rm -rf "$OUT/sanitize"; }
# The A/B runs (the comment at the top): the defaults first, then each
# setting of DEVICE_AB, separated by ';', each one or more VAR=value (e.g.
# "SG_ATTN=mma;SG_ATTN=mma SG_MATMUL_KEEP=0").
DEVICE_AB=${DEVICE_AB-SG_ATTN_BWD_PIPE=1 SG_MATMUL_STATS=1;SG_ATTN_DQ=stored SG_MATMUL_STATS=1;SG_ATTN_WGMMA=2 SG_MATMUL_STATS=1;SG_ATTN=cudnn SG_MATMUL_STATS=1}
IFS=';' read -ra all_settings <<<"$DEVICE_AB"
settings=()
for setting in "${all_settings[@]}"; do [ -z "${setting// /}" ] || settings+=("$setting"); done
[ ${#settings[@]} -eq 0 ] || settings=("" "${settings[@]}")
mkdir -p /tmp/bench-gpu
runs=()
n=0
for setting in "${settings[@]}"; do
    n=$((n + 1))
    # shellcheck disable=SC2086
    env $setting timeout "${AB_LIMIT_S:-30}" "$B/cuda/bench_gpu" --tiers 124M --arms baseline,combo2 --no-attn \
        >/tmp/bench-gpu/ab$n.txt 2>&1
    echo "with ${setting:-the defaults}:"
    grep -A1 "^124M" /tmp/bench-gpu/ab$n.txt
    grep -E "^sg matmul tune: [0-9]|ran on cuDNN|cuDNN does not take|warpgroup products|SG_ATTN_WGMMA" /tmp/bench-gpu/ab$n.txt
    runs+=("$setting=/tmp/bench-gpu/ab$n.txt")
done
# The settings the benchmarks run under: the fastest A/B run's, if test-gpu
# passed (its checks cover every one of them: tests/gpu/run.sh).
best=
if [ ${#runs[@]} -gt 0 ]; then
    if [ "$test_rc" -ne 0 ]; then
        echo "A/B: test-gpu failed (exit $test_rc): the benchmarks run under the defaults" | tee "$OUT/ab-choice.txt"
    elif [ "${DEVICE_AB_PICK:-1}" = 0 ]; then
        echo "A/B: DEVICE_AB_PICK=0: the benchmarks run under the defaults" | tee "$OUT/ab-choice.txt"
    elif best=$(python3 tests/gpu/ab_choose.py 124M "${runs[@]}" 2>"$OUT/ab-choice.txt"); then
        cat "$OUT/ab-choice.txt"
        echo "A/B: the benchmarks run under the fastest: ${best:-the defaults}" | tee -a "$OUT/ab-choice.txt"
    else
        best=
        cat "$OUT/ab-choice.txt"
        echo "A/B: no run gave both arms: the benchmarks run under the defaults" | tee -a "$OUT/ab-choice.txt"
    fi
fi
# The benchmarks get what the rest left of DEVICE_LIMIT_S (590 s: one
# device call runs at most 600), less 20 s for packing up, and at least
# 160 s; BENCH_GPU_BUDGET_S overrides it.
bench_budget=$((${DEVICE_LIMIT_S:-590} - SECONDS - 20))
[ "$bench_budget" -ge 160 ] || bench_budget=160
bench_budget=${BENCH_GPU_BUDGET_S:-$bench_budget}
echo "bench-gpu: a budget of $bench_budget s ($SECONDS s used so far), under ${best:-the defaults}"
t0=$SECONDS
# shellcheck disable=SC2086
env $best OUT=/tmp/bench-gpu BENCH_GPU_BUDGET_S=$bench_budget bash tests/gpu/bench.sh "$B" >"$OUT/bench-gpu.log" 2>&1
echo "bench-gpu: exit $? in $((SECONDS - t0)) s"
tar czf "$OUT/bench-gpu.tgz" -C /tmp bench-gpu
tail -n 30 "$OUT/bench-gpu.log"
