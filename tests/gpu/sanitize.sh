#!/usr/bin/env bash
# make sanitize-gpu: the CUDA binaries under NVIDIA's compute-sanitizer, on a
# machine with a GPU.  Ends with "sanitize: N passed, N failed, N skipped".
# test-gpu compares results with the CPU; it cannot see a race on shared
# memory that happened to give the right numbers, a read past the end of a
# buffer that held harmless values, or a __syncthreads some threads of the
# block never reach.  The sanitizer's four tools look for exactly these:
#   racecheck  shared-memory hazards, including a cp.async tile read before
#              its wait_group (the SG_ATTN=mma tiles' double buffering);
#   memcheck   out-of-bounds and misaligned device accesses, CUDA API errors;
#   synccheck  barriers reached by only part of a block or warp;
#   initcheck  device memory read before anything wrote it.
# Each case is one `sgtrain grads` (forward and backward, head dim 64, T 64)
# or a 2-step `sgtrain train` (AdamW, gradient norm, classifier, final
# evaluation; head dim 16) of build/cuda/sgtrain under one tool, with
# SG_ATTN=mma or wmma.  In order of value: the mma tiles of combo2 under
# racecheck, memcheck, synccheck; racecheck of sinktoken; wmma combo2 under
# memcheck and racecheck; the training run under memcheck; initcheck; memcheck
# of renorm; initcheck of shared memory (where the sanitizer has
# --initcheck-address-space); then racecheck and memcheck of the other arms.
# Variant dqs runs with SG_ATTN_DQ=stored (dQ from the dS tiles the dK/dV
# kernel stores; initcheck shows that its reader meets no unwritten memory).
# A case passes when the sanitizer exits 0 and its summary reports 0 errors
# (racecheck: "RACECHECK SUMMARY: N hazards displayed (0 errors, ...)", its
# warnings are printed but pass); it fails on any other exit status (99: the
# sanitizer found errors).  A case that runs out of time is skipped, not
# failed.  Logs: $OUT/sanitize/NAME.log when OUT is set (else a temporary
# directory); the first 40 lines of a failing case's log are printed.
#
# The sanitizer: $SANITIZER, else compute-sanitizer on PATH, else
# /usr/local/cuda/bin/compute-sanitizer, else the wheel that
# `tests/gpu/device.sh --pack` carries, unpacked by device.sh into
# $B/sanitizer.  Without one every case is skipped, with a note, and the
# script succeeds.
#
# Time: every case runs under `timeout`, at most SANITIZE_CASE_S (60) seconds,
# and the whole script keeps to SANITIZE_BUDGET_S (90): a case that would
# start with less than SANITIZE_MIN_S (15) seconds left is skipped with a
# note.  SANITIZE_ONLY (an extended regular expression) keeps the cases whose
# names match, e.g. 'racecheck-mma'; SANITIZE_FLAGS adds options to every
# sanitizer command (e.g. --kernel-name-exclude regex=...).
set -u
B=${1:-build}
CB=$B/cuda
BUDGET=${SANITIZE_BUDGET_S:-90}
CAP=${SANITIZE_CASE_S:-60}
MIN=${SANITIZE_MIN_S:-15}
ONLY=${SANITIZE_ONLY:-}
read -ra EXTRA <<<"${SANITIZE_FLAGS:-}"
START=$SECONDS
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
pass=0 fail=0 skip=0
failed=()
note() { echo "note: $*"; }
left() { echo $((BUDGET - (SECONDS - START))); }
summary() {
    [ ${#failed[@]} -eq 0 ] || echo "failed: ${failed[*]}"
    echo "sanitize: $pass passed, $fail failed, $skip skipped"
    [ "$fail" -eq 0 ]
    exit
}

# The cases, "tool tiles arm kind [variant]", most valuable first.
# (tiles wgmma: the mma tiles with SG_ATTN_WGMMA=1, the warpgroup kernels;
# wgmma2: =2, with the pipelined forward; variant dqs: SG_ATTN_DQ=stored;
# bp: SG_ATTN_BWD_PIPE=1, the backward's strips pipelined)
CASES=("racecheck wgmma2 combo2 grads" "memcheck wgmma2 renorm grads" "synccheck wgmma2 combo2 grads"
       "racecheck mma combo2 grads bp" "memcheck mma renorm grads bp"
       "racecheck wgmma combo2 grads" "memcheck wgmma combo2 grads" "synccheck wgmma renorm grads"
       "racecheck mma combo2 grads" "memcheck mma combo2 grads" "synccheck mma combo2 grads"
       "racecheck mma combo2 grads dqs" "initcheck mma combo2 grads dqs" "racecheck mma sinktoken grads" "memcheck wmma combo2 grads" "racecheck wmma combo2 grads"
       "memcheck mma combo2 train" "initcheck mma combo2 grads" "memcheck mma renorm grads"
       "initcheck mma combo2 grads shared")
for arm in sinklogit normgate projgate combo offbyone baseline sinktoken renorm; do
    for tool in racecheck memcheck; do
        new="$tool mma $arm grads"
        for c in "${CASES[@]}"; do [ "$c" = "$new" ] && new=; done
        [ -z "$new" ] || CASES+=("$new")
    done
done
case_name() { # tool tiles arm kind [variant]
    local n=$1
    [ -n "${5:-}" ] && n+=-$5
    n+=-$2-$3
    [ "$4" = train ] && n+=-train
    echo "$n"
}
if [ -n "$ONLY" ]; then
    sel=()
    for c in "${CASES[@]}"; do
        # shellcheck disable=SC2086
        case_name $c | grep -Eq -- "$ONLY" && sel+=("$c")
    done
    CASES=(${sel[@]+"${sel[@]}"})
fi

# The sanitizer
SAN=
if [ -n "${SANITIZER:-}" ]; then
    SAN=$SANITIZER
    [ -x "$SAN" ] || { note "SANITIZER=$SAN is not an executable"; SAN=; }
elif command -v compute-sanitizer >/dev/null 2>&1; then
    SAN=$(command -v compute-sanitizer)
else
    for f in /usr/local/cuda/bin/compute-sanitizer "$B/sanitizer/nvidia/cu13/bin/compute-sanitizer"; do
        [ -x "$f" ] && { SAN=$f; break; }
    done
fi
if [ -z "$SAN" ]; then
    echo "sanitize: compute-sanitizer not found (SANITIZER, PATH, /usr/local/cuda/bin," \
        "$B/sanitizer from tests/gpu/device.sh --pack); every case skipped"
    skip=${#CASES[@]}
    summary
fi
# The wheels' bin/compute-sanitizer is the program itself (13.0 to 13.2) or a
# script starting ../compute-sanitizer/compute-sanitizer (13.5).  The
# program starts the application through TreeLauncherSubreaper beside it;
# without it (the 13.0.x to 13.2.x wheels lack it) the application never
# runs and every case would fail with "couldn't find exit code".
real=$(readlink -f "$SAN")
if [ "$(head -c 2 "$real")" = "#!" ] && [ -x "$(dirname "$real")/../compute-sanitizer/compute-sanitizer" ]; then
    real=$(readlink -f "$(dirname "$real")/../compute-sanitizer/compute-sanitizer")
fi
if [ "$(head -c 4 "$real" | tr -d '\0')" = $'\x7fELF' ] && [ ! -e "$(dirname "$real")/TreeLauncherSubreaper" ]; then
    note "sanitize: $real has no TreeLauncherSubreaper beside it and cannot start a program" \
        "(an incomplete install, such as the 13.0.x wheels); every case skipped"
    skip=${#CASES[@]}
    summary
fi
HELP=$(timeout 30 "$SAN" --help 2>&1)
echo "compute-sanitizer: $SAN, $(timeout 30 "$SAN" --version 2>&1 | grep -m 1 -i version)"
RACE_OPTS=()
grep -q -- "--racecheck-report" <<<"$HELP" && RACE_OPTS=(--racecheck-report all) # hazards and the analysis
has_shared_initcheck=0
grep -q -- "--initcheck-address-space" <<<"$HELP" && has_shared_initcheck=1

if [ -n "${OUT:-}" ]; then LOGS=$OUT/sanitize; else LOGS=$W/logs; fi
mkdir -p "$LOGS"
if [ ! -x "$CB/sgtrain" ] || [ ! -x "$B/sgsynth" ]; then
    echo "FAIL: setup: $CB/sgtrain or $B/sgsynth missing (make cuda all)"
    fail=1 failed=(setup) skip=${#CASES[@]}
    summary
fi
if ! "$B/sgsynth" --out "$W/data" --vocab 512 --val-tokens 40000 --train-tokens 200000 --shard-tokens 100000 >"$LOGS/sgsynth.log" 2>&1; then
    echo "FAIL: setup: sgsynth failed"; cat "$LOGS/sgsynth.log"
    fail=1 failed=(setup) skip=${#CASES[@]}
    summary
fi

works=0   # some case has shown the sanitizer's summary
broken=   # the log of a case that ended without one, before any had one
run_case() { # tool tiles arm kind [variant]
    local tool=$1 tiles=$2 arm=$3 kind=$4 variant=${5:-} name t t0 rc log opts=() cmd
    name=$(case_name "$@")
    log=$LOGS/$name.log
    if [ -n "$broken" ]; then
        skip=$((skip + 1)); echo "skip $name: the sanitizer did not work in $(basename "$broken")"; return
    fi
    if [ "$variant" = shared ] && [ "$has_shared_initcheck" = 0 ]; then
        skip=$((skip + 1)); echo "skip $name: this sanitizer has no --initcheck-address-space"; return
    fi
    t=$(left)
    if [ "$t" -lt "$MIN" ]; then
        skip=$((skip + 1)); echo "skip $name: $t s of the budget left, needs $MIN"; return
    fi
    [ "$t" -gt "$CAP" ] && t=$CAP
    case $tool in
    racecheck) opts=(${RACE_OPTS[@]+"${RACE_OPTS[@]}"}) ;;
    initcheck) [ "$variant" = shared ] && opts=(--initcheck-address-space shared) ;;
    esac
    if [ "$kind" = train ]; then
        cmd=("$CB/sgtrain" train --tier test --iters 2 --warmup 1 --val_every 0 --ckpt_every 0
             --data "$W/data" --arm "$arm" --out "$W/$name")
    else
        cmd=("$CB/sgtrain" grads --tier test --n_embd 128 --n_head 2 --block_size 64 --arm "$arm"
             --seed 3 --data "$W/data" -o "$W/$name.st")
    fi
    t0=$SECONDS
    SG_ATTN=$(case $tiles in wgmma*) echo mma ;; *) echo "$tiles" ;; esac) \
        SG_ATTN_WGMMA=$(case $tiles in wgmma) echo 1 ;; wgmma2) echo 2 ;; *) echo 0 ;; esac) \
        SG_ATTN_DQ=$([ "$variant" = dqs ] && echo stored || echo recompute) \
        SG_ATTN_BWD_PIPE=$([ "$variant" = bp ] && echo 1 || echo 0) \
        timeout -k 5 "$t" "$SAN" --tool "$tool" --error-exitcode 99 ${opts[@]+"${opts[@]}"} \
        ${EXTRA[@]+"${EXTRA[@]}"} "${cmd[@]}" >"$log" 2>&1
    rc=$?
    t0=$((SECONDS - t0))
    if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
        # what the sanitizer started may outlive it: end this case's processes
        if command -v pgrep >/dev/null; then
            for p in $(pgrep -f -- "$W/"); do kill -9 "$p" 2>/dev/null; done
        fi
        skip=$((skip + 1)); echo "skip $name: timed out after $t0 s (cap $t s)${OUT:+; log $log}"; return
    fi
    local sum
    sum=$(grep -E "(ERROR|RACECHECK) SUMMARY:" "$log" | tail -n 1)
    sum=${sum#*= }
    if [ -n "$sum" ]; then works=1; fi
    if [ "$rc" -eq 0 ] && grep -Eq "ERROR SUMMARY: 0 errors|RACECHECK SUMMARY: [0-9]+ hazards? displayed \(0 errors" <<<"$sum"; then
        pass=$((pass + 1)); echo "pass $name ($t0 s): $sum"
        return
    fi
    fail=$((fail + 1)); failed+=("$name")
    echo "FAIL: $name (exit $rc, $t0 s): ${sum:-no summary from compute-sanitizer}${OUT:+; log $log}"
    head -n 40 "$log" | sed 's/^/    /'
    if [ -z "$sum" ] && [ "$works" = 0 ]; then
        broken=$log
        note "no case has given a sanitizer summary yet; the rest are skipped (the sanitizer may not work here)"
    fi
}
for c in "${CASES[@]}"; do
    # shellcheck disable=SC2086
    run_case $c
done
summary
