#!/usr/bin/env bash
# The whole test suite: every unit/reference test binary (float and double
# builds), the end-to-end CLI tests, then every test binary again built with
# ASan/UBSan and every fuzz target over its corpus (tests/fuzz/run.sh replay).
# Each part prints "name: N passed, N failed"; this script adds
# them up and ends with the closing line "N passed, N failed".
set -u
B=${1:-build}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
passed=0 failed=0 broken=()

tally() { # name, output file, exit status
    local line p f
    line=$(grep -E '^[^ ]+: [0-9]+ passed, [0-9]+ failed$' "$2" | tail -n 1)
    if [ -z "$line" ]; then
        failed=$((failed + 1)); broken+=("$1 (no summary line, exit $3)"); return
    fi
    p=$(sed -E 's/.*: ([0-9]+) passed.*/\1/' <<<"$line")
    f=$(sed -E 's/.*passed, ([0-9]+) failed/\1/' <<<"$line")
    passed=$((passed + p)); failed=$((failed + f))
    if [ "$f" -gt 0 ] || [ "$3" -ne 0 ]; then
        broken+=("$1 ($f failed, exit $3)")
        [ "$f" -eq 0 ] && failed=$((failed + 1))
    fi
}

run() { # label, command...
    local label=$1; shift
    local log; log=$(mktemp)
    local t0=$SECONDS
    "$@" >"$log" 2>&1
    local rc=$?
    tally "$label" "$log" "$rc"
    printf '%-28s %s  (%ds)\n' "$label" "$(grep -E ': [0-9]+ passed, [0-9]+ failed$' "$log" | tail -n 1)" $((SECONDS - t0))
    if [ "$rc" -ne 0 ]; then sed 's/^/    /' "$log" | tail -n 40; fi
    rm -f "$log"
}

for t in "$B"/tests/test_* "$B"/tests/dtest_*; do
    [ -x "$t" ] && run "$(basename "$t")" "$t"
done
for s in tests/e2e_*.sh; do
    run "$(basename "$s" .sh)" bash "$s" "$B"
done
if [ -z "${SG_NO_SAN:-}" ]; then
    export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
    export LSAN_OPTIONS=suppressions=$root/tests/lsan.supp
    for t in "$B"/san/tests/*; do
        [ -x "$t" ] && run "asan+ubsan $(basename "$t")" "$t"
    done
    # every parser over its fuzzing corpus and seeds (tests/fuzz/run.sh)
    run "asan+ubsan fuzz replay" bash tests/fuzz/run.sh replay "$B"
fi

echo
if [ ${#broken[@]} -gt 0 ]; then
    echo "failing parts:"; printf '  %s\n' "${broken[@]}"
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
