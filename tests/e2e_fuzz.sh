#!/usr/bin/env bash
# The libFuzzer build of the fuzz targets (`make fuzz`, docs/fuzzing.md):
# it compiles warning-free with clang, and every target runs a fixed number
# of inputs from a fixed seed (tests/fuzz/run.sh smoke) with no crash, no
# sanitizer report and no broken property.  The regression half, every
# corpus input under gcc's ASan/UBSan, runs in tests/run.sh's sanitizer
# part.
set -u
B=${1:-build}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
E2E_NAME=e2e_fuzz
source "$(dirname "$0")/lib.sh"
RUNS=${SG_FUZZ_SMOKE_RUNS:-1500}

if ! command -v clang >/dev/null; then
    bad "clang is not installed: install clang libclang-rt-14-dev libomp-dev (tools/install-deps.sh does)"
    finish
fi
log=$(env -u MAKEFLAGS -u MAKELEVEL -u MFLAGS make -s -j"$(nproc 2>/dev/null || echo 2)" B="$B" fuzz-targets 2>&1); rc=$?
check '[ $rc -eq 0 ]' "make fuzz-targets builds"$'\n'"$(tail -n 30 <<<"$log")"
check '! grep -v "^make" <<<"$log" | grep -qiE "warning|error"' "the clang build is warning-free"$'\n'"$(grep -iE -m5 'warning|error' <<<"$log")"
targets=$(ls tests/fuzz/fuzz_*.c | sed 's|.*/fuzz_||; s|\.c$||')
for t in $targets; do check "[ -x $B/fuzz/fuzz_$t ]" "$B/fuzz/fuzz_$t built"; done

out=$(bash tests/fuzz/run.sh smoke "$B" "$RUNS" 2>&1); rc=$?
echo "$out" | grep -v ': [0-9]* passed, [0-9]* failed$'
check '[ $rc -eq 0 ]' "every target runs $RUNS inputs without a finding"$'\n'"$out"
for t in $targets; do
    check 'grep -q "^fuzz_$t: 1 passed, 0 failed$" <<<"$out"' "fuzz_$t ran its $RUNS inputs"
done

expect 1 'fuzz: no target nosuch \(known: .*config.*\)' -- bash tests/fuzz/run.sh smoke "$B" 10 nosuch
expect 2 'unknown mode bogus \(replay, fuzz or smoke\)' -- bash tests/fuzz/run.sh bogus "$B"
finish
