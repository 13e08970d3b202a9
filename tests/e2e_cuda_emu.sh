#!/usr/bin/env bash
# The CUDA ops, run without a GPU: every kernels/cuda/*.cu file but
# runtime.cu, unchanged, is rewritten into C++ (tests/emu/cu2cpp.py) and
# compiled with g++ against the host emulator in tests/emu (threads as
# coroutines switched in random order at every barrier, wmma bf16
# fragments, shared memory poisoned with NaN, cuBLAS, cuBLASLt and CUB's
# radix sort as host loops), then compared with the CPU ops:
#   - tests/emu/attention_emu_test.cpp: the attention kernels at bf16 operand
#     rounding, as on the device, with tests/gpu/test_gpu_ops.c's tolerances;
#   - tests/emu/ops_emu_test.cpp: LayerNorm, GELU (both forms), add, the
#     biases, the rotary embedding, AdamW, sumsq, embeddings, gates,
#     classifier, logits and matmul, likewise;
# both under two scheduler seeds (EMU_SEEDS, default "1 2"): every output
# must also repeat bitwise between them, as the kernels are deterministic
# by design; and the streaming attention again with bf16 that keeps fp32
# values (EMU_BF16_EXACT) at fp32 tolerances: the algorithm itself.
# No nvcc and no CUDA header is used: tests/emu's stubs come first on the
# include path, and the dependency lists are checked for toolkit headers.
# What this catches and what it cannot: docs/cuda.md, "Emulated in CI".
# Needs the build ($B/libsg.a holds the CPU ops), g++ and python3.
# EMU_SANITIZE=1 (tests/e2e_cuda_emu_san.sh): the kernels, the emulator and
# the tests built with AddressSanitizer and UBSan, one seed, the bf16
# batteries alone (the attention battery in two shards), in $B/emu-san;
# any report ends its run, which then misses its summary and fails.
set -u
B=${1:-build}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
SAN=${EMU_SANITIZE:-0}
E2E_NAME=e2e_cuda_emu$([ "$SAN" = 1 ] && echo _san)
source "$(dirname "$0")/lib.sh"
if [ "$SAN" = 1 ]; then
    seeds=(${EMU_SEEDS:-1})
    # the sanitizers' checks are on addresses, which bf16's rounding does
    # not change: the fp32 battery (a subset of the bf16 battery's cases)
    # adds no coverage here, so it is not built; and the bf16 attention
    # battery, slowest by far (about 430 s), runs in two halves beside the
    # ops battery (about 50 s): three runs at once on two cores
    fp32=0 shards=2 par=3
    # the emulator's thread stacks and buffers live to the end on purpose
    export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0:detect_stack_use_after_return=0
else
    seeds=(${EMU_SEEDS:-1 2})
    fp32=1 shards=1 par=2
fi

for tool in g++ python3; do
    if ! command -v $tool >/dev/null; then
        bad "$tool not found: the emulated CUDA ops test needs it (tools/install-deps.sh installs build-essential and python3)"
        finish
    fi
done
if [ ! -f "$B/libsg.a" ]; then
    bad "$B/libsg.a not found: build first (make B=$B)"
    finish
fi

W=$(cd "$B" && pwd)/emu$([ "$SAN" = 1 ] && echo -san)
rm -rf "$W"
mkdir -p "$W/gen" "$W/bf16" "$W/fp32" "$W/ops" "$W/obj" "$W/test"
E=$ROOT/tests/emu
INC=(-I"$E" -I"$ROOT/kernels/cuda" -I"$ROOT/kernels" -I"$ROOT/src")
CXXF=(-std=c++17 -O2 -g -Wall -Wextra -Wno-unused-parameter -Wno-unknown-pragmas)
LINKF=()
if [ "$SAN" = 1 ]; then
    CXXF=(-std=c++17 -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
          "${CXXF[@]:3}")
    LINKF=(-fsanitize=address,undefined)
fi
# the CUDA ops get their own names next to the CPU ops
RENAME=()
for op in fwd bwd gate_bwd decode_fwd decode_bwd probs apply; do
    RENAME+=(-Dop_attention_$op=cuda_op_attention_$op)
done
for op in matmul_fwd matmul_bwd matmul_only matmul_only_end bf16_operand attention_operand promised_len params written layernorm_fwd residual_layernorm_fwd layernorm_bwd gelu_fwd gelu_bwd gelu_tanh_fwd gelu_tanh_bwd add \
    bias_add bias_bwd rope embed_fwd embed_bwd gate_fwd gate_bwd classifier logits adamw adamw_multi sumsq threads alloc free upload download copy zero \
    host_memory sync backend memory_peak; do
    RENAME+=(-Dop_$op=cuda_op_$op)
done
KERNELS="fwd fwd_mma fwd_wgmma bwd bwd_mma pack decode probs cudnn trace" # attention_$k.cu: bf16 and EMU_BF16_EXACT builds
OPS="layernorm elementwise bias rope embed gate classifier matmul gemm weight_copies upload_staging" # $k.cu: bf16 build

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
    [ $fp32 = 1 ] && bg g++ "$W/fp32/$k.o" "${CXXF[@]}" "${INC[@]}" "${RENAME[@]}" -DEMU_BF16_EXACT \
        -MD -MF "$W/fp32/$k.deps" "$W/gen/attention_$k.cpp"
done
for k in $OPS; do
    python3 "$E/cu2cpp.py" "kernels/cuda/$k.cu" "$W/gen/$k.cpp" 2>>"$W/failed.log" ||
        echo "cu2cpp failed on $k.cu" >>"$W/failed.log"
    bg g++ "$W/ops/$k.o" "${CXXF[@]}" "${INC[@]}" "${RENAME[@]}" -MD -MF "$W/ops/$k.deps" "$W/gen/$k.cpp"
done
# the attention forward writes its output's bf16 twin into matmul.cu's table
# of copies: the attention tests link matmul.cu too (with the products it
# runs, gemm.cu, and the weight copies it reads), built as they are, and
# gate.cu (op_attention_gate_bwd runs op_gate_bwd or its reduction); and
# SG_ATTN=cudnn's CPU twin of cuDNN
modes=(bf16 $([ $fp32 = 1 ] && echo fp32))
for mode in "${modes[@]}"; do
    bg g++ "$W/$mode/emu_cudnn.o" "${CXXF[@]}" "${INC[@]}" $([ $mode = fp32 ] && echo -DEMU_BF16_EXACT) \
        -MD -MF "$W/$mode/emu_cudnn.deps" "$E/emu_cudnn.cpp"
    for k in matmul gemm weight_copies gate; do
        bg g++ "$W/$mode/$k.o" "${CXXF[@]}" "${INC[@]}" "${RENAME[@]}" $([ $mode = fp32 ] && echo -DEMU_BF16_EXACT) \
            -MD -MF "$W/$mode/$k.deps" "$W/gen/$k.cpp"
    done
done
bg g++ "$W/ops/emu_memory.o" "${CXXF[@]}" "${INC[@]}" "${RENAME[@]}" -MD -MF "$W/ops/emu_memory.deps" "$E/emu_memory.cpp"
# every buffer the kernels take goes through its accounting: every test links it
python3 "$E/cu2cpp.py" kernels/cuda/device_memory.cu "$W/gen/device_memory.cpp" 2>>"$W/failed.log" ||
    echo "cu2cpp failed on device_memory.cu" >>"$W/failed.log"
bg g++ "$W/obj/device_memory.o" "${CXXF[@]}" "${INC[@]}" "${RENAME[@]}" -MD -MF "$W/obj/device_memory.deps" \
    "$W/gen/device_memory.cpp"
for f in emu_runtime emu_cublas emu_cublaslt; do
    bg g++ "$W/obj/$f.o" "${CXXF[@]}" "${INC[@]}" -MD -MF "$W/obj/$f.deps" "$E/$f.cpp"
done
for t in attention ops; do
    bg g++ "$W/test/$t.o" "${CXXF[@]}" -I"$ROOT/kernels" -I"$ROOT/src" -I"$ROOT/tests" "$E/${t}_emu_test.cpp"
done
bg gcc "$W/obj/check.o" -std=c11 -O2 -I"$ROOT/tests" "$ROOT/tests/check.c"
# what the emulated warpgroup products make of code that breaks their
# asynchrony (tests/emu/wgmma_async_probe.cu)
python3 "$E/cu2cpp.py" "$E/wgmma_async_probe.cu" "$W/gen/wgmma_async_probe.cpp" 2>>"$W/failed.log" ||
    echo "cu2cpp failed on wgmma_async_probe.cu" >>"$W/failed.log"
bg g++ "$W/test/wgmma_async_probe.o" "${CXXF[@]}" "${INC[@]}" "$W/gen/wgmma_async_probe.cpp"
if [ "$SAN" = 1 ]; then # the canary: a kernel that reads past its buffer (tests/emu/asan_probe.cu)
    python3 "$E/cu2cpp.py" "$E/asan_probe.cu" "$W/gen/asan_probe.cpp" 2>>"$W/failed.log" ||
        echo "cu2cpp failed on asan_probe.cu" >>"$W/failed.log"
    bg g++ "$W/test/asan_probe.o" "${CXXF[@]}" "${INC[@]}" "$W/gen/asan_probe.cpp"
fi
wait
check '[ ! -s "$W/failed.log" ]' "the emulated kernels and the test compile"$'\n'"$(tail -n 40 "$W/failed.log" 2>/dev/null)"
[ -s "$W/failed.log" ] && finish

# No toolkit header may have been read: every CUDA header comes from tests/emu.
# (The lists are *.deps, not *.d: the Makefile includes every *.d under $B.)
deps=$(cat "$W"/bf16/*.deps "$W"/ops/*.deps "$W"/obj/*.deps $([ $fp32 = 1 ] && echo "$W"/fp32/*.deps) | tr ' \\' '\n\n' | grep -v -e '^$' -e ':$' | sort -u)
leak=$(grep -v -e "^$ROOT/" -e "^$W/" <<<"$deps" | grep -iE 'cuda|cublas|/cub/|/thrust/|/mma\.h$|/crt/|nvidia|/nv[a-z]*\.h$')
# kernels/cuda/mma_ptx.h and wgmma_ptx.h are inline PTX: the stubs of the same names must shadow them
leak+=$(grep -x -e "$ROOT/kernels/cuda/mma_ptx.h" -e "$ROOT/kernels/cuda/wgmma_ptx.h" <<<"$deps")
check '[ -z "$leak" ]' "no CUDA toolkit header in the emulated build; read:"$'\n'"$leak"
for stub in cuda_runtime.h cuda_bf16.h mma.h mma_ptx.h wgmma_ptx.h cublas_v2.h cublasLt.h cub/device/device_radix_sort.cuh; do
    check 'grep -qx "$E/$stub" <<<"$deps"' "the kernels include tests/emu/$stub"
done

# a make of its own: under `make test` the parent's jobserver flags would leak in
LDLIBS=$(env -u MAKEFLAGS -u MAKELEVEL -u MFLAGS make -s --no-print-directory -f Makefile -f "$E/print-ldlibs.mk" \
    B="$B" emu-print-ldlibs 2>&1)
rc=$?
check '[ $rc -eq 0 ]' "the build's link flags: $LDLIBS"
for mode in "${modes[@]}"; do
    # shellcheck disable=SC2086
    out=$(g++ "${LINKF[@]}" -o "$W/attention_emu_test_$mode" "$W/test/attention.o" "$W/obj/"*.o "$W/$mode/"*.o "$B/libsg.a" \
        $LDLIBS 2>&1)
    rc=$?
    check '[ $rc -eq 0 ]' "attention_emu_test_$mode links"$'\n'"$out"
done
# shellcheck disable=SC2086
out=$(g++ "${LINKF[@]}" -o "$W/ops_emu_test" "$W/test/ops.o" "$W/obj/"*.o "$W/ops/"*.o "$B/libsg.a" $LDLIBS 2>&1)
rc=$?
check '[ $rc -eq 0 ]' "ops_emu_test links"$'\n'"$out"
# shellcheck disable=SC2086
out=$(g++ "${LINKF[@]}" -o "$W/wgmma_async_probe" "$W/test/wgmma_async_probe.o" "$W/obj/"*.o "$B/libsg.a" $LDLIBS 2>&1)
rc=$?
check '[ $rc -eq 0 ]' "wgmma_async_probe links"$'\n'"$out"
if [ "$SAN" = 1 ]; then
    # shellcheck disable=SC2086
    out=$(g++ "${LINKF[@]}" -o "$W/asan_probe" "$W/test/asan_probe.o" "$W/obj/"*.o "$B/libsg.a" $LDLIBS 2>&1)
    rc=$?
    check '[ $rc -eq 0 ]' "asan_probe links"$'\n'"$out"
fi
echo "built in $((SECONDS - t0)) s"

# --- run: two at a time (three under the sanitizers), one thread each ---------
t0=$SECONDS
export OMP_NUM_THREADS=1 # the CPU references: one core per run
runs=()                  # att.SEED[.SHARD] and ops.SEED (the bf16 batteries), fp32
for s in "${seeds[@]}"; do
    if [ $shards = 1 ]; then runs+=("att.$s"); else for ((i = 0; i < shards; i++)); do runs+=("att.$s.$i"); done; fi
done
for s in "${seeds[@]}"; do runs+=("ops.$s"); done
[ $fp32 = 1 ] && runs+=(fp32)
start() { # a run in the background, its exit status to $W/rc.$1
    case $1 in
    att.*.*) local r=${1#att.}
        "$W/attention_emu_test_bf16" --shard "${r#*.}/$shards" "${r%.*}" "$W/digests.$1" >"$W/run.$1" 2>&1 ;;
    att.*) "$W/attention_emu_test_bf16" "${1#att.}" "$W/digests.$1" >"$W/run.$1" 2>&1 ;;
    ops.*) "$W/ops_emu_test" "${1#ops.}" "$W/digests.$1" >"$W/run.$1" 2>&1 ;;
    fp32) "$W/attention_emu_test_fp32" --fp32 "${seeds[0]}" "$W/digests.fp32" attention >"$W/run.fp32" 2>&1 ;;
    esac
    echo $? >"$W/rc.$1"
}
n=0
for r in "${runs[@]}"; do
    start "$r" &
    n=$((n + 1))
    [ $n -ge $par ] && wait -n
done
wait
echo "ran in $((SECONDS - t0)) s"
# a sharded battery's parts as one run: its cases in the battery's order
# (case i went to shard (i + i / shards) mod shards: tests/emu/battery.h),
# its checks added up, and the worst exit status
if [ $shards -gt 1 ]; then
    for s in "${seeds[@]}"; do
        parts=()
        for ((i = 0; i < shards; i++)); do parts+=("att.$s.$i"); done
        python3 - "$W" "att.$s" "${parts[@]}" <<'PYEOF2'
import re, sys
w, whole, parts = sys.argv[1], sys.argv[2], sys.argv[3:]
summary = re.compile(r"^attention_emu_test: (\d+) passed, (\d+) failed$")
case = re.compile(r"^(attention|decode|probs\+apply) .* worst [0-9.]+ of tolerance +[0-9.]+ s$")
logs = [open(f"{w}/run.{p}").read().splitlines() for p in parts]
digests = [open(f"{w}/digests.{p}").read().splitlines() for p in parts]
rcs = [int(open(f"{w}/rc.{p}").read().strip() or 1) for p in parts]
cases = [[l for l in log if case.match(l)] for log in logs]
rest = [[l for l in log if not case.match(l) and not summary.match(l)] for log in logs]
sums = [[m for l in log for m in [summary.match(l)] if m] for log in logs]
def interleave(lists):
    n, at, out = len(lists), [0] * len(lists), []
    for i in range(sum(map(len, lists))):
        s = (i + i // n) % n
        if at[s] == len(lists[s]):
            break
        out.append(lists[s][at[s]])
        at[s] += 1
    return out + [x for s in range(n) for x in lists[s][at[s]:]]
lines = interleave(cases) + [l for r in rest for l in r]
if all(sums):
    lines.append("attention_emu_test: %d passed, %d failed" % (sum(int(s[-1][1]) for s in sums),
                                                                sum(int(s[-1][2]) for s in sums)))
open(f"{w}/run.{whole}", "w").write("\n".join(lines) + "\n")
open(f"{w}/digests.{whole}", "w").write("".join(l + "\n" for l in interleave(digests)))
open(f"{w}/rc.{whole}", "w").write("%d\n" % max(rcs))
PYEOF2
    done
fi

# each run's own checks count as ours; a run without its summary line crashed
tally_run() { # label, run name
    local line p f name rc
    name=$([[ $2 == ops.* ]] && echo ops_emu_test || echo attention_emu_test)
    rc=$(cat "$W/rc.$2" 2>/dev/null)
    line=$(grep -E "^$name: [0-9]+ passed, [0-9]+ failed\$" "$W/run.$2" | tail -n 1)
    if [ -z "$line" ]; then
        bad "$1: no summary (exit $rc)"$'\n'"$(tail -n 20 "$W/run.$2")"
        return
    fi
    p=$(sed -E 's/.*: ([0-9]+) passed.*/\1/' <<<"$line")
    f=$(sed -E 's/.*passed, ([0-9]+) failed/\1/' <<<"$line")
    pass=$((pass + p)) fail=$((fail + f))
    grep '^FAIL' "$W/run.$2" | head -n 20 | sed "s/^/$1: /" >&2
    echo "$1: $p passed, $f failed"
}
s1=${seeds[0]}
echo "--- seed $s1: each case's worst error as a fraction of its tolerance, and its time"
grep -hE 'worst [0-9.]+ of tolerance +[0-9.]+ s$' "$W/run.att.$s1" "$W/run.ops.$s1"
grep -h '^largest' "$W/run.att.$s1" "$W/run.ops.$s1"
[ $fp32 = 1 ] && grep -E '^attention ' "$W/run.fp32" | awk '{ w = $(NF - 4) > w ? $(NF - 4) : w; n++ }
    END { printf "fp32 operands (EMU_BF16_EXACT), fp32 tolerances: %d cases, worst %.3f of tolerance\n", n, w }'
for s in "${seeds[@]}"; do tally_run "attention bf16 seed $s" "att.$s"; done
[ $fp32 = 1 ] && tally_run "attention fp32 seed $s1" fp32
for s in "${seeds[@]}"; do tally_run "ops seed $s" "ops.$s"; done

# --shard I/N: the shards' cases together are the battery's, bitwise (the
# sanitizer build runs the attention battery so); a bad I/N stops it
few="attention B1 T7 H2 d16"
for i in 0 1 2; do "$W/attention_emu_test_bf16" --shard $i/3 "$s1" "$W/shard.$i" "$few" >/dev/null 2>&1; done
whole=$(grep "^$few" "$W/digests.att.$s1" | sort)
parts=$(cat "$W"/shard.{0,1,2} | sort)
check '[ -n "$whole" ] && [ "$parts" = "$whole" ] && [ -s "$W/shard.0" ] && [ -s "$W/shard.2" ]' \
    "--shard i/3: the three shards' cases are the battery's, with its outputs ($(wc -l <<<"$parts") of $(wc -l <<<"$whole") cases)"
for bad_shard in 2/2 x 1/0 "1/2x"; do
    out=$("$W/attention_emu_test_bf16" --shard "$bad_shard" "$s1" /dev/null "$few" 2>&1); rc=$?
    check '[ $rc -eq 2 ] && grep -q "shard wants I/N with I < N, got $bad_shard" <<<"$out"' \
        "--shard $bad_shard: a clear error and exit 2 (exit $rc): $out"
done
out=$("$W/ops_emu_test" --shard 3/2 "$s1" /dev/null 2>&1); rc=$?
check '[ $rc -eq 2 ] && grep -q "shard wants I/N with I < N, got 3/2" <<<"$out"' "ops_emu_test --shard 3/2: exit 2 (exit $rc): $out"
out=$("$W/attention_emu_test_bf16" --fp33 "$s1" /dev/null 2>&1); rc=$?
check '[ $rc -eq 2 ] && grep -q "unknown option --fp33" <<<"$out"' "attention_emu_test --fp33: exit 2 (exit $rc): $out"

# SG_ATTN picks the tile kernels; anything but wmma or mma stops the op
one="attention B2 T7 H2 d64 phantom=learned logbias=1"
out=$(SG_ATTN=mma "$W/attention_emu_test_bf16" --as-set 1 /dev/null "$one" 2>&1)
check 'grep -q "tiles=mma" <<<"$out" && ! grep -q "tiles=wmma" <<<"$out" && grep -qE " 0 failed$" <<<"$out"' \
    "SG_ATTN=mma runs the mma tiles alone:"$'\n'"$out"
out=$(SG_ATTN=fast "$W/attention_emu_test_bf16" --as-set 1 /dev/null "$one" 2>&1)
rc=$?
check '[ $rc -eq 2 ] && grep -q "fast: SG_ATTN must be \"mma\" (the default), \"wmma\" or \"cudnn\"" <<<"$out"' \
    "SG_ATTN=fast: a clear error and exit 2 as the program loads (exit $rc):"$'\n'"$out"

# SG_ATTN_WARP_ROWS: the mma forward with one 16-row m-tile a warp (the
# battery compares it with two); anything but 16 or 32 stops the op
out=$(SG_ATTN=mma SG_ATTN_WARP_ROWS=16 "$W/attention_emu_test_bf16" --as-set 1 /dev/null "$one" 2>&1)
check 'grep -q "tiles=mma" <<<"$out" && grep -qE " 0 failed$" <<<"$out"' \
    "SG_ATTN_WARP_ROWS=16 under SG_ATTN=mma:"$'\n'"$out"
out=$(SG_ATTN=mma SG_ATTN_WARP_ROWS=24 "$W/attention_emu_test_bf16" --as-set 1 /dev/null "$one" 2>&1)
rc=$?
check '[ $rc -eq 2 ] && grep -q "24: SG_ATTN_WARP_ROWS must be 16 or 32" <<<"$out"' \
    "SG_ATTN_WARP_ROWS=24: a clear error and exit 2 as the program loads (exit $rc):"$'\n'"$out"

# SG_ATTN_DQ=stored: the battery under it (which compares it with the
# recomputing dq kernel, bitwise); anything but recompute or stored stops the op
out=$(SG_ATTN=mma SG_ATTN_DQ=stored "$W/attention_emu_test_bf16" --as-set 1 /dev/null "$one" 2>&1)
check 'grep -q "tiles=mma" <<<"$out" && grep -qE " 0 failed$" <<<"$out"' \
    "SG_ATTN_DQ=stored under SG_ATTN=mma:"$'\n'"$out"
out=$(SG_ATTN=mma SG_ATTN_DQ=store "$W/attention_emu_test_bf16" --as-set 1 /dev/null "$one" 2>&1)
rc=$?
check '[ $rc -eq 2 ] && grep -q "store: SG_ATTN_DQ must be \"recompute\" (the default) or \"stored\"" <<<"$out"' \
    "SG_ATTN_DQ=store: a clear error and exit 2 as the program loads (exit $rc):"$'\n'"$out"

# SG_ATTN_WGMMA=1 and 2: the battery under each (the forward and the dK/dV
# kernel on the emulated warpgroup products; 2: the pipelined forward);
# anything but 0, 1 or 2 stops the op
for m in 1 2; do
    out=$(SG_ATTN=mma SG_ATTN_WGMMA=$m "$W/attention_emu_test_bf16" --as-set 1 /dev/null "$one" 2>&1)
    check 'grep -q "tiles=mma" <<<"$out" && grep -qE " 0 failed$" <<<"$out"' \
        "SG_ATTN_WGMMA=$m under SG_ATTN=mma:"$'\n'"$out"
done
for v in yes 3; do
    out=$(SG_ATTN=mma SG_ATTN_WGMMA=$v "$W/attention_emu_test_bf16" --as-set 1 /dev/null "$one" 2>&1)
    rc=$?
    check '[ $rc -eq 2 ] && grep -q "$v: SG_ATTN_WGMMA must be 0 (the default), 1 (.*) or 2 (.*)" <<<"$out"' \
        "SG_ATTN_WGMMA=$v: a clear error and exit 2 as the program loads (exit $rc):"$'\n'"$out"
done
# SG_WGMMA_SWAP reaches the warpgroup kernels' descriptors: with the K-major
# or the MN-major reading swapped, the emulated products (which decode the
# readings the kernels assume) read the wrong elements, or past the shared
# memory, and the forward fails
for sw in 1 2; do
    out=$(SG_ATTN=mma SG_ATTN_WGMMA=1 SG_WGMMA_SWAP=$sw "$W/attention_emu_test_bf16" --as-set 1 /dev/null "$one" 2>&1)
    check 'grep -qE "FAIL|emu wgmma: a B element outside the dynamic shared memory" <<<"$out" && ! grep -qE " 0 failed$" <<<"$out"' \
        "SG_WGMMA_SWAP=$sw under SG_ATTN_WGMMA=1: the swapped descriptors give a wrong forward:"$'\n'"$(tail -n 5 <<<"$out")"
done
out=$(SG_ATTN=mma SG_WGMMA_SWAP=4 "$W/attention_emu_test_bf16" --as-set 1 /dev/null "$one" 2>&1)
rc=$?
check '[ $rc -eq 2 ] && grep -q "4: SG_WGMMA_SWAP must be 0 to 3" <<<"$out"' \
    "SG_WGMMA_SWAP=4: a clear error and exit 2 as the program loads (exit $rc):"$'\n'"$out"

# The emulated warpgroup products are as asynchronous as the device's: a
# product lands at its wait, reading shared memory as it is then, and
# code that reads its accumulators early, writes its A registers before the
# wait, never waits or forgets the fence is caught (wgmma_async_probe.cu)
probe() { # mode, expected output line or error
    out=$("$W/wgmma_async_probe" "$1" 2>&1)
    rc=$?
}
probe ok
check '[ $rc -eq 0 ] && grep -qx "probe ok: 16 16 0" <<<"$out"' "wgmma_async_probe ok: D = 16 (exit $rc): $out"
probe early
check '[ $rc -eq 0 ] && grep -qx "probe early: nan 16 0" <<<"$out"' \
    "wgmma_async_probe early: an accumulator read before the wait is NaN (exit $rc): $out"
probe smem
check '[ $rc -eq 0 ] && grep -qx "probe smem: 32 32 0" <<<"$out"' \
    "wgmma_async_probe smem: B rewritten before the wait is what the product reads (exit $rc): $out"
probe pipe
check '[ $rc -eq 0 ] && grep -qx "probe pipe: 16 nan 16" <<<"$out"' \
    "wgmma_async_probe pipe: wg_wait<1> lands the older group alone (exit $rc): $out"
probe areg
check '[ $rc -ne 0 ] && grep -q "emu wgmma: an A fragment.s registers changed before the wait" <<<"$out"' \
    "wgmma_async_probe areg: A registers written before the wait stop the kernel (exit $rc): $out"
probe nowait
check '[ $rc -ne 0 ] && grep -q "a block ended with warpgroup products never waited for" <<<"$out"' \
    "wgmma_async_probe nowait: a block ending with products in flight stops (exit $rc): $out"
probe nofence
check '[ $rc -ne 0 ] && grep -q "emu wgmma: a product issued with no wg_fence since the last wait" <<<"$out"' \
    "wgmma_async_probe nofence: a product with no fence before it stops (exit $rc): $out"

# the sanitizers see a kernel's reads on the emulator's thread stacks: the
# canary's read 30 floats past its buffer, after two barriers, is stopped
if [ "$SAN" = 1 ]; then
    out=$("$W/asan_probe" 0 2>&1)
    rc=$?
    check '[ $rc -eq 0 ] && grep -q "asan_probe: done" <<<"$out"' \
        "asan_probe 0 (no read past the buffer): exit 0 and no report (exit $rc):"$'\n'"$out"
    out=$("$W/asan_probe" 30 2>&1)
    rc=$?
    check '[ $rc -ne 0 ] && grep -q "AddressSanitizer: heap-buffer-overflow" <<<"$out" && grep -q "in probe_kernel" <<<"$out" && ! grep -q "asan_probe: done" <<<"$out"' \
        "asan_probe 30: AddressSanitizer stops the kernel's read past the buffer (exit $rc):"$'\n'"$(head -n 12 <<<"$out")"
fi

# every case's outputs bitwise equal under every seed
for b in att ops; do
    n=$(wc -l <"$W/digests.$b.$s1")
    min=$([ $b = att ] && echo 100 || echo 30)
    check '[ "$n" -gt $min ]' "the $b battery ran ($n cases)"
    for s in "${seeds[@]:1}"; do
        while read -r line; do
            bad "$b: outputs differ between seeds $s1 and $s (a race): ${line#< }"
        done < <(diff "$W/digests.$b.$s1" "$W/digests.$b.$s" | grep '^<' | sed -E 's/ [0-9a-f]{16}$//')
        same=$(comm -12 <(sort "$W/digests.$b.$s1") <(sort "$W/digests.$b.$s") | wc -l)
        pass=$((pass + same))
        echo "$b: seeds $s1 and $s: $same of $n cases bitwise equal"
    done
done
finish
