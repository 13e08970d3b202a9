#!/usr/bin/env bash
# The CUDA attention kernels, run without a GPU: kernels/cuda/attention_fwd.cu,
# attention_bwd.cu, attention_decode.cu and attention_probs.cu, unchanged,
# are rewritten into C++ (tests/emu/cu2cpp.py) and compiled with g++ against
# the host emulator in tests/emu (threads as coroutines switched in random
# order at every barrier, wmma bf16 fragments, shared memory poisoned with
# NaN), then compared with the CPU ops (tests/emu/attention_emu_test.cpp):
#   - the battery at bf16 operand rounding, as on the device, with
#     tests/gpu/test_gpu_ops.c's tolerances, under two scheduler seeds
#     (EMU_SEEDS, default "1 2"): every output must also repeat bitwise
#     between them, as the kernels are deterministic by design;
#   - the streaming attention again with bf16 that keeps fp32 values
#     (EMU_BF16_EXACT) at fp32 tolerances: the algorithm itself.
# No nvcc and no CUDA header is used: tests/emu's stubs come first on the
# include path, and the dependency lists are checked for toolkit headers.
# What this catches and what it cannot: docs/cuda.md, "Emulated in CI".
# Needs the build ($B/libsg.a holds the CPU ops), g++ and python3.
set -u
B=${1:-build}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
E2E_NAME=e2e_cuda_emu
source "$(dirname "$0")/lib.sh"
seeds=(${EMU_SEEDS:-1 2})

for tool in g++ python3; do
    if ! command -v $tool >/dev/null; then
        bad "$tool not found: the emulated CUDA attention test needs it (tools/install-deps.sh installs build-essential and python3)"
        finish
    fi
done
if [ ! -f "$B/libsg.a" ]; then
    bad "$B/libsg.a not found: build first (make B=$B)"
    finish
fi

W=$(cd "$B" && pwd)/emu
rm -rf "$W"
mkdir -p "$W/gen" "$W/bf16" "$W/fp32" "$W/obj"
E=$ROOT/tests/emu
INC=(-I"$E" -I"$ROOT/kernels/cuda" -I"$ROOT/kernels" -I"$ROOT/src")
CXXF=(-std=c++17 -O2 -g -Wall -Wextra -Wno-unused-parameter -Wno-unknown-pragmas)
# the CUDA ops get their own names next to the CPU ops
RENAME=()
for op in fwd bwd decode_fwd decode_bwd probs apply; do
    RENAME+=(-Dop_attention_$op=cuda_op_attention_$op)
done
KERNELS="fwd bwd decode probs"

# --- build: two compile jobs at a time ---------------------------------------
t0=$SECONDS
njobs=0
step() { # compiler, output, arguments...: logged to failed.log if it fails
    local cc=$1 o=$2 log
    shift 2
    log=$(mktemp)
    "$cc" "$@" -c -o "$o" >"$log" 2>&1 || { echo "--- $cc $* -o $o"; cat "$log"; } >>"$W/failed.log"
    rm -f "$log"
}
bg() { # runs a step in the background, two at a time
    step "$@" &
    njobs=$((njobs + 1))
    [ $((njobs % 2)) -eq 0 ] && wait
}
for k in $KERNELS; do
    python3 "$E/cu2cpp.py" "kernels/cuda/attention_$k.cu" "$W/gen/attention_$k.cpp" 2>>"$W/failed.log" ||
        echo "cu2cpp failed on attention_$k.cu" >>"$W/failed.log"
    bg g++ "$W/bf16/$k.o" "${CXXF[@]}" "${INC[@]}" "${RENAME[@]}" -MD -MF "$W/bf16/$k.deps" "$W/gen/attention_$k.cpp"
    bg g++ "$W/fp32/$k.o" "${CXXF[@]}" "${INC[@]}" "${RENAME[@]}" -DEMU_BF16_EXACT -MD -MF "$W/fp32/$k.deps" \
        "$W/gen/attention_$k.cpp"
done
for f in emu_runtime emu_cublas; do bg g++ "$W/obj/$f.o" "${CXXF[@]}" "${INC[@]}" -MD -MF "$W/obj/$f.deps" "$E/$f.cpp"; done
bg g++ "$W/obj/test.o" "${CXXF[@]}" -I"$ROOT/kernels" -I"$ROOT/src" -I"$ROOT/tests" "$E/attention_emu_test.cpp"
bg gcc "$W/obj/check.o" -std=c11 -O2 -I"$ROOT/tests" "$ROOT/tests/check.c"
wait
check '[ ! -s "$W/failed.log" ]' "the emulated kernels and the test compile"$'\n'"$(tail -n 40 "$W/failed.log" 2>/dev/null)"
[ -s "$W/failed.log" ] && finish

# No toolkit header may have been read: every CUDA header comes from tests/emu.
# (The lists are *.deps, not *.d: the Makefile includes every *.d under $B.)
deps=$(cat "$W"/bf16/*.deps "$W"/fp32/*.deps "$W"/obj/*.deps | tr ' \\' '\n\n' | grep -v -e '^$' -e ':$' | sort -u)
leak=$(grep -v -e "^$ROOT/" -e "^$W/" <<<"$deps" | grep -iE 'cuda|cublas|/mma\.h$|/crt/|nvidia|/nv[a-z]*\.h$')
check '[ -z "$leak" ]' "no CUDA toolkit header in the emulated build; read:"$'\n'"$leak"
for stub in cuda_runtime.h cuda_bf16.h mma.h cublas_v2.h cublasLt.h; do
    check 'grep -qx "$E/$stub" <<<"$deps"' "the kernels include tests/emu/$stub"
done

# a make of its own: under `make test` the parent's jobserver flags would leak in
LDLIBS=$(env -u MAKEFLAGS -u MAKELEVEL -u MFLAGS make -s --no-print-directory -f Makefile -f "$E/print-ldlibs.mk" \
    B="$B" emu-print-ldlibs 2>&1)
rc=$?
check '[ $rc -eq 0 ]' "the build's link flags: $LDLIBS"
for mode in bf16 fp32; do
    # shellcheck disable=SC2086
    out=$(g++ -o "$W/attention_emu_test_$mode" "$W/obj/"*.o "$W/$mode/"*.o "$B/libsg.a" $LDLIBS 2>&1)
    rc=$?
    check '[ $rc -eq 0 ]' "attention_emu_test_$mode links"$'\n'"$out"
done
echo "built in $((SECONDS - t0)) s"

# --- run: the two seeds in parallel, then the fp32 build ------------------------
t0=$SECONDS
pids=()
for s in "${seeds[@]}"; do
    "$W/attention_emu_test_bf16" "$s" "$W/digests.$s" >"$W/run.$s" 2>&1 &
    pids+=($!)
done
"$W/attention_emu_test_fp32" --fp32 "${seeds[0]}" "$W/digests.fp32" attention >"$W/run.fp32" 2>&1
rc_fp32=$?
rcs=()
for p in "${pids[@]}"; do
    wait "$p"
    rcs+=($?)
done
echo "ran in $((SECONDS - t0)) s"

# each run's own checks count as ours; a run without its summary line crashed
tally_run() { # label, log, exit status
    local line p f
    line=$(grep -E '^attention_emu_test: [0-9]+ passed, [0-9]+ failed$' "$2" | tail -n 1)
    if [ -z "$line" ]; then
        bad "$1: no summary (exit $3)"$'\n'"$(tail -n 20 "$2")"
        return
    fi
    p=$(sed -E 's/.*: ([0-9]+) passed.*/\1/' <<<"$line")
    f=$(sed -E 's/.*passed, ([0-9]+) failed/\1/' <<<"$line")
    pass=$((pass + p)) fail=$((fail + f))
    grep '^FAIL' "$2" | head -n 20 | sed "s/^/$1: /" >&2
    echo "$1: $p passed, $f failed"
}
echo "--- seed ${seeds[0]}: each case's worst error as a fraction of its tolerance, and its time"
grep -E '^(attention|decode|probs\+apply) ' "$W/run.${seeds[0]}"
grep -h '^largest' "$W/run.${seeds[0]}"
grep -E '^attention ' "$W/run.fp32" | awk '{ w = $(NF - 4) > w ? $(NF - 4) : w; n++ }
    END { printf "fp32 operands (EMU_BF16_EXACT), fp32 tolerances: %d cases, worst %.3f of tolerance\n", n, w }'
for j in "${!seeds[@]}"; do tally_run "bf16 seed ${seeds[$j]}" "$W/run.${seeds[$j]}" "${rcs[$j]}"; done
tally_run "fp32 seed ${seeds[0]}" "$W/run.fp32" "$rc_fp32"

# every case's outputs bitwise equal under every seed
n=$(wc -l <"$W/digests.${seeds[0]}")
check '[ "$n" -gt 100 ]' "the battery ran ($n cases)"
for s in "${seeds[@]:1}"; do
    while read -r line; do
        bad "outputs differ between seeds ${seeds[0]} and $s (a race): ${line#< }"
    done < <(diff "$W/digests.${seeds[0]}" "$W/digests.$s" | grep '^<' | sed -E 's/ [0-9a-f]{16}$//')
    same=$(comm -12 <(sort "$W/digests.${seeds[0]}") <(sort "$W/digests.$s") | wc -l)
    pass=$((pass + same))
    echo "seeds ${seeds[0]} and $s: $same of $n cases bitwise equal"
done
finish
