#!/usr/bin/env bash
# The CUDA build on a machine without a GPU (what CI can check): `make cuda`
# compiles every kernel for sm_80, sm_90 and sm_120 and links with the
# toolkit alone; the binary needs no driver library, runs its GPU-free
# commands, and on a training command says clearly that there is no device,
# writing nothing.  The CPU build stays free of CUDA.  This machine's
# cuDNN says whether it takes the attention graphs sgtrain asks for, on each
# GPU sgtrain targets (tests/cudnn/plan_check.cpp).  The GPU tests
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
# a make of its own, on every core: under `make test` the parent's jobserver
# flags would leak in (nvcc compiles one file at a time)
log=$(env -u MAKEFLAGS -u MAKELEVEL -u MFLAGS make -s -j"$(nproc 2>/dev/null || echo 2)" B="$B" cuda 2>&1); rc=$?
check '[ $rc -eq 0 ]' "make cuda builds"$'\n'"$(tail -n 30 <<<"$log")"
check '! grep -v "^make" <<<"$log" | grep -qiE "warning"' "make cuda is warning-free"$'\n'"$(grep -iE -m5 warning <<<"$log")"
CB=$B/cuda
for f in sgtrain test_gpu_ops wgmma_probe; do check "[ -x $CB/$f ]" "$CB/$f built"; done
probe_archs=$(python3 tests/gpu/fatbin_archs.py "$CB/wgmma_probe")
check '[ "$(echo $probe_archs)" = "elf sm_90" ]' "the wgmma probe holds sm_90(a) code alone, no PTX for other GPUs to compile (found: $probe_archs)"
archs=$(python3 tests/gpu/fatbin_archs.py "$CB/sgtrain")
check '[[ "$archs" == *"elf sm_80"* && "$archs" == *"elf sm_90"* && "$archs" == *"elf sm_120"* ]]' "device code (ELF) for sm_80, sm_90 and sm_120 (found: $archs)"
check '[[ "$archs" == *"ptx sm_80"* ]]' "PTX for compute_80 beside it, for GPUs of other major versions (a B200) to compile at load (found: $archs)"
check '! ldd "$CB/sgtrain" | grep -qE "libcuda\.so|libnvidia-ml"' "no driver library is linked (libcuda is loaded at run time by cudart)"
check '! ldd "$B/sgtrain" | grep -qiE "cuda|cublas"' "the CPU build has no CUDA dependency"
check '"$CB/sgtrain" tiers | grep -q "^124M"' "the CUDA build runs its GPU-free commands"
# SG_ATTN=cudnn (kernels/cuda/cudnn_sdpa.cpp): built with cuDNN where its
# headers and the frontend's (PyPI) are there, libcudnn opened at run time,
# never linked; without them the file still builds, and says why at run time
choice=$(cat "$CB/cudnn.choice" 2>/dev/null)
check '[ "$choice" = yes ] || [ "$choice" = no ]' "build/cuda/cudnn.choice records whether cuDNN was built in (found: ${choice:-nothing})"
check '! ldd "$CB/sgtrain" | grep -qi "libcudnn"' "libcudnn is not linked (it is opened when the first attention runs)"
if [ "$choice" = yes ]; then
    check 'nm "$CB/sgtrain" | grep -q cudnn_dlhandle' "the cuDNN build carries the frontend's dynamic loading"
else
    echo "(cuDNN's headers or the frontend's were missing: built without cuDNN)"
fi
out=$(env -u MAKEFLAGS -u MAKELEVEL -u MFLAGS make -n B="$B" CUDNN=maybe cuda 2>&1); rc=$?
check '[ $rc -ne 0 ] && grep -q "CUDNN must be auto, yes or no (not \"maybe\")" <<<"$out" && [ "$(cat "$CB/cudnn.choice")" = "$choice" ]' \
    "make CUDNN=maybe: a clear error, nothing built (exit $rc): $(tail -n 1 <<<"$out")"
o=$(mktemp)
g++ -std=c++17 -Wall -Wextra -Werror -Ikernels -Ikernels/cuda -isystem "$(dirname "$(dirname "$(command -v nvcc)")")/include" \
    -c kernels/cuda/cudnn_sdpa.cpp -o "$o" 2>"$o.log"
check '[ $? -eq 0 ] && nm "$o" | grep -q "T sg_cudnn_sdpa_fwd" && ! nm "$o" | grep -q dlopen' \
    "cudnn_sdpa.cpp without cuDNN (CUDNN=no) compiles warning-free, defines the calls, opens nothing: $(head -n 3 "$o.log")"
rm -f "$o" "$o.log"
# cuDNN's verdict on the attention graphs sgtrain asks for at the paper's
# tiers (tests/cudnn/graphs.txt, kept fresh by e2e_cuda_sgtrain_emu.sh), for
# the GPUs sgtrain targets, none of which is here: cuDNN's validation,
# heuristics and support check run for a described GPU (tests/cudnn/devices,
# plan_check.cpp).  Its runtime-compiled engines need a libcuda.so.1 to load:
# the toolkit's stub stands in for it.  Loading the kernels is left to a GPU.
CUDA_HOME=$(dirname "$(dirname "$(command -v nvcc)")")
PC=$CB/cudnn_plan_check
check '[ -x "$PC" ]' "make cuda builds $PC"
cudnn_lib=
for d in "$CUDA_HOME/lib64" $(ldconfig -p 2>/dev/null | sed -nE 's|.*libcudnn\.so\.9 .*=> (.*)/libcudnn\.so\.9$|\1|p'); do
    [ -e "$d/libcudnn.so.9" ] && { cudnn_lib=$d; break; }
done
if [ "$choice" != yes ] || [ -z "$cudnn_lib" ] || [ ! -e "$CUDA_HOME/lib64/stubs/libcuda.so" ] || [ ! -x "$PC" ]; then
    echo "(no cuDNN build, libcudnn.so.9 or libcuda stub here: cuDNN's verdict on the graphs is not checked)"
else
    S=$(mktemp -d)
    ln -s "$CUDA_HOME/lib64/stubs/libcuda.so" "$S/libcuda.so.1"
    G=tests/cudnn/graphs.txt
    n=$(grep -vc '^#' "$G")
    check '[ "$n" -ge 60 ]' "tests/cudnn/graphs.txt holds the tiers' and test-gpu's graphs ($n lines)"
    for dev in tests/cudnn/devices/*.json; do
        out=$(LD_LIBRARY_PATH="$cudnn_lib:$S" "$PC" "$dev" "$G" 2>&1); rc=$?
        check '[ $rc -eq 0 ] && [ "$(tail -n 1 <<<"$out")" = "$n supported, 0 refused" ]' \
            "cuDNN takes every graph of the tiers on $(basename "$dev" .json) (exit $rc):"$'\n'"$(grep -v '^supported' <<<"$out" | head -n 5)"
        echo "$(basename "$dev" .json): $(grep -m1 '^supported' <<<"$out" | cut -d: -f1-2)"
    done
    h200=tests/cudnn/devices/h200.json
    one=$(grep -m1 '^bwd 8 12 1024' "$G")
    bent=$(sed -E 's/ q=([0-9]+),([0-9]+),([0-9]+)/ q=\1,\2,2305/' <<<"$one")
    expect 1 "refused \(Q: stride 2305 .* not a multiple of the tensor's 16-byte alignment\)" -- \
        env LD_LIBRARY_PATH="$cudnn_lib:$S" "$PC" "$h200" - <<<"$bent"
    expect 2 "not a line of sdpa_line.h" -- env LD_LIBRARY_PATH="$cudnn_lib:$S" "$PC" "$h200" - <<<"fwd 8 12 1024"
    expect 2 "has no \"deviceVer\"" -- env LD_LIBRARY_PATH="$cudnn_lib:$S" "$PC" tests/cudnn/graphs.txt "$G"
    expect 2 "cannot read the device properties" -- "$PC" "$S/none.json" "$G"
    expect 2 "usage: plan_check" -- "$PC" "$h200"
    expect 2 "cuDNN did not take the device properties" -- \
        env LD_LIBRARY_PATH="$cudnn_lib:$S" "$PC" <(echo '{"deviceVer": 900, "multiProcessorCount": "many"}') "$G"
    # SG_CUDNN_LIB names the library sgtrain opens: one that is not there is
    # said (sgtrain's SG_ATTN=cudnn then runs the mma tiles)
    expect 2 "cannot load $S/libcudnn-none.so.*SG_CUDNN_LIB names the library" -- \
        env SG_CUDNN_LIB="$S/libcudnn-none.so" LD_LIBRARY_PATH="$cudnn_lib:$S" "$PC" "$h200" "$G"
    # without a libcuda.so.1, cuDNN has no engine for them on sm_90 (its
    # engines there compile at run time): the verdicts above are the
    # engines', not a check that passes anything
    if ! ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1 '; then
        expect 1 "refused \(No valid engine configs" -- env LD_LIBRARY_PATH="$cudnn_lib" "$PC" "$h200" - <<<"$one"
    fi
    rm -rf "$S"
fi
# The attention tile kernels' exponentials carry no denormal fix-up
# (tc_ex2, mma_ptx.h): exp2f puts a compare (FSETP) and two multiplies
# around every MUFU.EX2.  tests/gpu/sass_mix.py counts both in the sm_90
# code; it takes cuobjdump and nvdisasm from PyPI, and without PyPI this
# check is skipped (said so below), not failed.
expect 1 "expected a compute capability" -- python3 tests/gpu/sass_mix.py --arch x kernels/cuda/attention_fwd_mma.cu
expect 1 "nope.cu: not a .cu file" -- python3 tests/gpu/sass_mix.py nope.cu
mix=$(python3 tests/gpu/sass_mix.py kernels/cuda/attention_fwd_mma.cu kernels/cuda/attention_bwd_mma.cu \
      kernels/cuda/attention_fwd.cu kernels/cuda/attention_bwd.cu 2>&1); rc=$?
if [ $rc -ne 0 ] && grep -q "pip download" <<<"$mix"; then
    echo "(sass_mix.py could not fetch cuobjdump from PyPI: the exponentials' SASS is not checked here)"
else
    check '[ $rc -eq 0 ]' "sass_mix.py runs: $mix"
    tiles=$(grep -E '^_Z[0-9]+attn_(fwd|fwd_mma|bwd_dq|bwd_dq_mma|bwd_dkdv|bwd_dkdv_mma)_kernel' <<<"$mix")
    check '[ "$(wc -l <<<"$tiles")" -ge 48 ]' "sass_mix.py lists the attention tile kernels ($(wc -l <<<"$tiles") found)"
    slow=$(awk '{for (i = 1; i < NF; i++) v[$i] = $(i + 1); if (!(v["MUFU"] > 0 && 2 * v["FSETP"] < v["MUFU"])) print}' <<<"$tiles")
    check '[ -z "$slow" ]' "every attention tile kernel has fewer than one FSETP per two MUFU:"$'\n'"$slow"
    # the phase clocks (kernels/cuda/attention_trace.h) in the traced
    # instantiations alone: the mma kernels' last template argument is TR
    # (Lb1EE traced, Lb0EE plain); a plain one must read no clock, and a
    # traced one must (at d 64 and 128, the head dims that have one)
    mma=$(grep -E '^_Z[0-9]+attn_(fwd_mma|bwd_dq_mma|bwd_dkdv_mma)_kernel' <<<"$tiles")
    plain=$(grep -E 'Lb0EEv' <<<"$mma")
    traced=$(grep -E 'Lb1EEv' <<<"$mma")
    clocked=$(awk '{for (i = 1; i < NF; i++) v[$i] = $(i + 1); if (v["CLOCK"] != 0) print}' <<<"$plain")
    unclocked=$(awk '{for (i = 1; i < NF; i++) v[$i] = $(i + 1); if (!(v["CLOCK"] >= 8)) print}' <<<"$traced")
    check '[ -n "$plain" ] && [ -z "$clocked" ]' "no plain mma attention kernel reads a clock:"$'\n'"$clocked"
    check '[ "$(wc -l <<<"$traced")" -eq 28 ] && [ -z "$unclocked" ]' \
        "the 28 traced mma attention kernels (forward 6, dQ 6, dK/dV 16 at d 64 and 128, half of them storing dS) read the clocks ($(wc -l <<<"$traced") found):"$'\n'"$unclocked"
    # the backward's pipelined strips (SG_ATTN_BWD_PIPE=1; SP, the template
    # argument before TR in dQ, Lb1ELb0EE, and before DS and TR in dK/dV,
    # Lb1ELb[01]ELb0EE): at d 64, dK/dV 8 (4 storing dS) and dQ 4, each
    # laying out twice its plain twin's score products before its first
    # exponential (sass_mix's LEAD): the next strip's products go before
    # this strip's softmax, and ptxas did not sink them back
    piped=$(grep -E '^_Z[0-9]+attn_bwd_(dq_mma_kernel.*Lb1ELb0EEv|dkdv_mma_kernel.*Lb1ELb[01]ELb0EEv)' <<<"$mma")
    unpiped=$(awk 'function key(n,  a, c, i, k, s) { # the name with SP blanked: dQ <DP, MT, LB, SP, TR>, dK/dV <DP, LB, GK, SP, DS, TR>
                       sub(/EvPf.*/, "", n); c = split(n, a, "ELb"); k = n ~ /dkdv/ ? c - 2 : c - 1
                       sp = substr(a[k], 1, 1); a[k] = "X" substr(a[k], 2); s = a[1]
                       for (i = 2; i <= c; i++) s = s "ELb" a[i]
                       return s }
                   NR == FNR { n = key($1); if (sp == "0" && $1 ~ /Lb0EEv/) lead[n] = $NF; next }
                   { n = key($1); if (!(n in lead) || $NF != 2 * lead[n]) print $1, "LEAD", $NF, "plain", lead[n] }' \
              <(cat <<<"$mma") <(cat <<<"$piped"))
    check '[ "$(wc -l <<<"$piped")" -eq 12 ] && [ -z "$unpiped" ]' \
        "the 12 pipelined mma backward kernels issue two strips' score products before the first exponential ($(wc -l <<<"$piped") found):"$'\n'"$unpiped"
    # a tile off the diagonal runs a copy of the step with no per-strip
    # branches (docs/cuda.md, "Issue cycles from the control codes"): at d 64
    # the plain kernels hold a straight run of products (sass_mix's RUN) of
    # a whole tile's scores in the forward (32 a m-tile), two strips in the
    # dQ kernel (48 a m-tile; unrolled by two) and at least two strips in
    # the dK/dV kernel (64), and a tile in the dQ kernel that reads the
    # stored dS (32 a m-tile).  With the strips under branches nvcc guarded
    # the products with WARPSYNCs: runs of 8 or 16 (forward), 16 or 32 (dQ),
    # 16 (dK/dV), 2 or 8 (stored dS)
    short=$(awk '{for (i = 1; i < NF; i++) v[$i] = $(i + 1); n = $1
                  if (n ~ /attn_fwd_mma_kernelILi64ELi[12]ELb[01]ELb0EEv/) want = 32 * substr(n, index(n, "ELi") + 3, 1)
                  else if (n ~ /attn_bwd_dq_mma_kernelILi64ELi[12]ELb[01]ELb0ELb0EEv/) want = 48 * substr(n, index(n, "ELi") + 3, 1)
                  else if (n ~ /attn_bwd_dkdv_mma_kernelILi64ELb[01]ELi[012]ELb0ELb[01]ELb0EEv/) want = 64
                  else if (n ~ /attn_bwd_dq_stored_kernelILi64ELi[12]EEv/) want = 32 * substr(n, index(n, "ELi") + 3, 1)
                  else next
                  k++; if (v["RUN"] < want) print n, "RUN", v["RUN"], "want", want } END { print k + 0, "kernels" }' \
           <(grep -E '^_Z[0-9]+attn_bwd_dq_stored_kernel' <<<"$mix"; cat <<<"$mma"))
    check '[ "$short" = "18 kernels" ]' \
        "the 18 plain d 64 mma attention kernels run a tile off the diagonal without per-strip branches:"$'\n'"$short"
    # a value gate's backward in the dK/dV epilogue reads v, w_h and g
    # before it uses any (attn_gate_load): at most 3 more waits for global
    # loads (sass_mix's GWAIT) than the ungated twin, where reading them
    # inline with the sums cost 34 (norm gate) and 68 (projection) more
    gated=$(grep -E '^_Z[0-9]+attn_bwd_dkdv_mma_kernelILi[0-9]+ELb0ELi[12]E' <<<"$mma")
    slowgate=$(awk 'NR == FNR { n = $1; sub(/EvPf.*/, "", n); if (n ~ /ELb0ELi0E/) w[n] = $(NF - 2); next }
                    { n = $1; sub(/EvPf.*/, "", n); t = n; sub(/ELi[12]E/, "ELi0E", t)
                      if (!(t in w) || $(NF - 2) > w[t] + 3) print $1, "GWAIT", $(NF - 2), "ungated", w[t] }' \
               <(cat <<<"$mma") <(cat <<<"$gated"))
    check '[ "$(wc -l <<<"$gated")" -eq 28 ] && [ -z "$slowgate" ]' \
        "the 28 gated dK/dV kernels wait for global loads at most 3 times more than their ungated twins ($(wc -l <<<"$gated") found):"$'\n'"$slowgate"
    # the next tile's row statistics (LSE, D) and log-bias come by cp.async
    # in the tile's own group (attn_cp_rowstats, attn_cp_f32s), read where
    # they are used: an ungated mma tile kernel waits for a global load at
    # most once (its prologue).  Loaded and stored to shared memory as each
    # step began, they made every step wait one round trip at the barrier
    # (GWAIT 2 in every dK/dV kernel, 2 in dQ and 3 in the forward with a
    # log-bias: 36 kernels)
    ungated=$(grep -vE 'ELb0ELi[12]E' <<<"$mma")
    waiting=$(awk '$(NF - 2) > 1 { print $1, "GWAIT", $(NF - 2) }' <<<"$ungated")
    check '[ "$(wc -l <<<"$ungated")" -eq 72 ] && [ -z "$waiting" ]' \
        "the $(wc -l <<<"$ungated") ungated mma attention kernels wait for a global load at most once:"$'\n'"$waiting"
    # the memory-bound kernels issue their loads before they wait on any
    # (docs/cuda.md, "Elementwise ops at bandwidth", "LayerNorm rows in
    # registers"): GELU's 16-byte kernels and the register LayerNorm's
    # backward at most twice (sass_mix's GWAIT counts every path of a
    # branch), its forward at most 5 times (the row, then w and bias, on
    # the paths with and without a bias), 3 at C 768 (NV 6).  With a load
    # and a store a float4 group the residual forward waited 19 times at C
    # 768, and with a bf16 pair a load GELU's backward 4
    mb=$(python3 tests/gpu/sass_mix.py kernels/cuda/layernorm.cu kernels/cuda/elementwise.cu 2>&1); rc=$?
    bound=$(awk '{ n = $1; w = $(NF - 2); lim = -1
                   if (n ~ /^_Z[0-9]+gelu_(fwd|bwd)8_k/) lim = 2
                   else if (n ~ /^_Z[0-9]+ln_bwd_reg_k/) lim = 2
                   else if (n ~ /^_Z[0-9]+ln_fwd_reg_kILi6E/) lim = 3
                   else if (n ~ /^_Z[0-9]+ln_fwd_reg_k/) lim = 5
                   if (lim < 0) next
                   k++; if (w > lim) print n, "GWAIT", w, "limit", lim } END { print k + 0, "kernels" }' <<<"$mb")
    check '[ $rc -eq 0 ] && [ "$bound" = "76 kernels" ]' \
        "GELU's 12 16-byte kernels, LayerNorm's 32 register backwards and 32 register forwards wait for global loads within their limits (exit $rc):"$'\n'"$bound"
    # the warpgroup kernels, in Hopper's own target (sm_90a): their
    # products are HGMMA (a kernel with none fell back to trapping
    # stubs), d / 16 + 4 of them in a forward, 2 (d / 16) + 8 in the
    # pipelined one (SG_ATTN_WGMMA=2: its first pass, its loop, its last
    # P V) and 16 in a dK/dV kernel, the same rule for their exponentials;
    # no register-A product in a loop reads A registers the loop did not
    # write before it, but for a carried operand (--fresh-a: ptxas handed
    # such registers to other values, wgmma_ptx.h's wg_fresh); and ptxas
    # serialises none of their products (--no-serial: the pipelined
    # forward's overlap would be gone)
    wg=$(python3 tests/gpu/sass_mix.py --arch 90a --filter wgmma --fresh-a --no-serial \
         kernels/cuda/attention_fwd_wgmma.cu kernels/cuda/attention_bwd_mma.cu 2>&1); rc=$?
    check '[ $rc -eq 0 ] && [ "$(grep -c "^_Z[0-9]*attn_fwd_wgmma_kernel" <<<"$wg")" = 8 ] && [ "$(grep -c "^_Z[0-9]*attn_fwd_wgmma_pipe_kernel" <<<"$wg")" = 8 ] && [ "$(grep -c "^_Z[0-9]*attn_bwd_dkdv_wgmma_kernel" <<<"$wg")" = 8 ]' \
        "sass_mix.py --arch 90a --fresh-a --no-serial lists the 8 warpgroup forwards, 8 pipelined ones (half of each traced) and 8 dK/dV kernels (4 pipelined), no stale A operand, nothing serialised (exit $rc):"$'\n'"$wg"
    # the forwards' phase clocks in their traced instantiations alone (the
    # last template argument, as for the mma kernels above)
    wgf=$(grep -E '^_Z[0-9]+attn_fwd_wgmma(_pipe)?_kernel' <<<"$wg")
    clocked=$(grep -E 'Lb0EEv' <<<"$wgf" | awk '{for (i = 1; i < NF; i++) v[$i] = $(i + 1); if (v["CLOCK"] != 0) print}')
    unclocked=$(grep -E 'Lb1EEv' <<<"$wgf" | awk '{for (i = 1; i < NF; i++) v[$i] = $(i + 1); if (!(v["CLOCK"] >= 8)) print}')
    check '[ "$(grep -c "Lb1EEv" <<<"$wgf")" -eq 8 ] && [ -z "$clocked" ] && [ -z "$unclocked" ]' \
        "the 8 traced warpgroup forwards read the clocks and the 8 plain ones do not:"$'\n'"$clocked$unclocked"
    bad=$(awk '{for (i = 1; i < NF; i++) v[$i] = $(i + 1); d64 = $1 ~ /ILi64E/;
               want = $1 ~ /pipe/ ? (d64 ? 16 : 24) : $1 ~ /dkdv/ ? 16 : (d64 ? 8 : 12);
               if (v["HGMMA"] != want || v["HMMA"] != 0 || !(v["MUFU"] > 0 && 2 * v["FSETP"] < v["MUFU"])) print}' <<<"$wg")
    check '[ -z "$bad" ]' "every warpgroup kernel has its HGMMA products, no HMMA, and fewer than one FSETP per two MUFU:"$'\n'"$bad"
    # and the rule for the next tile's row statistics and log-bias above
    # (14 of these 20 waited 2 to 4 times before they came by cp.async)
    wgu=$(grep -E '^_Z[0-9]+attn_(fwd_wgmma|fwd_wgmma_pipe|bwd_dkdv_wgmma)_kernel' <<<"$wg" | grep -vE 'ELb0ELi[12]E')
    waiting=$(awk '$(NF - 2) > 1 { print $1, "GWAIT", $(NF - 2) }' <<<"$wgu")
    check '[ "$(wc -l <<<"$wgu")" -eq 20 ] && [ -z "$waiting" ]' \
        "the $(wc -l <<<"$wgu") ungated warpgroup attention kernels wait for a global load at most once:"$'\n'"$waiting"
    # the stale-A rule itself, on three listings in cuobjdump's form: run 5's
    # fault (Q loaded before the loop into R88, whose registers the loop
    # then gives to P), a loop-invariant A operand, and the pipelined
    # forward's carried P (written after the P V that reads it, for the
    # next pass), which alone passes
    S=$(mktemp -d)
    listing() { # name, then "address instruction" lines
        local name=$1
        shift
        printf '\n\tFunction : %s\n' "$name"
        for l in "$@"; do printf '        /*%s*/                   %s ;\n' "${l%% *}" "${l#* }"; done
    }
    listing fwd_bug "0010 LDSM.16.M88.4 R88, [R3]" "0020 WARPGROUP.ARRIVE" \
        "0030 HGMMA.64x64x16.F32.BF16 R24, R88, gdesc[UR4], RZ" "0040 F2FP.BF16.F32.PACK_AB R88, R25, R24" \
        "0050 F2FP.BF16.F32.PACK_AB R89, R27, R26" "0060 F2FP.BF16.F32.PACK_AB R90, R29, R28" \
        "0070 F2FP.BF16.F32.PACK_AB R91, R31, R30" "0080 HGMMA.64x64x16.F32.BF16 R56, R88, gdesc[UR8].tnspB, R56" \
        "0090 @P0 BRA 0x20" >"$S/bug.sass"
    listing fwd_invariant "0010 LDSM.16.M88.4 R40, [R3]" "0020 WARPGROUP.ARRIVE" \
        "0030 HGMMA.64x64x16.F32.BF16 R24, R40, gdesc[UR4], RZ" "0040 @P0 BRA 0x20" >"$S/invariant.sass"
    listing fwd_carried "0020 LDSM.16.M88.4 R40, [R3]" "0030 WARPGROUP.ARRIVE" \
        "0040 HGMMA.64x64x16.F32.BF16 R24, R40, gdesc[UR4], RZ" "0050 HGMMA.64x64x16.F32.BF16 R56, R88, gdesc[UR8].tnspB, R56" \
        "0060 F2FP.BF16.F32.PACK_AB R88, R25, R24" "0070 F2FP.BF16.F32.PACK_AB R89, R27, R26" \
        "0080 F2FP.BF16.F32.PACK_AB R90, R29, R28" "0090 F2FP.BF16.F32.PACK_AB R91, R31, R30" \
        "00a0 @P0 BRA 0x20" >"$S/carried.sass"
    for f in bug invariant carried; do
        out=$(python3 tests/gpu/sass_mix.py --sass --fresh-a "$S/$f.sass" 2>&1); rc=$?
        if [ $f = carried ]; then
            check '[ $rc -eq 0 ] && ! grep -q stale <<<"$out"' "sass_mix.py --fresh-a passes a carried A operand (exit $rc): $out"
        else
            check '[ $rc -eq 1 ] && grep -q "stale A operand in fwd_$f: 0030: HGMMA" <<<"$out"' \
                "sass_mix.py --fresh-a flags the $f listing at its first product (exit $rc): $out"
        fi
    done
    # GWAIT on listings counted by hand: each load used before the next is
    # issued waits once per load (3: an FFMA, a shuffle, a store reading its
    # register); the same loads issued first, once (the 64-bit load's second
    # register counts); a cp.async (LDGSTS) or a load never read, never
    listing gw_serial "0010 LDG.E R2, desc[UR4][R10.64]" "0020 FFMA R6, R2, R2, R6" \
        "0030 @!P0 LDG.E.U16 R3, desc[UR4][R10.64+0x2]" "0040 SHFL.BFLY PT, R7, R3, 0x1, 0x1f" \
        "0050 LDG.E R4, desc[UR4][R10.64+0x4]" "0060 STG.E desc[UR4][R12.64], R4" >"$S/gw_serial.sass"
    listing gw_batched "0010 LDG.E R2, desc[UR4][R10.64]" "0020 LDG.E.64 R4, desc[UR4][R10.64+0x8]" \
        "0030 LDGSTS.E.BYPASS.128 [R17], desc[UR4][R14.64]" "0040 FFMA R6, R17, R17, R6" \
        "0050 FFMA R6, R5, R2, R6" "0060 FADD R6, R4, R6" >"$S/gw_batched.sass"
    listing gw_none "0010 LDG.E R2, desc[UR4][R10.64]" "0020 FADD R6, R6, R6" "0030 EXIT" >"$S/gw_none.sass"
    gw=$(python3 tests/gpu/sass_mix.py --sass "$S/gw_serial.sass" "$S/gw_batched.sass" "$S/gw_none.sass" 2>&1)
    gw=$(awk '{print $1, $(NF - 2)}' <<<"$gw" | tr '\n' ' ')
    check '[ "$gw" = "gw_serial 3 gw_batched 1 gw_none 0 " ]' "sass_mix.py's GWAIT on hand-counted listings: $gw"
    rm -rf "$S"
    # the serialisation check itself: a product issued in a branch that
    # differs between threads (tests/gpu/wgmma_serial_fixture.cu)
    ser=$(python3 tests/gpu/sass_mix.py --arch 90a --no-serial tests/gpu/wgmma_serial_fixture.cu 2>&1); rc=$?
    check '[ $rc -eq 1 ] && grep -q "serialised products in _Z[0-9]*wgmma_serial_fixture_kernel.*: C75" <<<"$ser"' \
        "sass_mix.py --no-serial fails on a kernel whose products ptxas serialises (exit $rc):"$'\n'"$ser"
fi
if ! nvidia-smi -L >/dev/null 2>&1; then
    W=$(mktemp -d)
    "$B/sgsynth" --out "$W/d" --vocab 512 --val-tokens 20000 --train-tokens 60000 --shard-tokens 60000 >/dev/null
    out=$("$CB/sgtrain" train --tier test --data "$W/d" --out "$W/run" 2>&1); rc=$?
    check '[ $rc -eq 1 ] && grep -q "no CUDA device.*use the CPU build, build/sgtrain" <<<"$out" && [ ! -e "$W/run/checkpoint.bin" ]' "without a GPU: a clear message, exit 1, no checkpoint ($rc: $out)"
    rm -rf "$W"
fi
finish
