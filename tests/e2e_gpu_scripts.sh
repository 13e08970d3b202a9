#!/usr/bin/env bash
# The parts of the GPU scripts that decide something without a GPU:
# tests/gpu/ab_choose.py, which picks the A/B run that tests/gpu/device.sh's
# benchmarks then run under, on hand-written bench_gpu tables (the row
# format of tests/gpu/bench_gpu.c).
set -u
B=${1:-build}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
E2E_NAME=e2e_gpu_scripts
source "$(dirname "$0")/lib.sh"
command -v python3 >/dev/null || { bad "python3 not found (tools/install-deps.sh installs it)"; finish; }
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
CHOOSE="python3 tests/gpu/ab_choose.py"

# one bench_gpu run's table: tier, then "arm tokens/s [FAILED: why]" pairs
table() {
    local tier=$1
    shift
    echo "training steps: 10 warm-up + 2 timed, lr 6e-04, random tokens"
    printf '%-6s %-10s %4s %5s %9s %9s %9s %11s\n' tier arm B T ms/step "(min" "median)" tokens/s
    while [ $# -gt 0 ]; do
        case $2 in
        error) printf '%-6s %-10s error: out of memory\n' "$tier" "$1" ;;
        *) printf '%-6s %-10s %4d %5d %9.2f %9.2f %9.2f %11.0f %8s %7.1f %8s %7.3f %7.1f %7.2f%s\n' "$tier" "$1" 8 \
            1024 31.9 31.5 31.8 "$2" "" 330.3 "20.7%" 7.123 4.2 14.61 "${3:+  FAILED: $3}" ;;
        esac
        shift 3
    done
}
table 124M baseline 200000 "" combo2 190000 "" >"$W/defaults.txt"
table 124M baseline 300000 "" combo2 291000 "" >"$W/mma.txt"
table 124M baseline 299000 "" combo2 291000 "" >"$W/nokeep.txt"
table 124M baseline 400000 "" combo2 390000 "loss not finite" >"$W/failed.txt"
table 124M baseline 500000 "" combo2 error "" >"$W/error.txt"
table 10M baseline 900000 "" combo2 880000 "" >"$W/othertier.txt"

out=$($CHOOSE 124M "=$W/defaults.txt" "SG_ATTN=mma=$W/mma.txt" "SG_ATTN=mma SG_MATMUL_KEEP=0=$W/nokeep.txt" 2>"$W/err")
rc=$?
check '[ $rc -eq 0 ] && [ "$out" = "SG_ATTN=mma" ]' "the fastest run by baseline + combo2 (exit $rc): '$out'"
check 'grep -q "SG_ATTN=mma .*baseline 300000 + combo2 291000 = 591000 tokens/s" "$W/err" &&
       grep -q "(defaults) .*= 390000 tokens/s" "$W/err"' "the table of every run on stderr:"$'\n'"$(cat "$W/err")"

out=$($CHOOSE 124M "=$W/defaults.txt" "SG_ATTN=mma=$W/failed.txt" "SG_MATMUL_TUNE=1=$W/error.txt" 2>"$W/err")
rc=$?
check '[ $rc -eq 0 ] && [ -z "$out" ] && [ "$(grep -c "no result for both arms" "$W/err")" = 2 ]' \
    "a failed row or an error row disqualifies a faster run; the defaults win, as an empty line (exit $rc): '$out'"$'\n'"$(cat "$W/err")"

out=$($CHOOSE 124M "SG_ATTN=mma=$W/othertier.txt" "SG_ATTN=mma=$W/missing.txt" 2>"$W/err")
rc=$?
check '[ $rc -eq 1 ] && [ -z "$out" ] && grep -q "missing.txt" "$W/err"' \
    "no run with both arms at the tier (another tier's rows, a missing file): exit 1, nothing chosen (exit $rc)"$'\n'"$(cat "$W/err")"

expect 2 "usage: ab_choose.py TIER" -- $CHOOSE 124M
expect 2 "usage: ab_choose.py TIER" -- $CHOOSE 124M "$W/mma.txt"
finish
