#!/usr/bin/env bash
# The CUDA build's sgtrain, whole, without a GPU: its host code (src/*.c,
# compiled as `make cuda` compiles it, NCCL path included) over the CUDA
# kernels run by the host emulator (tests/emu, as tests/e2e_cuda_emu.sh),
# with NCCL and the runtime's streams emulated over MPI
# (tests/emu/emu_nccl.cpp); and test-gpu's own op test, test_gpu_ops, over
# the same kernels.  What this shows:
#   - every arm's loss and gradients (`sgtrain grads`, head dims 16 and 64,
#     both attention tile kernels) against the CPU build, as test-gpu's
#     step 2 does on a GPU (tests/gpu/compare_grads.py's tolerances), and
#     some in GPT-2's and GPT-NeoX's forms (`sgtrain import`'s models);
#   - one emulated GPU trains like the CPU build (every loss within 2%:
#     bf16 matrix products against fp32, as on a real GPU, test-gpu), and
#     analyses the CPU's checkpoint like it (test-gpu's step 5);
#   - the matmuls' kept bf16 copies and their producers' twins
#     (kernels/cuda/matmul.cu) change no bit: every arm's gradients, and the
#     training runs' losses and parameters, with them off
#     (SG_MATMUL_KEEP=0) are bitwise those with them on, and test_gpu_ops's
#     twin cases pass with them off too;
#   - SG_MATMUL_TUNE=1, which times cuBLASLt's candidates for each shape
#     and keeps the fastest with the first choice's bits, changes no bit
#     either, although the emulated cuBLASLt's fastest-looking candidates
#     round differently (tests/emu/emu_cublaslt.cpp): the gradients of two
#     arms under both tile kernels, and a training run that accumulates dW;
#     every shape is tuned, and the bitwise filter rejects those candidates;
#     a bad value stops the program before a run directory exists;
#   - the tensors the model promises to matmuls alone (op_matmul_only) keep
#     only their twins, and nothing else reads them: every emulated run
#     fills the fp32 left unstored with NaN (SG_TWIN_POISON=1), and is still
#     bitwise the run without twins; a broken promise stops the program;
#   - 2 and 4 ranks on the NCCL path train the run one rank trains (1e-5:
#     bf16 magnifies the order of the gradient sums), with
#     the sum after the backward or in buckets during it on NCCL's own
#     stream, and with ZeRO-1's reduce-scatter, all-gather and per-bucket
#     reduces; stopped on 2 ranks, the run resumes on 1;
#   - side-stream sums run as late as the program allows (a missing wait
#     would show) and, again, as early (EMU_STREAMS=early);
#   - two ranks on one GPU: NCCL's refusal ends the job with a message;
#   - the graphs SG_ATTN=cudnn hands to cuDNN have 16-byte-aligned operands,
#     and at the paper's tiers are those tests/cudnn/graphs.txt holds (which
#     tests/e2e_cuda_build.sh puts to the real cuDNN for each target GPU).
# What it cannot show: NCCL itself, the device, timing (docs/distributed.md).
set -u
B=${1:-build}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
E2E_NAME=e2e_cuda_sgtrain_emu
source "$(dirname "$0")/lib.sh"
export OMP_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export EMU_STREAMS= EMU_GPUS= # set per run below; empty: the defaults (late, 8 GPUs)
# fp32 outputs left unstored for their twins read as NaN (kernels/cuda/matmul.cu)
export SG_TWIN_POISON=1
# The runs below name their tile kernels; those that name none were written
# for wmma, the default until 2026-12-04.  Unset, the default (mma) is
# checked against SG_ATTN=mma at the end.
export SG_ATTN=wmma

for tool in g++ python3 mpirun; do
    command -v $tool >/dev/null || { bad "$tool not found (tools/install-deps.sh installs it)"; finish; }
done
for f in sgtrain sgsynth; do [ -x "$B/$f" ] || { bad "$B/$f not found: build first (make B=$B)"; finish; }; done
mk() { env -u MAKEFLAGS -u MAKELEVEL -u MFLAGS make -s --no-print-directory -f Makefile -f tests/emu/print-ldlibs.mk \
    B="$B" "$@"; }
MPIF=$(mk emu-print-mpi-cflags)
if [ -z "$MPIF" ]; then
    bad "the build has no MPI (pkg-config ompi-c): install libopenmpi-dev"
    finish
fi
# the host objects' flags as `make cuda` has them, less the dependency files
# (the Makefile includes every *.d under $B), with the NCCL path on
read -r -a CF <<<"$(mk emu-print-cuda-cflags | sed -E 's/ -MMD| -MP//g')"
read -r -a LIBS <<<"$(mk emu-print-host-libs)"
read -r -a MPIA <<<"$MPIF"

W=$(cd "$B" && pwd)/sgtrain-emu
rm -rf "$W"
mkdir -p "$W/gen" "$W/obj"
E=$ROOT/tests/emu
INC=(-I"$E" -I"$ROOT/kernels/cuda" -I"$ROOT/kernels" -I"$ROOT/src")
CXXF=(-std=c++17 -O2 -Wall -Wextra -Wno-unused-parameter -Wno-unknown-pragmas)

# --- build: two compile jobs at a time ------------------------------------------
t0=$SECONDS
step() { # output, compiler and arguments: logged to failed.log if it fails
    local o=$1 log
    shift
    log=$(mktemp)
    "$@" -c -o "$o" >"$log" 2>&1 || { echo "--- $* -o $o"; cat "$log"; } >>"$W/failed.log"
    rm -f "$log"
}
n=0
bg() {
    step "$@" &
    n=$((n + 1))
    [ $((n % 2)) -eq 0 ] && wait
}
for cu in kernels/cuda/*.cu; do
    k=$(basename "$cu" .cu)
    [ "$k" = runtime ] && continue # the emulator is the runtime
    python3 "$E/cu2cpp.py" "$cu" "$W/gen/$k.cpp" 2>>"$W/failed.log" || echo "cu2cpp failed on $cu" >>"$W/failed.log"
    bg "$W/obj/k_$k.o" g++ "${CXXF[@]}" "${INC[@]}" "$W/gen/$k.cpp"
done
for f in emu_runtime emu_cublas emu_cublaslt emu_memory emu_cudnn; do
    bg "$W/obj/e_$f.o" g++ "${CXXF[@]}" "${INC[@]}" "$E/$f.cpp"
done
# MPI's C API only (Open MPI would pull in its C++ bindings)
bg "$W/obj/e_emu_nccl.o" g++ "${CXXF[@]}" -DOMPI_SKIP_MPICXX -DMPICH_SKIP_MPICXX "${MPIA[@]}" -I"$E" "$E/emu_nccl.cpp"
for c in src/*.c; do
    s=$(basename "$c" .c)
    extra=()
    [ "$s" = dist_nccl ] && extra=(-I"$E/c") # its cuda_runtime_api.h and nccl.h
    bg "$W/obj/h_$s.o" gcc "${CF[@]}" -DSG_NCCL "${extra[@]}" "$c"
done
wait
check '[ ! -s "$W/failed.log" ]' "the emulated CUDA sgtrain compiles"$'\n'"$(tail -n 30 "$W/failed.log" 2>/dev/null)"
[ -s "$W/failed.log" ] && finish
out=$(g++ -o "$W/sgtrain" "$W"/obj/*.o "${LIBS[@]}" 2>&1)
check '[ $? -eq 0 ]' "the emulated CUDA sgtrain links"$'\n'"$out"
[ -x "$W/sgtrain" ] || finish
# test-gpu's op test, tests/gpu/test_gpu_ops.c, over the same kernels: its C
# objects and the CPU reference ops (prefixed cpu_) as `make cuda` builds them
CB=$B/cuda
read -r -a TG <<<"$(mk emu-print-gpu-test-objs)"
REF=($(ls kernels/cpu/*.c | sed "s|^|$CB/ref/|; s|\.c\$|.o|"))
out=$(mk "${TG[@]}" "${REF[@]}" 2>&1)
check '[ $? -eq 0 ]' "test_gpu_ops's objects build"$'\n'"$out"
read -r -a LDL <<<"$(mk emu-print-ldlibs)"
out=$(g++ -o "$W/test_gpu_ops" "${TG[@]}" "${REF[@]}" "$W"/obj/k_*.o "$W"/obj/e_emu_{runtime,cublas,cublaslt,memory,cudnn}.o \
    "$W/obj/h_rng.o" "${LIBS[@]}" "${LDL[@]}" 2>&1)
check '[ $? -eq 0 ]' "the emulated test_gpu_ops links"$'\n'"$out"
# bench_gpu (tests/gpu/bench_gpu.c) over the same kernels, for its phase
# clocks below: its object as `make cuda` builds it, the host code but main
out=$(mk "$CB/tg/bench_gpu.o" 2>&1)
check '[ $? -eq 0 ]' "bench_gpu's object builds"$'\n'"$out"
HOST=($(ls "$W"/obj/h_*.o | grep -v '/h_main\.o$'))
out=$(g++ -o "$W/bench_gpu" "$CB/tg/bench_gpu.o" "$W"/obj/k_*.o "$W"/obj/e_*.o "${HOST[@]}" "${LIBS[@]}" "${LDL[@]}" 2>&1)
check '[ $? -eq 0 ]' "the emulated bench_gpu links"$'\n'"$out"
echo "built in $((SECONDS - t0)) s"

# --- runs ------------------------------------------------------------------------
t0=$SECONDS
# test_gpu_ops (single-threaded, ~150 s) beside the rest
[ -x "$W/test_gpu_ops" ] && { "$W/test_gpu_ops" >"$W/test_gpu_ops.log" 2>&1; echo $? >"$W/test_gpu_ops.rc"; } &
tgo=$!
EMU=$W/sgtrain
# every graph any run below asks the emulated cuDNN for (tests/cudnn/sdpa_line.h)
export EMU_CUDNN_LOG=$W/cudnn-graphs.log
rm -f "$EMU_CUDNN_LOG"
MPI="mpirun --oversubscribe -x OMP_NUM_THREADS -x EMU_STREAMS -x EMU_GPUS -x SG_TWIN_POISON"
"$B/sgsynth" --out "$W/d" --vocab 512 --val-tokens 8000 --train-tokens 40000 --shard-tokens 20000 >/dev/null
T="train --tier test --arm combo2 --micro_batch 1 --grad_accum 4 --iters 6 --warmup 2 --val_every 3
   --val_batches 1 --val_batches_final 1 --ckpt_every 0 --data $W/d"
losses() { grep '"loss"' "$1/metrics.jsonl" | sed -E 's/.*"loss":([^,]*),.*/\1/'; }
vals() { grep '"val_loss"' "$1/metrics.jsonl" | sed -E 's/.*"val_loss":([^,]*),.*/\1/'; }
crc() { sed -nE 's/.*"params_crc32": "([0-9a-f]*)".*/\1/p' "$1/result.json" 2>/dev/null; }
worst() { paste <(losses "$1"; vals "$1") <(losses "$2"; vals "$2") |
    awk 'BEGIN { w = 0 } { e = ($2 - $1) / $1; if (e < 0) e = -e; if (e > w) w = e; n++ } END { printf "%d %.2e", n, w }'; }
# bad_env VAR VALUE...: each value stops the emulated sgtrain as it loads,
# exit 2 with a message naming VAR, before the run directory exists
bad_env() {
    local var=$1 v rc
    shift
    for v in "$@"; do
        env "$var=$v" "$EMU" $T --out "$W/bad-$var-$v" >"$W/bad-$var-$v.log" 2>&1
        rc=$?
        check '[ $rc -eq 2 ] && grep -q "$var must be" "$W/bad-$var-$v.log" && [ ! -e "$W/bad-$var-$v" ]' \
            "$var=$v: exit 2 and no run directory (exit $rc): $(head -n 2 "$W/bad-$var-$v.log")"
    done
}
within() { # run, reference, bound, what
    local w bound=$3
    w=$(worst "$2" "$1")
    check '[ "${w% *}" -ge 8 ] && awk -v e="${w#* }" -v b="$bound" "BEGIN { exit !(e <= b) }"' "$4 (losses compared, worst relative difference): $w"
    echo "$4: $w"
}

# --- the gradient runs (`sgtrain grads`), each independent of the others:
# all of them first, two processes at a time (one beside test_gpu_ops while
# it runs), then their checks, section by section below
job_pids=()
job() { # name, command...: stderr to $W/NAME.log, the exit status to $W/NAME.rc
    local name=$1
    shift
    while [ "$(jobs -rp | wc -l)" -ge 2 ]; do wait -n; done
    { "$@" >/dev/null 2>"$W/$name.log"; echo $? >"$W/$name.rc"; } &
    job_pids+=($!)
}
D16="--tier test" D64="--tier test --n_embd 128 --n_head 2 --block_size 64"
ARMS="baseline offbyone sinklogit sinktoken normgate renorm projgate combo combo2"
for cfg in "d16:$D16" "d64:$D64"; do
    name=${cfg%%:*} flags=${cfg#*:}
    for arm in $ARMS; do
        # shellcheck disable=SC2206
        G=(grads $flags --arm $arm --seed 3 --data "$W/d")
        job cpu-$name-$arm "$B/sgtrain" "${G[@]}" -o "$W/cpu-$name-$arm.st"
        for tiles in wmma mma cudnn; do
            job emu-$name-$arm-$tiles env SG_ATTN=$tiles "$EMU" "${G[@]}" -o "$W/emu-$name-$arm-$tiles.st"
        done
        job emu-$name-$arm-wgmma env SG_ATTN=mma SG_ATTN_WGMMA=1 SG_MATMUL_STATS=1 "$EMU" "${G[@]}" \
            -o "$W/emu-$name-$arm-wgmma.st"
        [ $name = d64 ] && job emu-$name-$arm-wgmma2 env SG_ATTN=mma SG_ATTN_WGMMA=2 SG_MATMUL_STATS=1 "$EMU" "${G[@]}" \
            -o "$W/emu-$name-$arm-wgmma2.st"
        job nokeep-$name-$arm env SG_MATMUL_KEEP=0 "$EMU" "${G[@]}" -o "$W/nokeep-$name-$arm.st"
        job dqs-$name-$arm env SG_ATTN=mma SG_ATTN_DQ=stored SG_MATMUL_STATS=1 "$EMU" "${G[@]}" -o "$W/dqs-$name-$arm.st"
        [ $name = d64 ] && job bp-$name-$arm env SG_ATTN=mma SG_ATTN_BWD_PIPE=1 SG_MATMUL_STATS=1 "$EMU" "${G[@]}" \
            -o "$W/bp-$name-$arm.st"
    done
    for arm in baseline renorm normgate projgate combo2; do
        for tiles in mma cudnn; do
            # shellcheck disable=SC2086
            job nokeep-$name-$arm-$tiles env SG_ATTN=$tiles SG_MATMUL_KEEP=0 "$EMU" grads $flags --arm $arm --seed 3 \
                --data "$W/d" -o "$W/nokeep-$name-$arm-$tiles.st"
        done
    done
    for arm in baseline combo2; do
        for tiles in wmma mma; do
            # shellcheck disable=SC2086
            job tune-$name-$arm-$tiles env SG_ATTN=$tiles SG_MATMUL_TUNE=1 SG_MATMUL_STATS=1 "$EMU" grads $flags \
                --arm $arm --seed 3 --data "$W/d" -o "$W/tune-$name-$arm-$tiles.st"
        done
    done
done
# shellcheck disable=SC2206
G64=(grads $D64 --seed 3 --data "$W/d")
for arm in baseline offbyone sinklogit combo2 renorm; do
    job cudnn-$arm env SG_ATTN=cudnn SG_MATMUL_STATS=1 "$EMU" "${G64[@]}" --arm $arm -o "$W/cudnn-$arm.st"
done
for arm in baseline combo2; do
    job refuse-$arm env EMU_CUDNN=refuse SG_ATTN=cudnn "$EMU" "${G64[@]}" --arm $arm -o "$W/refuse-$arm.st"
    job bf16off-$arm env SG_BF16_OPERANDS=0 SG_MATMUL_STATS=1 "$EMU" "${G64[@]}" --arm $arm -o "$W/bf16off-$arm.st"
done
job fail env EMU_CUDNN=fail SG_ATTN=cudnn "$EMU" grads --tier test --arm baseline --seed 3 --data "$W/d" -o "$W/fail.st"
# GPT-2's form (sgtrain import): linear biases and the tanh GELU, whose
# layers promise no bf16 storage for what the bias ops touch (src/model.c)
GPT2="--ln_bias true --linear_bias true --gelu_tanh true"
for arm in baseline combo2; do
    # shellcheck disable=SC2086
    job cpu-gpt2-$arm "$B/sgtrain" "${G64[@]}" $GPT2 --arm $arm -o "$W/cpu-gpt2-$arm.st"
    for tiles in wmma mma; do
        # shellcheck disable=SC2086
        job emu-gpt2-$arm-$tiles env SG_ATTN=$tiles "$EMU" "${G64[@]}" $GPT2 --arm $arm -o "$W/emu-gpt2-$arm-$tiles.st"
    done
done
# GPT-NeoX's form (Pythia, sgtrain import): rotary positions on a quarter of
# each head (op_rope, in place on qkv and dqkv, which are then not
# promised), the parallel block, an untied head (lm_head.weight)
NEOX="--ln_bias true --linear_bias true --rotary_dims 16 --parallel_residual true --tie_embeddings false"
for arm in baseline sinktoken combo2; do
    # shellcheck disable=SC2086
    job cpu-neox-$arm "$B/sgtrain" "${G64[@]}" $NEOX --arm $arm -o "$W/cpu-neox-$arm.st"
    for tiles in wmma mma; do
        [ $arm = sinktoken ] && [ $tiles = wmma ] && continue
        # shellcheck disable=SC2086
        job emu-neox-$arm-$tiles env SG_ATTN=$tiles "$EMU" "${G64[@]}" $NEOX --arm $arm -o "$W/emu-neox-$arm-$tiles.st"
    done
done
for arm in baseline combo2 renorm; do
    for tiles in wmma mma; do
        job stats-$arm-$tiles env SG_ATTN=$tiles SG_MATMUL_STATS=1 "$EMU" grads --tier test --arm $arm --seed 3 \
            --data "$W/d" -o "$W/stats-$arm-$tiles.st"
    done
done
wait "${job_pids[@]}"
echo "grads: ${#job_pids[@]} runs in $((SECONDS - t0)) s"
# the tiers' graphs for cuDNN (checked at the end), beside the runs below
bash tests/cudnn/record-graphs.sh "$EMU" "$B/sgtrain" "$W/d" "$W/graphs.txt" >"$W/graphs.log" 2>&1 &
graphs_pid=$!

# every arm's forward and backward against the CPU's (wgmma: the mma tiles
# with the forward and dK/dV kernel on the warpgroup products, which the
# emulated device, an sm_90, runs at d 64: 2 forwards and 2 dK/dV kernels,
# and at d 16 none; wgmma2: the same with the pipelined forward, d 64)
for cfg in d16 d64; do
    for arm in $ARMS; do
        for wg in wgmma $([ $cfg = d64 ] && echo wgmma2); do
            m=$([ $wg = wgmma2 ] && echo 2 || echo 1)
            n=$(sed -nE "s/^sg attention: ([0-9]+) kernels ran on the warpgroup products \(SG_ATTN_WGMMA=$m\)$/\1/p" \
                "$W/emu-$cfg-$arm-$wg.log")
            check '[ "${n:-0}" = "$([ $cfg = d64 ] && echo 4 || echo 0)" ]' \
                "$cfg $arm SG_ATTN_WGMMA=$m: ${n:-no} kernels on the warpgroup products"$'\n'"$(cat "$W/emu-$cfg-$arm-$wg.log")"
        done
        for tiles in wmma mma cudnn wgmma $([ $cfg = d64 ] && echo wgmma2); do
            out=$(python3 tests/gpu/compare_grads.py "$W/cpu-$cfg-$arm.st" "$W/emu-$cfg-$arm-$tiles.st" \
                "$cfg $arm $tiles" 2>&1)
            check 'grep -q "all within tolerance" <<<"$out" && grep -q "loss .* ok" <<<"$out"' \
                "$cfg $arm SG_ATTN=$tiles: loss and gradients against the CPU"$'\n'"$out"$'\n'"$(cat "$W/emu-$cfg-$arm-$tiles.log")"
        done
    done
done
for arm in baseline combo2; do
    for tiles in wmma mma; do
        out=$(python3 tests/gpu/compare_grads.py "$W/cpu-gpt2-$arm.st" "$W/emu-gpt2-$arm-$tiles.st" \
            "gpt2 $arm $tiles" 2>&1)
        # the linear biases' gradients among the tensors compared (2 layers x 4)
        n=$(head -c 8192 "$W/emu-gpt2-$arm-$tiles.st" | grep -ao '"h\.[0-9]*\.[a-z]*\.c_[a-z]*\.bias"' | sort -u | wc -l)
        check 'grep -q "all within tolerance" <<<"$out" && grep -q "loss .* ok" <<<"$out" && [ "$n" -ge 8 ]' \
            "d64 $arm in GPT-2's form (linear biases, tanh GELU; $n bias gradients compared, 8 expected) SG_ATTN=$tiles: loss and gradients against the CPU"$'\n'"$out"$'\n'"$(cat "$W/emu-gpt2-$arm-$tiles.log")"
    done
done
for arm in baseline sinktoken combo2; do
    for tiles in wmma mma; do
        [ $arm = sinktoken ] && [ $tiles = wmma ] && continue
        out=$(python3 tests/gpu/compare_grads.py "$W/cpu-neox-$arm.st" "$W/emu-neox-$arm-$tiles.st" \
            "neox $arm $tiles" 2>&1)
        n=$(head -c 8192 "$W/emu-neox-$arm-$tiles.st" | grep -aoE '"(lm_head.weight|wpe)"' | sort -u | xargs)
        check 'grep -q "all within tolerance" <<<"$out" && grep -q "loss .* ok" <<<"$out" && [ "$n" = lm_head.weight ]' \
            "d64 $arm in GPT-NeoX's form (rotary on 16 of 64 dims, parallel block, untied head: $n) SG_ATTN=$tiles: loss and gradients against the CPU"$'\n'"$out"$'\n'"$(cat "$W/emu-neox-$arm-$tiles.log")"
    done
done
echo "grads: $(ls "$W"/emu-*.st | wc -l) emulated runs against the CPU build"
# SG_ATTN=cudnn (kernels/cuda/attention_cudnn.cu) over the emulator's CPU
# twin of cuDNN (tests/emu/emu_cudnn.cpp): the arms it takes ran on it, one
# forward and one backward a layer (2); the routing-slot control's log-bias
# is not cuDNN's, so renorm runs the mma tiles on the same operands, bits
# and all, and says so once for each direction
cudnn_calls() { sed -nE "s/^sg attention: ([0-9]+) forwards and ([0-9]+) backwards ran on cuDNN\$/\\1 \\2/p" "$1"; }
for arm in baseline offbyone sinklogit combo2 renorm; do
    calls=$(cudnn_calls "$W/cudnn-$arm.log")
    if [ $arm = renorm ]; then
        said=$(grep -c "SG_ATTN=cudnn: cuDNN does not take the .* (the routing-slot control's per-key log-bias" "$W/cudnn-$arm.log")
        check '[ "$calls" = "0 0" ] && [ "$said" = 2 ] && cmp -s "$W/cudnn-$arm.st" "$W/emu-d64-$arm-mma.st"' \
            "d64 renorm SG_ATTN=cudnn: no call on cuDNN ($calls), the reason said once a direction ($said), gradients bitwise the mma tiles'"$'\n'"$(cat "$W/cudnn-$arm.log")"
    else
        check '[ "$calls" = "2 2" ] && ! grep -q "does not take" "$W/cudnn-$arm.log" && cmp -s "$W/cudnn-$arm.st" "$W/emu-d64-$arm-cudnn.st"' \
            "d64 $arm SG_ATTN=cudnn: 2 forwards and 2 backwards on cuDNN ($calls), no refusal, the bits of the run above"$'\n'"$(cat "$W/cudnn-$arm.log")"
        check '! cmp -s "$W/cudnn-$arm.st" "$W/emu-d64-$arm-mma.st"' "d64 $arm SG_ATTN=cudnn: other bits than the mma tiles' (cuDNN's twin ran, not the tiles)"
    fi
done
# a cuDNN that refuses every graph (no cuDNN on the machine, an engine it
# lacks): the mma tiles run on the same operands, the same bits as
# SG_ATTN=mma, and the reason is said once a direction
for arm in baseline combo2; do
    rc=$(cat "$W/refuse-$arm.rc")
    said=$(grep -c "SG_ATTN=cudnn: cuDNN does not take the .* (the emulated cuDNN refuses every graph" "$W/refuse-$arm.log")
    check '[ $rc -eq 0 ] && [ "$said" = 2 ] && cmp -s "$W/refuse-$arm.st" "$W/emu-d64-$arm-mma.st"' \
        "d64 $arm, cuDNN refusing: exit $rc, said $said times (want 2), gradients bitwise SG_ATTN=mma's"$'\n'"$(cat "$W/refuse-$arm.log")"
done
# a graph that fails as it is issued leaves its outputs unknown: exit 1,
# saying what cuDNN said, and no gradients written
rc=$(cat "$W/fail.rc")
check '[ $rc -eq 1 ] && grep -q "cuDNN attention forward.*EMU_CUDNN=fail" "$W/fail.log" && [ ! -e "$W/fail.st" ]' \
    "a cuDNN graph failing as it is issued: exit 1 with cuDNN's reason, nothing written (exit $rc): $(tail -n 2 "$W/fail.log")"
# the comparison itself: one NaN in one gradient (or the loss) must fail it
nan_copy() { # in.st out.st what: the loss, or element 3 of the first tensor, made NaN
    python3 - "$@" <<'PY'
import json, struct, sys
b = bytearray(open(sys.argv[1], "rb").read())
n = struct.unpack("<Q", b[:8])[0]
head = json.loads(b[8:8 + n])
if sys.argv[3] == "loss":
    head["__metadata__"]["loss"] = "nan"
    h = json.dumps(head).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    b = struct.pack("<Q", len(h)) + h + b[8 + n:]
else:
    name = next(k for k in head if k != "__metadata__")
    at = 8 + n + head[name]["data_offsets"][0] + 4 * 3
    b[at:at + 4] = struct.pack("<f", float("nan"))
open(sys.argv[2], "wb").write(b)
PY
}
for what in loss grad; do
    nan_copy "$W/emu-d64-combo2-mma.st" "$W/nan-$what.st" $what
    out=$(python3 tests/gpu/compare_grads.py "$W/cpu-d64-combo2.st" "$W/nan-$what.st" "nan $what" 2>&1); rc=$?
    check '[ $rc -eq 1 ] && grep -q FAIL <<<"$out"' "compare_grads.py fails a NaN in the $what (exit $rc): $out"
done
# the kept copies and twins off: the same bits (the twins are the casts' values)
for name in d16 d64; do
    for arm in $ARMS; do
        check 'cmp -s "$W/nokeep-$name-$arm.st" "$W/emu-$name-$arm-wmma.st"' \
            "$name $arm: gradients with SG_MATMUL_KEEP=0 bitwise those with the twins"$'\n'"$(cat "$W/nokeep-$name-$arm.log")"
    done
    # the mma tiles also write dqkv's twin: an ungated arm (taken), the
    # routing-slot control (its gate backward makes it stale), and the value
    # gates (dv apart: the gate's backward writes the twin's last third)
    # cuDNN likewise writes its bf16 outputs into the twins, or into scratch
    # to be widened without them: the same values either way
    for arm in baseline renorm normgate projgate combo2; do
        for tiles in mma cudnn; do
            check 'cmp -s "$W/nokeep-$name-$arm-$tiles.st" "$W/emu-$name-$arm-$tiles.st"' \
                "$name $arm SG_ATTN=$tiles: gradients with SG_MATMUL_KEEP=0 bitwise those with the twins"$'\n'"$(cat "$W/nokeep-$name-$arm-$tiles.log")"
        done
    done
done
echo "grads: $(ls "$W"/nokeep-*.st | wc -l) runs with SG_MATMUL_KEEP=0, bitwise those with the twins"
# SG_ATTN_DQ=stored: dQ from the dS the dK/dV kernel stored, the same bits
# as recomputing it (kernels/cuda/attention_bwd_mma.cu), for every arm
for name in d16 d64; do
    for arm in $ARMS; do
        check 'cmp -s "$W/dqs-$name-$arm.st" "$W/emu-$name-$arm-mma.st" && grep -q "^sg attention: 2 backwards formed dQ from the stored dS$" "$W/dqs-$name-$arm.log"' \
            "$name $arm SG_ATTN_DQ=stored: 2 backwards took dQ from the stored dS, gradients bitwise those recomputing it"$'\n'"$(cat "$W/dqs-$name-$arm.log")"
    done
done
# SG_ATTN_BWD_PIPE=1: the backward's strips pipelined, the same bits
# (kernels/cuda/attention_bwd_mma.cu), for every arm at d 64 (at d 16 the
# plain strips run): each backward's dK/dV and dQ kernels so (renorm's
# log-bias included; the value gates' epilogue for normgate, projgate,
# combo and combo2)
for arm in $ARMS; do
    check 'cmp -s "$W/bp-d64-$arm.st" "$W/emu-d64-$arm-mma.st" && grep -q "^sg attention: 4 backward kernels ran with their strips pipelined (SG_ATTN_BWD_PIPE=1)$" "$W/bp-d64-$arm.log"' \
        "d64 $arm SG_ATTN_BWD_PIPE=1: 4 kernels pipelined, gradients bitwise the plain strips'"$'\n'"$(cat "$W/bp-d64-$arm.log")"
done
# SG_MATMUL_TUNE=1: the emulated heuristic offers 4 algorithms a shape, the
# first choice, one with its bits (1), and two that look faster but round
# otherwise: split-K (2) and C added apart (3), which differs only where C
# is not 0 (an accumulating dW, checked also with a C that is not 0).  So
# each shape rejects 1 candidate, an accumulating one 2, and the chosen
# (3 or 1) looks faster than the first choice.
tuned_ok() { # stats log: every shape tuned as above
    awk '/^sg matmul tune: m /{ n++; acc = $15 + 0; if ($16 != 4 || $18 != 1 + acc || $26 + 0 >= $23 + 0) bad++ }
         /^sg matmul tune: [0-9]+ of [0-9]+ shapes tuned$/{ t = $4; p = $6 }
         END { exit !(n > 0 && !bad && t == n && p == n) }' "$1"
}
for name in d16 d64; do
    for arm in baseline combo2; do
        for tiles in wmma mma; do
            check 'cmp -s "$W/tune-$name-$arm-$tiles.st" "$W/emu-$name-$arm-$tiles.st"' \
                "$name $arm SG_ATTN=$tiles: gradients with SG_MATMUL_TUNE=1 bitwise those without"$'\n'"$(tail -n 3 "$W/tune-$name-$arm-$tiles.log")"
            check 'tuned_ok "$W/tune-$name-$arm-$tiles.log"' \
                "$name $arm SG_ATTN=$tiles, SG_MATMUL_TUNE=1: every shape tuned, 4 candidates, the other bits rejected (1, accumulating 2), the chosen faster"$'\n'"$(grep "^sg matmul tune" "$W/tune-$name-$arm-$tiles.log")"
        done
    done
done
echo "SG_MATMUL_TUNE=1: $(ls "$W"/tune-*.st | wc -l) grads runs bitwise those without; d64 combo2 mma: $(grep -c "^sg matmul tune: m " "$W/tune-d64-combo2-mma.log") shapes tuned, $(awk '/^sg matmul tune: m /{ r += $18 } END { print r + 0 }' "$W/tune-d64-combo2-mma.log") candidates rejected for other bits"
bad_env SG_MATMUL_TUNE 2 yes
bad_env SG_MATMUL_KEEP off no
bad_env SG_TWIN_POISON yes
bad_env SG_MATMUL_STATS on
# the value-slot arms also promise dqkv, which only the mma tiles write a
# twin of (with a value gate, together with the gate's backward): one more
# unstored output per layer (2) with them than with wmma; none for renorm
unstored() { sed -nE 's/^sg matmul: [0-9]+ operand casts skipped, ([0-9]+) fp32 outputs not stored, [0-9]+ outputs stored in bf16$/\1/p' "$1"; }
bf16_stored() { sed -nE 's/^sg matmul: [0-9]+ operand casts skipped, [0-9]+ fp32 outputs not stored, ([0-9]+) outputs stored in bf16$/\1/p' "$1"; }
for arm in baseline combo2 renorm; do
    uw=$(unstored "$W/stats-$arm-wmma.log") um=$(unstored "$W/stats-$arm-mma.log")
    more=$([ $arm = renorm ] && echo 0 || echo 2)
    check '[ -n "$uw" ] && [ -n "$um" ] && [ "$uw" -gt 0 ] && [ "$um" -eq $((uw + more)) ]' \
        "$arm grads: fp32 outputs not stored, wmma $uw, mma $um (want wmma + $more: dqkv in each layer)"
    echo "$arm grads: fp32 outputs not stored: wmma ${uw:-?}, mma ${um:-?}"
    # Under mma qkv, datty and the value gate's vg are stored in bf16, and
    # the kernels read q, k, v and dO in place (kernels/cuda/attention_pack.cu):
    # in each layer's (2) forward 3 operands and backward 4. Nothing is
    # packed, so no pack is kept. The wmma tiles keep none either.
    pk=$(sed -nE "s/^sg attention: ([0-9]+) backwards took their forward's packed Q, K, V$/\1/p" \
        "$W/stats-$arm-mma.log")
    ip=$(sed -nE "s/^sg attention: ([0-9]+) operands read in place$/\1/p" "$W/stats-$arm-mma.log")
    want_pk=0 want_ip=14
    check '[ "$pk" = $want_pk ] && [ "$ip" = $want_ip ] && ! grep -q "^sg attention:" "$W/stats-$arm-wmma.log"' \
        "$arm grads SG_ATTN=mma: $ip operands read in place (want $want_ip), $pk backwards took their forward's packs (want $want_pk; none with wmma)"
    # fc's output, fc_proj's dinp and the dinp of fc and qkv (dln),
    # promised as bf16 operands (op_bf16_operand), are stored in bf16: 4 a
    # layer; under the mma tiles qkv and datty too (op_attention_operand), 6,
    # and combo2's vg (the value gate's output), 7
    bw=$(bf16_stored "$W/stats-$arm-wmma.log") bm=$(bf16_stored "$W/stats-$arm-mma.log")
    want_bm=$([ $arm = combo2 ] && echo 14 || echo 12)
    check '[ "$bw" = 8 ] && [ "$bm" = $want_bm ]' "$arm grads: outputs stored in bf16, wmma ${bw:-?} (want 8: 4 a layer), mma ${bm:-?} (want $want_bm: qkv and datty too, and vg)"
done
# SG_BF16_OPERANDS=0 stores them in fp32: still within the CPU's tolerances,
# and not the bits of the bf16 run (the rounding took place there)
for arm in baseline combo2; do
    out=$(python3 tests/gpu/compare_grads.py "$W/cpu-d64-$arm.st" "$W/bf16off-$arm.st" "d64 $arm SG_BF16_OPERANDS=0" 2>&1)
    check 'grep -q "all within tolerance" <<<"$out" && grep -q "loss .* ok" <<<"$out" &&
           [ "$(bf16_stored "$W/bf16off-$arm.log")" = 0 ] && ! cmp -s "$W/bf16off-$arm.st" "$W/emu-d64-$arm-wmma.st"' \
        "d64 $arm SG_BF16_OPERANDS=0: against the CPU, nothing stored in bf16, other bits than bf16's"$'\n'"$out"$'\n'"$(tail -n 2 "$W/bf16off-$arm.log")"
done
bad_env SG_BF16_OPERANDS 2 no
bad_env SG_COMPACT_ACTS 2 half

"$B/sgtrain" $T --out "$W/cpu" 2>/dev/null
SG_MATMUL_STATS=1 timeout 300 "$EMU" $T --out "$W/g1" 2>"$W/g1.log"; rc=$?
check '[ $rc -eq 0 ] && grep -q "cuda (emulated" "$W/g1/result.json"' "one emulated GPU trains (exit $rc): $(tail -n 2 "$W/g1.log")"
# 6 steps of 4 micro-batches, 2 layers: ln1, ln2 and GELU's output per layer
# in each forward (and in each validation forward), dfch per layer in each backward
n_unstored=$(unstored "$W/g1.log")
check '[ "${n_unstored:-0}" -ge 192 ]' "training stores only the twins of the promised tensors: ${n_unstored:-no} fp32 outputs not stored (want >= 6 x 4 x 2 x 4 = 192)"
echo "training: ${n_unstored:-no} fp32 outputs left unstored for their twins"
# the weights' bf16 copies (kernels/cuda/weight_copies.cu): each of the 9
# weights (4 a layer and wte) cast once, at its first read; AdamW keeps them
# current after that, so every later read of the 24 training micro-batches
# (8 forward, 1 classifier and 8 dinp reads each) and of the validation
# forwards takes a kept copy
wread() { sed -nE "s/^sg weights: ([0-9]+) weight reads from AdamW-kept bf16 copies, ([0-9]+) casts into them\$/\\$2/p" "$1"; }
w_served=$(wread "$W/g1.log" 1) w_cast=$(wread "$W/g1.log" 2)
check '[ "${w_cast:-x}" = 9 ] && [ "${w_served:-0}" -ge $((24 * 17 - 9)) ]' \
    "training reads the weights from AdamW's bf16 copies: ${w_served:-no} reads served, ${w_cast:-no} casts (want 9 casts, >= $((24 * 17 - 9)) reads)"
echo "training: ${w_served:-no} weight reads from AdamW's bf16 copies, ${w_cast:-no} casts into them"
n_bf16=$(bf16_stored "$W/g1.log")
check '[ "${n_bf16:-0}" -ge 192 ]' "training stores the bf16 operands in bf16: ${n_bf16:-no} outputs (want >= 6 x 4 x 2 x 4 = 192)"
within "$W/g1" "$W/cpu" 0.02 "one emulated GPU against the CPU build"
# under the mma tiles qkv is stored in bf16 too (op_attention_operand): one
# more bf16 output per layer and forward, training within the same bound
SG_ATTN=mma SG_MATMUL_STATS=1 timeout 300 "$EMU" $T --out "$W/g1-mma" 2>"$W/g1-mma.log"; rc=$?
n_mma=$(bf16_stored "$W/g1-mma.log")
check '[ $rc -eq 0 ] && [ "${n_mma:-0}" -ge $((n_bf16 + 48)) ]' \
    "SG_ATTN=mma training also stores qkv in bf16 (exit $rc): ${n_mma:-no} outputs, wmma $n_bf16 (want >= 48 more: 6 x 4 x 2)"
within "$W/g1-mma" "$W/cpu" 0.02 "one emulated GPU with SG_ATTN=mma (qkv in bf16) against the CPU build"
# and over cuDNN's fused attention (its CPU twin here): 6 steps of 4
# micro-batches and the validations, every layer's attention on cuDNN
SG_ATTN=cudnn SG_MATMUL_STATS=1 timeout 300 "$EMU" $T --out "$W/g1-cudnn" 2>"$W/g1-cudnn.log"; rc=$?
calls=$(cudnn_calls "$W/g1-cudnn.log")
check '[ $rc -eq 0 ] && [ "${calls% *}" -ge 48 ] && [ "${calls#* }" = 48 ]' \
    "SG_ATTN=cudnn training (exit $rc): forwards and backwards on cuDNN $calls (want >= 48 and 48: 6 x 4 x 2)"
within "$W/g1-cudnn" "$W/cpu" 0.02 "one emulated GPU with SG_ATTN=cudnn against the CPU build"
# The tensors stored in bf16, and the twin-only tensors whose twins then
# live in their own bytes, are laid out in half their reals
# (op_promised_len), which changes no bit.  By hand, for the test tier's
# combo2 at micro-batch 1 (N = 16 rows, C = 32, NC = 512, 2 layers,
# 64-real alignment): all in fp32, 27,648 reals (110,592 bytes, the
# CPU's).  Under wmma half of: the bf16 operands fch (4NC a layer),
# dfch_gelu (4NC) and dln (NC), and the twin-only ln1, ln2 (NC each a
# layer), fch_gelu (4NC a layer) and dfch (4NC): 2 x 1024 + 1024 + 256 +
# 2 x 1536 + 1024 = 7,424 reals (29,696 bytes) less.  Under mma also half
# of the attention operands qkv (3NC a layer), vg (NC a layer) and datty
# (NC): 2 x 1024 + 256 = 2,304 more (9,216 bytes).
actb() { sed -nE 's/.*"activation_bytes": ([0-9]+).*/\1/p' "$1/result.json" 2>/dev/null; }
devb() { sed -nE 's/.*"device_peak_bytes": ([0-9]+).*/\1/p' "$1/result.json" 2>/dev/null; }
check '[ "$(actb "$W/cpu")" = 110592 ] && [ "$(devb "$W/cpu")" = 0 ]' \
    "the CPU's activations: $(actb "$W/cpu") bytes (want 110592 by hand), device peak $(devb "$W/cpu") (want 0)"
check '[ "$(actb "$W/g1")" = 80896 ] && [ "$(actb "$W/g1-mma")" = 71680 ]' \
    "activations laid out compact: wmma $(actb "$W/g1") bytes (want 110592 - 29696 = 80896), mma $(actb "$W/g1-mma") (want 80896 - 9216 = 71680)"
SG_ATTN=mma SG_COMPACT_ACTS=0 timeout 300 "$EMU" $T --out "$W/g1-mma-full" 2>"$W/g1-mma-full.log"; rc=$?
check '[ $rc -eq 0 ] && [ "$(actb "$W/g1-mma-full")" = 110592 ] && [ -n "$(crc "$W/g1-mma")" ] &&
       [ "$(crc "$W/g1-mma-full")" = "$(crc "$W/g1-mma")" ] &&
       [ "$(losses "$W/g1-mma-full"; vals "$W/g1-mma-full")" = "$(losses "$W/g1-mma"; vals "$W/g1-mma")" ]' \
    "SG_COMPACT_ACTS=0 (exit $rc): $(actb "$W/g1-mma-full") bytes of activations (want 110592), bitwise the compact run's losses and parameters (params_crc32 $(crc "$W/g1-mma-full") vs $(crc "$W/g1-mma"))"
# the device's peak counts every buffer: at least the activations and the
# parameters, gradients and AdamW moments (4 x 4 bytes a parameter)
np=$(sed -nE 's/.*"params": \{"total": ([0-9]+).*/\1/p' "$W/g1-mma/result.json")
check '[ -n "$np" ] && [ "$(devb "$W/g1-mma")" -ge $(( $(actb "$W/g1-mma") + 16 * np )) ] &&
       [ "$(devb "$W/g1-mma-full")" -ge $(( $(devb "$W/g1-mma") + 38912 )) ] && grep -q "device memory peak" "$W/g1-mma.log"' \
    "the device's peak: $(devb "$W/g1-mma") bytes compact, $(devb "$W/g1-mma-full") laid out in fp32 (want >= activations + 16 x $np, and >= 38912 more in fp32, whose twins take buffers of their own)"
echo "activations: cpu $(actb "$W/cpu"), wmma $(actb "$W/g1"), mma $(actb "$W/g1-mma") bytes; device peak mma $(devb "$W/g1-mma"), fp32 layout $(devb "$W/g1-mma-full")"
SG_MATMUL_KEEP=0 SG_MATMUL_STATS=1 timeout 300 "$EMU" $T --out "$W/g1-nokeep" 2>"$W/g1-nokeep.log"; rc=$?
check '[ "$(wread "$W/g1-nokeep.log" 1) $(wread "$W/g1-nokeep.log" 2)" = "0 0" ]' \
    "SG_MATMUL_KEEP=0: no weight copies kept: $(grep '^sg weights' "$W/g1-nokeep.log")"
check '[ $rc -eq 0 ] && [ -n "$(crc "$W/g1")" ] && [ "$(crc "$W/g1-nokeep")" = "$(crc "$W/g1")" ] &&
       [ "$(losses "$W/g1-nokeep"; vals "$W/g1-nokeep")" = "$(losses "$W/g1"; vals "$W/g1")" ]' \
    "training with SG_MATMUL_KEEP=0: bitwise the losses and parameters with the twins (exit $rc; params_crc32 $(crc "$W/g1-nokeep") vs $(crc "$W/g1"))"
echo "training, twins off and on: params_crc32 $(crc "$W/g1-nokeep") $(crc "$W/g1"), $(losses "$W/g1" | wc -l) losses"
# the sink token's arm: its final LayerNorm's input gradient reaches the
# residual gradient by a copy, so the twin of that buffer that the previous
# micro-batch's last LayerNorm backward left is stale when the first
# projection backward reads it (a guard that never invalidated gave other
# parameters here)
ST="train --tier test --arm sinktoken --micro_batch 1 --grad_accum 2 --iters 2 --warmup 1 --val_every 0 --ckpt_every 0
    --data $W/d"
timeout 300 "$EMU" $ST --out "$W/st-keep" >/dev/null 2>&1
SG_MATMUL_KEEP=0 timeout 300 "$EMU" $ST --out "$W/st-nokeep" >/dev/null 2>&1
check '[ -n "$(crc "$W/st-keep")" ] && [ "$(crc "$W/st-keep")" = "$(crc "$W/st-nokeep")" ] &&
       [ "$(losses "$W/st-keep")" = "$(losses "$W/st-nokeep")" ]' \
    "sinktoken training with SG_MATMUL_KEEP=0: bitwise the parameters with the twins ($(crc "$W/st-nokeep") vs $(crc "$W/st-keep"))"
# tuned: its second micro-batch's dW accumulate into the first's (C not 0)
SG_MATMUL_TUNE=1 timeout 300 "$EMU" $ST --out "$W/st-tune" >/dev/null 2>&1
check '[ -n "$(crc "$W/st-tune")" ] && [ "$(crc "$W/st-tune")" = "$(crc "$W/st-keep")" ] &&
       [ "$(losses "$W/st-tune")" = "$(losses "$W/st-keep")" ]' \
    "sinktoken training with SG_MATMUL_TUNE=1: bitwise the parameters without ($(crc "$W/st-tune") vs $(crc "$W/st-keep"))"
# the analyses (injection battery, probes, exposure) of the CPU's checkpoint on both builds
AN="--batches 1 --batch-size 2 --quiet"
"$B/sgtrain" analyze "$W/cpu" --out "$W/an-cpu" $AN >/dev/null 2>&1
timeout 300 "$EMU" analyze "$W/cpu" --out "$W/an-emu" $AN >"$W/an.log" 2>&1; rc=$?
out=$(python3 tests/gpu/compare_analysis.py "$W/an-cpu" "$W/an-emu" 2>&1)
check '[ $rc -eq 0 ] && grep -q "analysis within tolerance" <<<"$out"' \
    "sgtrain analyze on the emulated GPU against the CPU (exit $rc): $out"$'\n'"$(tail -n 3 "$W/an.log")"
echo "analyze: $out"
# under the mma tiles the analyses' hooked forwards read and write qkv in
# fp32, so the model ends qkv's promise for them (src/model.c, promise_qkv)
# and makes it again for the plain forwards between them
SG_ATTN=mma timeout 300 "$EMU" analyze "$W/cpu" --out "$W/an-emu-mma" $AN >"$W/an-mma.log" 2>&1; rc=$?
out=$(python3 tests/gpu/compare_analysis.py "$W/an-cpu" "$W/an-emu-mma" 2>&1)
check '[ $rc -eq 0 ] && grep -q "analysis within tolerance" <<<"$out"' \
    "sgtrain analyze with SG_ATTN=mma on the emulated GPU against the CPU (exit $rc): $out"$'\n'"$(tail -n 3 "$W/an-mma.log")"
echo "analyze, SG_ATTN=mma: $out"
# a NaN in the GPU's analysis must fail the comparison
rm -rf "$W/an-nan" && cp -r "$W/an-emu" "$W/an-nan"
f=$(ls "$W/an-nan"/*.json | head -n 1)
python3 - "$f" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
k = next(k for k, v in d.items() if isinstance(v, float))
d[k] = float("nan")
json.dump(d, open(sys.argv[1], "w"))
PY
out=$(python3 tests/gpu/compare_analysis.py "$W/an-cpu" "$W/an-nan" 2>&1); rc=$?
check '[ $rc -eq 1 ]' "compare_analysis.py fails a NaN in $(basename "$f") (exit $rc): $out"

# zero-shot evaluation (docs/zeroshot.md) of a CPU-trained model with GPT-2's
# vocabulary on both builds: the classifier's per-token losses (HellaSwag,
# WikiText-2) and the whole logits (LAMBADA) come back from the device
# (tests/gpu/compare_zeroshot.py: the NLLs within 2%, the counts equal)
V=$ROOT/data/vocab/gpt2.tiktoken ZF=$ROOT/tests/zeroshot
"$B/sgsynth" --out "$W/d50k" --vocab 50257 --val-tokens 4000 --train-tokens 20000 >/dev/null
"$B/sgtrain" train --tier test --arm combo2 --seed 1 --vocab_size 50257 --iters 3 --data "$W/d50k" --out "$W/zs" >/dev/null 2>&1
zs_ok=1
for t in lambada:lambada.jsonl hellaswag:hellaswag.jsonl wikitext:wikitext.raw; do
    "$B/sgtrain" zeroshot "$W/zs" --task ${t%%:*} --file "$ZF/${t#*:}" --vocab "$V" --out "$W/zs-cpu" --quiet || zs_ok=0
    timeout 300 "$EMU" zeroshot "$W/zs" --task ${t%%:*} --file "$ZF/${t#*:}" --vocab "$V" --out "$W/zs-emu" --quiet \
        >>"$W/zs.log" 2>&1 || zs_ok=0
done
out=$(python3 tests/gpu/compare_zeroshot.py "$W/zs-cpu" "$W/zs-emu" 2>&1)
check '[ $zs_ok = 1 ] && grep -q "zeroshot within tolerance" <<<"$out"' \
    "sgtrain zeroshot on the emulated GPU against the CPU: $out"$'\n'"$(tail -n 3 "$W/zs.log" 2>/dev/null)"
echo "zeroshot: $out"
# and the comparison fails an NLL 5% off, a NaN, and a count that differs
rm -rf "$W/zs-bad" && cp -r "$W/zs-emu" "$W/zs-bad"
python3 - "$W/zs-bad" <<'PY'
import json, sys
for task, edit in (("lambada", lambda d: d["results"][2].update(nll=d["results"][2]["nll"] * 1.05)),
                   ("hellaswag", lambda d: d["results"][1]["nll"].__setitem__(3, float("nan"))),
                   ("wikitext", lambda d: d.update(windows=d["windows"] + 1))):
    p = f"{sys.argv[1]}/{task}.json"
    d = json.load(open(p))
    edit(d)
    json.dump(d, open(p, "w"))
PY
out=$(python3 tests/gpu/compare_zeroshot.py "$W/zs-cpu" "$W/zs-bad" 2>&1); rc=$?
check '[ $rc -eq 1 ] && [ "$(wc -l <<<"$out")" = 3 ] && grep -q "^lambada line 3 nll" <<<"$out" && grep -q "^hellaswag line 3 nll: cpu [0-9.]* gpu nan" <<<"$out" && grep -q "^wikitext windows" <<<"$out"' \
    "compare_zeroshot.py fails an NLL 5% off, a NaN and a window count (exit $rc): $out"

# generation (docs/generate.md) on the emulated GPU: the key-value cache's
# one-row products, the embedding at a shifted position and the decode
# attention over the cached rows, for an arm with a gate and a sink logit
# and for the sink token, whose cache starts with the sink's row; every
# drawn token and log-probability against the independent reference
# (tests/generate/ref_generate.py, which checks the CPU build at fp32's
# tolerance in tests/e2e_generate.sh) at bf16's: log-probabilities within
# 0.05 (with the products' operands rounded to bf16 in the reference too),
# draws nearer than 5% to an edge, or between logits 0.1 apart, taken
# either way
RPY=$ROOT/build/venv/bin/python
if [ -x "$B/tests/test_analysis" ] && "$RPY" -c 'import numpy, tiktoken' 2>/dev/null; then
    for arm in combo2 sinktoken; do
        g=$W/gen-$arm
        "$B/tests/test_analysis" --write-ckpt "$g" $arm "$W/d50k"
        "$B/sgtrain" export "$g" -o "$g/model.safetensors" 2>/dev/null
        gen_ok=1
        timeout 300 "$EMU" generate "$g" --prompt "The cat sat" --temperature 0 --vocab "$V" --json "$g/greedy.json" \
            --quiet >"$g/gen.log" 2>&1 || gen_ok=0
        timeout 300 "$EMU" generate "$g" --prompt "The cat sat" --temperature 0.8 --top-k 5 --samples 2 --seed 3 --telemetry \
            --vocab "$V" --json "$g/sampled.json" --quiet >>"$g/gen.log" 2>&1 || gen_ok=0
        out=$("$RPY" tests/generate/ref_generate.py --bf16 --atol 0.05 --tie 0.05 "$g/model.safetensors" "$V" "$g/greedy.json" \
            "$g/sampled.json" 2>&1)
        check '[ $gen_ok = 1 ] && grep -qE "ref_generate: [0-9]+ passed, 0 failed" <<<"$out"' \
            "$arm: sgtrain generate on the emulated GPU against the reference at bf16's tolerance"$'\n'"$out"$'\n'"$(tail -n 3 "$g/gen.log")"
        echo "generate, $arm: $(tr '\n' ' ' <<<"$out")"
    done
else
    bad "generation on the emulated GPU needs $B/tests/test_analysis and NumPy and tiktoken in build/venv"
fi

run() { # name, ranks, extra flags...: the job's exit status in $W/$1.rc
    local name=$1 np=$2
    shift 2
    timeout 300 $MPI -n "$np" "$EMU" $T "$@" --out "$W/$name" >"$W/$name.log" 2>&1
    echo $? >"$W/$name.rc"
}
ok_run() { [ "$(cat "$W/$1.rc")" = 0 ] && [ -n "$(crc "$W/$1")" ]; }
run n2 2 --bucket_mb 0
run o2 2 --bucket_mb 0.0005
check 'ok_run n2 && ok_run o2' "2 ranks on the NCCL path train ($(cat "$W/n2.rc") $(cat "$W/o2.rc")): $(tail -n 3 "$W/o2.log")"
check 'grep -q "\"ranks\": 2" "$W/n2/result.json"' "result.json records 2 ranks"
# Not bitwise: one rank adds its 4 micro-batches' gradients in turn (the
# matmuls accumulate, beta 1), two ranks add two each and then the sums,
# and the next step's bf16 operand rounding magnifies that fp32 rounding
# difference (measured: 1.1e-6; the CPU build's ranks agree to 1e-6)
within "$W/n2" "$W/g1" 1e-5 "2 ranks, NCCL sum after the backward, against 1 rank"
check '[ "$(crc "$W/o2")" = "$(crc "$W/n2")" ]' "2 ranks, NCCL sums in per-layer buckets on the side stream: bitwise the sum after the backward ($(crc "$W/o2") $(crc "$W/n2"))"
EMU_STREAMS=early run e2 2 --bucket_mb 0.0005
check 'ok_run e2 && [ "$(crc "$W/e2")" = "$(crc "$W/n2")" ]' "the same with the side stream run early (EMU_STREAMS=early): bitwise ($(crc "$W/e2"))"
run z2 2 --zero 1 --bucket_mb 0
run zo2 2 --zero 1 --bucket_mb 0.0005
check 'ok_run z2 && ok_run zo2' "ZeRO-1 on NCCL trains, after and during the backward ($(cat "$W/z2.rc") $(cat "$W/zo2.rc")): $(tail -n 3 "$W/zo2.log")"
check '[ "$(crc "$W/z2")" = "$(crc "$W/n2")" ] && [ "$(crc "$W/zo2")" = "$(crc "$W/n2")" ]' "ZeRO-1 on NCCL (reduce-scatter and all-gather; per-bucket reduces during the backward): bitwise the parameters of ZeRO 0 ($(crc "$W/z2") $(crc "$W/zo2"))"
run zo4 4 --zero 1 --bucket_mb 0.0005
check 'ok_run zo4' "4 ranks, ZeRO-1 with buckets, train: $(tail -n 3 "$W/zo4.log")"
within "$W/zo4" "$W/g1" 1e-5 "4 ranks, ZeRO-1, per-bucket reduces, against 1 rank"
# auto_micro_batch on 2 ranks: each probes its own device; 2 sequences a
# rank in one micro-batch, bitwise micro_batch 2 x grad_accum 2
run a2 2 --auto_micro_batch true --bucket_mb 0.0005
run x2 2 --micro_batch 2 --grad_accum 2 --bucket_mb 0.0005
check 'ok_run a2 && ok_run x2 && grep -q "auto_micro_batch: 4 sequences a step as 2 micro-batches of 2 (1 a rank); device footprint" "$W/a2.log" &&
       [ "$(crc "$W/a2")" = "$(crc "$W/x2")" ]' \
    "2 ranks, auto_micro_batch: 2 micro-batches of 2, bitwise the explicit split ($(crc "$W/a2") $(crc "$W/x2")): $(grep -m1 auto_micro_batch "$W/a2.log")"

# stopped on 2 ranks with sharded AdamW state, resumed on 1
run s2 2 --zero 1 --bucket_mb 0.0005 --stop_at 3
check '[ "$(cat "$W/s2.rc")" = 75 ] && [ -f "$W/s2/checkpoint.bin" ]' "2 ranks, ZeRO-1, stop at step 3 with a checkpoint (exit $(cat "$W/s2.rc"))"
timeout 300 "$EMU" $T --out "$W/s2" >"$W/s2-resume.log" 2>&1
check '[ "$(crc "$W/s2")" = "$(crc "$W/n2")" ] || awk -v a="$(losses "$W/s2" | tail -n 1)" -v b="$(losses "$W/n2" | tail -n 1)" "BEGIN { e = (a - b) / b; if (e < 0) e = -e; exit !(e <= 1e-5) }"' \
    "resumed on 1 emulated GPU, the run ends where 2 ranks end ($(crc "$W/s2") vs $(crc "$W/n2"); last loss $(losses "$W/s2" | tail -n 1) vs $(losses "$W/n2" | tail -n 1))"

# SG_ATTN unset is the mma tiles (kernels/cuda/attention_tiles_env.h): combo2's
# gradients bitwise those of SG_ATTN=mma (emu-d64-combo2-mma above), and not wmma's
env -u SG_ATTN "$EMU" "${G64[@]}" --arm combo2 -o "$W/default-combo2.st" >"$W/default-combo2.log" 2>&1; rc=$?
check '[ $rc -eq 0 ] && cmp -s "$W/default-combo2.st" "$W/emu-d64-combo2-mma.st" && ! cmp -s "$W/default-combo2.st" "$W/emu-d64-combo2-wmma.st"' \
    "d64 combo2 with SG_ATTN unset: the mma tiles' gradients bitwise, not wmma's (exit $rc)"$'\n'"$(tail -n 3 "$W/default-combo2.log")"
# a bad value of any of them: exit 2 before the run directory exists
bad_env SG_ATTN fast
bad_env SG_ATTN_DQ store
bad_env SG_ATTN_WARP_ROWS 24
bad_env SG_ATTN_WGMMA yes 3
bad_env SG_ATTN_BWD_PIPE on 2
bad_env SG_WGMMA_SWAP 4 x

# NCCL refuses two ranks on one GPU: a clear message and a non-zero exit
EMU_GPUS=1 run dup 2
check '[ "$(cat "$W/dup.rc")" != 0 ] && grep -q "Duplicate GPU detected" "$W/dup.log" && [ ! -f "$W/dup/result.json" ]' \
    "2 ranks on 1 GPU: the job ends with NCCL's reason (exit $(cat "$W/dup.rc")): $(grep -m1 -i "nccl" "$W/dup.log")"
wait $tgo
line=$(grep -E "^test_gpu_ops: [0-9]+ passed, [0-9]+ failed$" "$W/test_gpu_ops.log" 2>/dev/null)
check '[ "$(cat "$W/test_gpu_ops.rc" 2>/dev/null)" = 0 ] && [[ "$line" == *" 0 failed" ]]' \
    "test_gpu_ops, emulated: ${line:-no summary}"$'\n'"$(grep -m 20 FAIL "$W/test_gpu_ops.log" 2>/dev/null; tail -n 3 "$W/test_gpu_ops.log" 2>/dev/null)"
echo "${line:-test_gpu_ops: no summary}"
SG_MATMUL_KEEP=0 "$W/test_gpu_ops" twins >"$W/test_gpu_ops-nokeep.log" 2>&1
line=$(grep -E "^test_gpu_ops: [0-9]+ passed, [0-9]+ failed$" "$W/test_gpu_ops-nokeep.log" 2>/dev/null)
check '[[ "$line" == *" 0 failed" ]]' \
    "test_gpu_ops twins with SG_MATMUL_KEEP=0, emulated: ${line:-no summary}"$'\n'"$(grep -m 20 FAIL "$W/test_gpu_ops-nokeep.log" 2>/dev/null)"
echo "SG_MATMUL_KEEP=0 ${line:-test_gpu_ops: no summary}"
SG_TWIN_POISON=0 "$W/test_gpu_ops" twins >"$W/test_gpu_ops-nopoison.log" 2>&1
line=$(grep -E "^test_gpu_ops: [0-9]+ passed, [0-9]+ failed$" "$W/test_gpu_ops-nopoison.log" 2>/dev/null)
check '[[ "$line" == *" 0 failed" ]]' \
    "test_gpu_ops twins with SG_TWIN_POISON=0 (unstored outputs keep their old values), emulated: ${line:-no summary}"$'\n'"$(grep -m 20 FAIL "$W/test_gpu_ops-nopoison.log" 2>/dev/null)"
# a promise broken (an op between producer and matmul: for a forward's x, a
# backward's x that no forward read, a backward's dout): the matmul stops
# the program
for how in fwd dw dout; do
    "$W/test_gpu_ops" broken-promise $how >"$W/broken-$how.log" 2>&1; rc=$?
    check '[ $rc -eq 1 ] && grep -q "promised to matmuls alone (op_matmul_only)" "$W/broken-$how.log" &&
           ! grep -q "the matmul went on" "$W/broken-$how.log"' \
        "a broken promise ($how) stops the program (exit $rc): $(tail -n 2 "$W/broken-$how.log")"
    SG_MATMUL_KEEP=0 "$W/test_gpu_ops" broken-promise $how >"$W/broken-$how-nokeep.log" 2>&1; rc=$?
    check '[ $rc -eq 0 ] && grep -q "the matmul went on, 0 fp32" "$W/broken-$how-nokeep.log"' \
        "with SG_MATMUL_KEEP=0 a promise costs nothing and breaks nothing ($how, exit $rc): $(tail -n 1 "$W/broken-$how-nokeep.log")"
done
echo "broken promises: $(grep -h -m1 -o "op_matmul_only.*" "$W/broken-fwd.log" | head -c 160)"
# bf16 operands: the cases with SG_BF16_OPERANDS=0 (fp32, the same bits) and
# without the poison; a matmul that reads one as its x stops the program
for envs in SG_BF16_OPERANDS=0 SG_TWIN_POISON=0; do
    env $envs "$W/test_gpu_ops" bf16-operands >"$W/bf16ops-$envs.log" 2>&1
    line=$(grep -E "^test_gpu_ops: [0-9]+ passed, [0-9]+ failed$" "$W/bf16ops-$envs.log" 2>/dev/null)
    check '[[ "$line" == *" 0 failed" ]]' \
        "test_gpu_ops bf16-operands with $envs, emulated: ${line:-no summary}"$'\n'"$(grep -m 20 FAIL "$W/bf16ops-$envs.log" 2>/dev/null)"
done
"$W/test_gpu_ops" broken-promise bf16 >"$W/broken-bf16.log" 2>&1; rc=$?
check '[ $rc -eq 1 ] && grep -q "promised as a bf16 operand (op_bf16_operand)" "$W/broken-bf16.log" &&
       ! grep -q "the matmul went on" "$W/broken-bf16.log"' \
    "a matmul reading a bf16 operand stops the program (exit $rc): $(tail -n 2 "$W/broken-bf16.log")"
SG_BF16_OPERANDS=0 "$W/test_gpu_ops" broken-promise bf16 >"$W/broken-bf16-fp32.log" 2>&1; rc=$?
check '[ $rc -eq 0 ] && grep -q "the matmul went on, 0 outputs" "$W/broken-bf16-fp32.log"' \
    "with SG_BF16_OPERANDS=0 a bf16 operand is fp32 and may be read (exit $rc): $(tail -n 1 "$W/broken-bf16-fp32.log")"
# qkv stored in bf16 (SG_ATTN=mma) given to an op that reads fp32: the
# program stops; under wmma the promise is not taken
SG_ATTN=mma "$W/test_gpu_ops" broken-promise attention >"$W/broken-attn.log" 2>&1; rc=$?
check '[ $rc -eq 1 ] && grep -q "promised as an attention operand (op_attention_operand)" "$W/broken-attn.log" &&
       ! grep -q "the probabilities went on" "$W/broken-attn.log"' \
    "the explicit attention reading a qkv stored in bf16 stops the program (exit $rc): $(tail -n 2 "$W/broken-attn.log")"
SG_ATTN=wmma "$W/test_gpu_ops" broken-promise attention >"$W/broken-attn-wmma.log" 2>&1; rc=$?
check '[ $rc -eq 0 ] && grep -q "the probabilities went on, 0 outputs" "$W/broken-attn-wmma.log"' \
    "under SG_ATTN=wmma qkv is fp32 and the explicit attention may read it (exit $rc): $(tail -n 1 "$W/broken-attn-wmma.log")"

# Out of device memory (EMU_DEVICE_BYTES, the emulated device's size): a
# message that says what to change, exit 2 before the run starts or 1 in
# it, and nothing of the run lost.
# The test tier holds about 33 MB at its peak, 32 MiB of it cuBLASLt's
# workspace.  100 kB does not hold the parameters; 16 MB holds all but the
# workspace, which the first product of a resumed run asks for.
EMU_DEVICE_BYTES=100000 timeout 300 "$EMU" $T --out "$W/oom1" >"$W/oom1.log" 2>&1; rc=$?
check '[ $rc -eq 2 ] && grep -q "out of memory allocating [0-9]* parameters" "$W/oom1.log" && [ ! -e "$W/oom1" ]' \
    "a device too small for the parameters: exit $rc (want 2, a setting refused before the run starts; no run directory), $(tail -n 1 "$W/oom1.log")"
timeout 300 "$EMU" $T --stop_at 3 --out "$W/oom2" >"$W/oom2.log" 2>&1; rc=$?
# (config.yaml is rewritten by every run with its own command's settings)
sums() { (cd "$W/oom2" && md5sum checkpoint.bin metrics.jsonl) 2>/dev/null; }
before=$(sums)
EMU_DEVICE_BYTES=16000000 timeout 300 "$EMU" $T --out "$W/oom2" >"$W/oom2-small.log" 2>&1; rc2=$?
check '[ $rc -eq 75 ] && [ $rc2 -eq 1 ] && grep -Eq "out of device memory: a scratch buffer of [0-9.]+ GiB could not be had" "$W/oom2-small.log" &&
       grep -q "lower micro_batch and raise grad_accum" "$W/oom2-small.log" && [ -n "$before" ] && [ "$(sums)" = "$before" ]' \
    "resumed on a device too small for the workspace: exit $rc2 (want 1; the stop $rc, want 75), the checkpoint and the metrics unchanged: $(tail -n 1 "$W/oom2-small.log")"
timeout 300 "$EMU" $T --out "$W/oom2" >"$W/oom2-resume.log" 2>&1; rc=$?
check '[ $rc -eq 0 ] && [ -n "$(crc "$W/oom2")" ]' "then resumed on the full device: exit $rc (want 0), params_crc32 $(crc "$W/oom2")"
echo "out of device memory: $(tail -n 1 "$W/oom2-small.log")"

# auto_micro_batch (src/batch_split.h) on the emulated device: probes at
# micro-batch 1 and 2 draw the footprint's line, the choice is measured, and
# the run is bitwise the explicit split.
bs() { sed -nE "s/.*\"batch_split\": \{(.*)\},?\$/\1/p" "$1/result.json" 2>/dev/null; }
bsv() { bs "$1" | sed -nE "s/.*\"$2\": ([0-9a-z]*).*/\1/p"; }
peak() { sed -nE 's/.*"device_peak_bytes": ([0-9]*).*/\1/p' "$1/result.json" 2>/dev/null; }
# the test tier, 4 sequences a step, on a device of 1 TiB: all 4 at once
timeout 300 "$EMU" $T --auto_micro_batch true --out "$W/auto" >"$W/auto.log" 2>&1; rc=$?
timeout 300 "$EMU" $T --micro_batch 4 --grad_accum 1 --out "$W/exp4" >/dev/null 2>&1
check '[ $rc -eq 0 ] && [ "$(bsv "$W/auto" micro_batch)/$(bsv "$W/auto" grad_accum)" = 4/1 ] &&
       [ -n "$(crc "$W/auto")" ] && [ "$(crc "$W/auto")" = "$(crc "$W/exp4")" ] && [ "$(peak "$W/auto")" = "$(peak "$W/exp4")" ]' \
    "4 sequences on a large device: one micro-batch of 4, bitwise micro_batch 4 x grad_accum 1, the same device peak (exit $rc; $(crc "$W/auto") $(crc "$W/exp4"); $(peak "$W/auto") $(peak "$W/exp4")): $(grep -m1 auto_micro_batch "$W/auto.log")"
# --profile_every and the MFU on the CUDA backend: steps 2, 4 and 6 timed
# op by op (each bracketed by a stream synchronisation), bits unchanged
timeout 300 "$EMU" $T --micro_batch 4 --grad_accum 1 --profile_every 2 --peak_tflops 1 --out "$W/prof" >"$W/prof.log" 2>&1; rc=$?
check '[ $rc -eq 0 ] && [ -n "$(crc "$W/prof")" ] && [ "$(crc "$W/prof")" = "$(crc "$W/exp4")" ] &&
       grep -q "MFU against 1 TFLOP/s a rank (--peak_tflops)" "$W/prof.log" &&
       python3 - "$W/prof" <<'"'"'PY'"'"'
import json, sys
r = json.load(open(sys.argv[1] + "/result.json"))
p, t = r["profile"], r["throughput"]
assert r["backend"] == "cuda (emulated on the host, tests/emu)", r["backend"]
assert p["steps"] == 3 and t["steady_steps"] == 2 and t["peak_source"] == "--peak_tflops", (p, t)
assert min(p["categories_ms"][k] for k in ("matmul", "attention", "gate", "classifier")) > 0, p
assert abs(t["mfu"] - t["flop_per_token"] * t["steady_tokens_per_s"] / 1e12) <= 1e-5 * t["mfu"], t
PY' "CUDA backend, --profile_every 2 --peak_tflops 1: 3 steps profiled, 2 steady, bitwise the run without (exit $rc; $(crc "$W/prof") $(crc "$W/exp4")): $(grep -m1 "profile of" "$W/prof.log")"
# the probe at the choice measures what the run holds, to the optimizer's
# few bytes; the line is within 1% of the per-sequence part
check 'awk -v m="$(bsv "$W/auto" measured_bytes)" -v p="$(peak "$W/auto")" -v l="$(bsv "$W/auto" predicted_bytes)" \
           -v a="$(bsv "$W/auto" footprint_at_1_bytes)" -v s="$(bsv "$W/auto" per_sequence_bytes)" \
           "BEGIN { d = l - m; if (d < 0) d = -d; exit !(m > 0 && p >= m && p - m <= 4096 && d <= 0.01 * 4 * s && a > 0 && s > 0) }"' \
    "measured at 4: $(bsv "$W/auto" measured_bytes) B, the run held $(peak "$W/auto"), the line said $(bsv "$W/auto" predicted_bytes)"
# a device that micro-batch 1 half fills: no probe at 2 (it might not
# fit), and micro-batch 1, the split asked for, bitwise
cap=$(( $(bsv "$W/auto" footprint_at_1_bytes) * 3 / 2 ))
EMU_DEVICE_BYTES=$cap timeout 300 "$EMU" $T --auto_micro_batch true --out "$W/auto1" >"$W/auto1.log" 2>&1; rc=$?
check '[ $rc -eq 0 ] && [ "$(bsv "$W/auto1" micro_batch)/$(bsv "$W/auto1" grad_accum)" = 1/4 ] && [ -n "$(crc "$W/g1")" ] && [ "$(crc "$W/auto1")" = "$(crc "$W/g1")" ] &&
       [ "$(bsv "$W/auto1" probed_at_2)" = false ] && [ "$(bsv "$W/auto" probed_at_2)" = true ] && grep -q "(no probe at 2: it might not fit)" "$W/auto1.log"' \
    "on $cap bytes, micro-batch 1 (exit $rc), bitwise the run asked for: $(grep -m1 auto_micro_batch "$W/auto1.log")"
# where the logits count: vocabulary 16384 and context 256 (10 MB a
# sequence), 8 sequences a step, on a device whose budget (15/16 of it)
# lies halfway between the line's P(4) and P(8): 2 micro-batches of 4
"$B/sgsynth" --out "$W/dv" --vocab 16384 --val-tokens 8000 --train-tokens 40000 --shard-tokens 20000 >/dev/null
V="train --tier test --arm combo2 --vocab_size 16384 --block_size 256 --micro_batch 1 --grad_accum 8 --iters 2
   --warmup 1 --val_every 0 --val_batches 1 --val_batches_final 1 --ckpt_every 0 --data $W/dv"
timeout 300 "$EMU" $V --micro_batch 8 --grad_accum 1 --auto_micro_batch true --out "$W/autov" >"$W/autov.log" 2>&1
a=$(bsv "$W/autov" footprint_at_1_bytes) s=$(bsv "$W/autov" per_sequence_bytes)
cap=$(( (a + 3 * s + a + 7 * s) / 2 * 16 / 15 ))
EMU_DEVICE_BYTES=$cap timeout 300 "$EMU" $V --auto_micro_batch true --out "$W/autov4" >"$W/autov4.log" 2>&1; rc=$?
EMU_DEVICE_BYTES=$cap timeout 300 "$EMU" $V --micro_batch 4 --grad_accum 2 --out "$W/expv4" >/dev/null 2>&1; rc2=$?
check '[ $rc -eq 0 ] && [ $rc2 -eq 0 ] && [ "$(bsv "$W/autov" micro_batch)" = 8 ] && [ "$(bsv "$W/autov4" micro_batch)/$(bsv "$W/autov4" grad_accum)" = 4/2 ] &&
       [ -n "$(crc "$W/autov4")" ] && [ "$(crc "$W/autov4")" = "$(crc "$W/expv4")" ] &&
       [ "$(bsv "$W/autov4" measured_bytes)" -le $((cap - cap / 16)) ] && [ "$(bsv "$W/autov4" next_predicted_bytes)" -gt $((cap - cap / 16)) ]' \
    "on $cap bytes, 8 sequences as 2 micro-batches of 4 (exit $rc, $rc2), bitwise micro_batch 4 x grad_accum 2; measured within the budget, P(8) over it: $(grep -m1 auto_micro_batch "$W/autov4.log")"
# The graphs handed to cuDNN: every operand 16 bytes aligned, as its
# kernels need (the frontend stops a run whose pointer is not: exit 1, not
# the tiles), in every run above (training, evaluation, the arms' gradients)
# misaligned FILE: its graph lines (sdpa_line.h) whose operands are not
misaligned() { grep -v '^#' "$1" | awk '{ a = $NF; sub(/^align=/, "", a); if (a + 0 < 16) print }'; }
nlog=$(grep -c . "$EMU_CUDNN_LOG" 2>/dev/null)
mis=$(misaligned "$EMU_CUDNN_LOG" 2>/dev/null)
check '[ "${nlog:-0}" -ge 8 ] && [ -z "$mis" ]' "the runs asked cuDNN for ${nlog:-0} graphs, every operand 16-byte aligned:"$'\n'"$mis"
# tests/cudnn/graphs.txt (the tiers' graphs, which e2e_cuda_build.sh puts to
# the real cuDNN) is what sgtrain asks for now
wait $graphs_pid; rc=$?
check '[ $rc -eq 0 ] && diff -u tests/cudnn/graphs.txt "$W/graphs.txt" >"$W/graphs.diff"' \
    "tests/cudnn/graphs.txt is what sgtrain asks cuDNN for (exit $rc); if the change is meant, regenerate it:
    bash tests/cudnn/record-graphs.sh $EMU $B/sgtrain $W/d tests/cudnn/graphs.txt
$(head -n 20 "$W/graphs.log" "$W/graphs.diff" 2>/dev/null)"
mis=$(misaligned tests/cudnn/graphs.txt)
check '[ -z "$mis" ]' "tests/cudnn/graphs.txt: every operand 16-byte aligned:"$'\n'"$mis"
# bench_gpu --attn-trace (kernels/cuda/attention_trace.h) end to end, at a
# shape the emulator runs in seconds: B 1, T 130 (131 with combo2's sink
# token), H 2, d 64, under the mma tiles and the pipelined warpgroup
# forward (and the backward's pipelined strips, timed but not traced).
# Every warp's record written and consistent, each kernel's
# shares adding up to 1, its warps and tiles those of the grid, per head:
# the mma forward 2 blocks of 4 warps, 18 tiles (3 + 0 + 0 + 0 in the last
# query tile, 1 + 1 + 2 + 2 in the first); the pipelined one 2 blocks of 8
# warps, every warp in every pass, 8 x 3 + 8 x 2; dK/dV 3 blocks of 4 warps,
# 12 + 8 + 1 (on the warpgroup products under wgmma2: not traced); dQ 3
# blocks of 2 warps, 3 + 4 + 2.
if [ -x "$W/bench_gpu" ]; then
    timeout 300 "$W/bench_gpu" --no-train --attn-tiles mma,mma-bp,wgmma2 --attn-trace --attn-shape 1,130,2,64 \
        --attn-iters 1 --json "$W/trace.json" >"$W/trace.log" 2>&1; rc=$?
    v=$(python3 - "$W/trace.json" <<'PYEOF' 2>&1
import json, sys
a = json.load(open(sys.argv[1]))["attention"]
t = a["trace"]
want = {"mma": {"forward": (16, 18), "dK/dV": (24, 42), "dQ": (12, 18)},
        "wgmma2": {"forward": (32, 80), "dQ": (12, 18)}}
bad = []
for arm in ("baseline", "combo2"):
    for tiles_set, kernels in want.items():
        run = t[f"{arm}/{tiles_set}"]
        if sorted(run["kernels"]) != sorted(kernels):
            bad.append(f"{arm}/{tiles_set}: kernels {sorted(run['kernels'])}")
            continue
        for k, (warps, tiles) in kernels.items():
            x = run["kernels"][k]
            share = sum(p["share"] for p in x["phases"].values())
            if (x["warps"], x["tiles"], x["missing"], x["inconsistent"]) != (warps, tiles, 0, 0) or abs(share - 1) > 1e-4 \
                    or not x["clock_ghz"] > 0:
                bad.append(f"{arm}/{tiles_set} {k}: warps {x['warps']} tiles {x['tiles']} missing {x['missing']} "
                           f"inconsistent {x['inconsistent']} shares {share} clock {x['clock_ghz']}")
        if not run["traced_fwd_ms"] > 0 or not run["fwd_ms"] > 0:
            bad.append(f"{arm}/{tiles_set}: times {run}")
    # the pipelined strips (SG_ATTN_BWD_PIPE=1): timed, not traced
    if not a.get("arms_mma_bp", {}).get(arm, {}).get("bwd_ms", 0) > 0 or f"{arm}/mma-bp" in t:
        bad.append(f"{arm}/mma-bp: {a.get('arms_mma_bp')} traced {f'{arm}/mma-bp' in t}")
print("; ".join(bad) or "ok")
PYEOF
)
    check '[ $rc -eq 0 ] && [ "$v" = ok ] && grep -q "^  forward: attn_fwd_mma (2 m-tiles a warp)$" "$W/trace.log" &&
           grep -q "^  forward: attn_fwd_wgmma_pipe_kernel$" "$W/trace.log" &&
           grep -q "^  dK/dV: not traced" "$W/trace.log" &&
           grep -q "^  dK/dV: attn_bwd_dkdv_mma$" "$W/trace.log" && grep -q "^    softmax " "$W/trace.log" &&
           grep -q "^mma-bp: no phase clocks" "$W/trace.log"' \
        "bench_gpu --attn-trace: exit $rc, the JSON $v:"$'\n'"$(tail -n 12 "$W/trace.log")"
    # Training steps of several micro-batches (--grad-accum, the tier's own
    # step): the test tier's step of 2 micro-batches of the same 4 sequences,
    # each scaled by 1 / (2 B T), sums to the gradient of one micro-batch
    # scaled by 1 / (B T) exactly (halving commutes with every rounding), so
    # its losses and last gradient norm are bitwise those of --grad-accum 1, and
    # its tokens a step twice as many.
    for acc in 1 2; do
        timeout 300 "$W/bench_gpu" --tiers test --arms combo2 --steps 2 --warmup 0 --no-attn --grad-accum $acc \
            --json "$W/accum$acc.json" >"$W/accum$acc.log" 2>&1
        echo "exit $?" >>"$W/accum$acc.log"
    done
    v=$(python3 - "$W/accum1.json" "$W/accum2.json" <<'PYEOF' 2>&1
import json, sys
one, two = (json.load(open(p))["train"]["test"]["combo2"] for p in sys.argv[1:])
bad = [f"{k}: {one.get(k)} vs {two.get(k)}" for k in ("loss_first", "loss_last", "grad_norm_last")
       if one.get(k) is None or one.get(k) != two.get(k)]
if (one.get("grad_accum"), two.get("grad_accum"), one.get("micro_batch"), two.get("micro_batch")) != (1, 2, 4, 4):
    bad.append(f"grad_accum {one.get('grad_accum')} {two.get('grad_accum')}, micro_batch {one.get('micro_batch')}")
if not (one.get("ok") and two.get("ok") and two["tokens_per_s"] > 0):
    bad.append(f"ok {one.get('ok')} {two.get('ok')}")
print("; ".join(bad) or "ok")
PYEOF
)
    check '[ "$v" = ok ] && grep -q "2 micro-batches of B a step, one AdamW update" "$W/accum2.log" &&
           grep -q "exit 0" "$W/accum1.log" && grep -q "exit 0" "$W/accum2.log"' \
        "bench_gpu --grad-accum 2: bitwise --grad-accum 1's losses on the same sequences ($v):"$'\n'"$(tail -n 5 "$W/accum2.log")"
    # its bad flags: exit 2 and the reason, before any device work
    for args in "--attn-shape 1,130,2" "--attn-shape 1,130,2,64,1" "--attn-shape 1,0,2,64" "--attn-shape 1,130,2,256" \
        "--attn-tiles mma,nope" "--attn-trace-now" "--grad-accum 0"; do
        # shellcheck disable=SC2086
        "$W/bench_gpu" --no-train $args >"$W/bench-bad.log" 2>&1; rc=$?
        check '[ $rc -eq 2 ] && grep -qE "attn-shape|attn-tiles|usage" "$W/bench-bad.log"' \
            "bench_gpu $args: exit 2 with the reason (exit $rc): $(head -n 2 "$W/bench-bad.log")"
    done
fi
echo "ran in $((SECONDS - t0)) s"
finish
