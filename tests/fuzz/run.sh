#!/usr/bin/env bash
# Fuzzing the input parsers (docs/fuzzing.md).
#
#   bash tests/fuzz/run.sh replay BUILD_DIR
#       every input of tests/fuzz/corpus/TARGET and of the seeds
#       (tests/fuzz/seeds.sh) once through each target, built with gcc
#       and ASan/UBSan ($B/san/fuzz/fuzz_TARGET): part of `make test`
#   bash tests/fuzz/run.sh fuzz BUILD_DIR SECONDS [TARGET...]
#       libFuzzer ($B/fuzz/fuzz_TARGET, `make fuzz`) for SECONDS per target,
#       one job per core; the corpora grow in $B/fuzz/corpus/TARGET, and a
#       crash is saved in $B/fuzz/crashes/
#   bash tests/fuzz/run.sh smoke BUILD_DIR RUNS
#       the same libFuzzer binaries for a fixed number of runs each, from
#       a fixed seed and a fresh corpus, so that a given build always does
#       the same work (tests/e2e_fuzz.sh)
set -u
mode=${1:?usage: run.sh replay|fuzz|smoke BUILD_DIR [SECONDS|RUNS [TARGET...]]}
B=${2:-build}
case $mode in replay|fuzz|smoke) ;; *) echo "run.sh: unknown mode $mode (replay, fuzz or smoke)"; exit 2 ;; esac
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
all=$(for t in tests/fuzz/fuzz_*.c; do t=${t##*/fuzz_}; echo "${t%.c}"; done)
seeds=$B/fuzz/seeds
bash tests/fuzz/seeds.sh "$B" "$seeds" || { echo "fuzz: the seeds could not be made"; exit 1; }
export OMP_NUM_THREADS=1

case $mode in
replay)
    export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
    export LSAN_OPTIONS=suppressions=$root/tests/lsan.supp
    passed=0 failed=0
    for t in $all; do
        log=$(mktemp)
        inputs=("$seeds/$t")
        [ -d tests/fuzz/corpus/"$t" ] && inputs+=(tests/fuzz/corpus/"$t")
        if "$B/san/fuzz/fuzz_$t" "${inputs[@]}" >"$log" 2>&1; then
            n=$(sed -nE "s/^fuzz_$t: ([0-9]+) passed, 0 failed$/\1/p" "$log")
            passed=$((passed + ${n:-0}))
            echo "fuzz_$t: ${n:-0} inputs"
        else
            failed=$((failed + 1))
            echo "fuzz_$t: FAILED"; tail -n 30 "$log" | sed 's/^/    /'
        fi
        rm -f "$log"
    done
    echo "fuzz-replay: $passed passed, $failed failed"
    [ "$failed" -eq 0 ]
    ;;
fuzz|smoke)
    limit=${3:-60}; shift 3 2>/dev/null || shift $#
    targets=${*:-$all}
    if [ "$mode" = smoke ]; then
        budget=(-runs="$limit" -seed=1)
        work=$(mktemp -d "${TMPDIR:-/tmp}/sg_fuzzsmoke_XXXXXX")
        trap 'rm -rf "$work"' EXIT
    else
        budget=(-max_total_time="$limit")
        work=$B/fuzz
    fi
    jobs=$(env -u OMP_NUM_THREADS nproc)  # nproc obeys OMP_NUM_THREADS
    mkdir -p "$B/fuzz/crashes"
    export ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
    export LSAN_OPTIONS=suppressions=$root/tests/lsan.supp
    one() {
        local t=$1 corpus=$work/corpus/$1 log=$work/$1.log
        mkdir -p "$corpus" tests/fuzz/corpus/"$t"
        # -rss_limit_mb: a malformed file that makes a reader allocate
        # gigabytes is a finding too; -timeout: so is one that hangs it
        "$B/fuzz/fuzz_$t" "$corpus" tests/fuzz/corpus/"$t" "$seeds/$t" "${budget[@]}" \
            -rss_limit_mb=2048 -timeout=20 -max_len=65536 -print_final_stats=1 \
            -artifact_prefix="$B/fuzz/crashes/$t-" >"$log" 2>&1
        local rc=$?
        local execs=$(sed -nE 's/^stat::number_of_executed_units: *([0-9]+)/\1/p' "$log")
        local cov=$(grep -oE 'cov: [0-9]+' "$log" | tail -n 1)
        if [ $rc -eq 0 ]; then
            echo "fuzz_$t: ${execs:-?} runs, ${cov:-cov: ?}, no crash"
            [ "$mode" = smoke ] && echo "fuzz_$t: 1 passed, 0 failed"
        else
            [ "$mode" = smoke ] && { echo "fuzz_$t: 0 passed, 1 failed"; tail -n 40 "$log"; }
            echo "fuzz_$t: CRASH after ${execs:-?} runs (log $log):"
            grep -E "ERROR|SUMMARY|property does not hold|artifact_prefix|Test unit written" "$log" | head -n 8 | sed 's/^/    /'
        fi
        return $rc
    }
    status=0 running=0
    for t in $targets; do
        [ -x "$B/fuzz/fuzz_$t" ] || { echo "fuzz: no target $t (known: $(echo $all))"; status=1; continue; }
        one "$t" &
        running=$((running + 1))
        if [ "$running" -ge "$jobs" ]; then wait -n || status=1; running=$((running - 1)); fi
    done
    while [ "$running" -gt 0 ]; do wait -n || status=1; running=$((running - 1)); done
    exit $status
    ;;
esac
