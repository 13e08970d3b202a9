#!/usr/bin/env bash
# The CUDA build on a machine without a GPU (what CI can check): `make cuda`
# compiles every kernel for sm_80, sm_90 and sm_120 and links with the
# toolkit alone; the binary needs no driver library, runs its GPU-free
# commands, and on a training command says clearly that there is no device,
# writing nothing.  The CPU build stays free of CUDA.  The GPU tests
# themselves are `make test-gpu` (tests/gpu/run.sh) on a machine with a GPU.
set -u
B=${1:-build}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
E2E_NAME=e2e_cuda_build
source "$(dirname "$0")/lib.sh"
if ! command -v nvcc >/dev/null; then
    echo "(nvcc not found: the CUDA build is not checked here)"
    finish
fi
# a make of its own: under `make test` the parent's jobserver flags would leak in
log=$(env -u MAKEFLAGS -u MAKELEVEL -u MFLAGS make -s B="$B" cuda 2>&1); rc=$?
check '[ $rc -eq 0 ]' "make cuda builds"$'\n'"$(tail -n 30 <<<"$log")"
check '! grep -v "^make" <<<"$log" | grep -qiE "warning"' "make cuda is warning-free"$'\n'"$(grep -iE -m5 warning <<<"$log")"
CB=$B/cuda
for f in sgtrain test_gpu_ops; do check "[ -x $CB/$f ]" "$CB/$f built"; done
archs=$(python3 tests/gpu/fatbin_archs.py "$CB/sgtrain")
check '[[ "$archs" == *"elf sm_80"* && "$archs" == *"elf sm_90"* && "$archs" == *"elf sm_120"* ]]' "device code (ELF) for sm_80, sm_90 and sm_120 (found: $archs)"
check '! ldd "$CB/sgtrain" | grep -qE "libcuda\.so|libnvidia-ml"' "no driver library is linked (libcuda is loaded at run time by cudart)"
check '! ldd "$B/sgtrain" | grep -qiE "cuda|cublas"' "the CPU build has no CUDA dependency"
check '"$CB/sgtrain" tiers | grep -q "^124M"' "the CUDA build runs its GPU-free commands"
if ! nvidia-smi -L >/dev/null 2>&1; then
    W=$(mktemp -d)
    "$B/sgsynth" --out "$W/d" --vocab 512 --val-tokens 20000 --train-tokens 60000 --shard-tokens 60000 >/dev/null
    out=$("$CB/sgtrain" train --tier test --data "$W/d" --out "$W/run" 2>&1); rc=$?
    check '[ $rc -eq 1 ] && grep -q "no CUDA device.*use the CPU build, build/sgtrain" <<<"$out" && [ ! -e "$W/run/checkpoint.bin" ]' "without a GPU: a clear message, exit 1, no checkpoint ($rc: $out)"
    rm -rf "$W"
fi
finish
