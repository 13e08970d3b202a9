#!/usr/bin/env bash
# Data parallelism on this machine (BENCH_ONLY=dist): tokens/s of one run
# on 1 and 2 ranks (one OpenMP thread each), and with 2 ranks the gradient
# sum after the backward (--bucket_mb 0) against the sum overlapped with it
# (buckets of BENCH_DIST_BUCKETS MiB; 25 is the default), then the same
# with ZeRO-1 (--zero 1: the reduce-scatter after the backward, or per
# bucket during it; the parameter all-gather follows the step).  Median step
# tokens/s over steps 3..N and the exposed collective time per step
# (SG_DIST_TIMES: the host's time in the collectives, not hidden behind the
# backward), BENCH_DIST_REPS repetitions each, alternating the settings so
# that drift in the machine's speed hits all alike.
set -u
B=${1:-build}
OUT=${OUT:-$B/bench-results}
TIER=${BENCH_DIST_TIER:-cpu-tiny}
STEPS=${BENCH_DIST_STEPS:-20}
REPS=${BENCH_DIST_REPS:-2}
BUCKETS=${BENCH_DIST_BUCKETS:-2 25}
DATA=${BENCH_DIST_DATA:-data/demo-gpt2}
mkdir -p "$OUT"
export OMP_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
command -v mpirun >/dev/null || { echo "(mpirun missing: the data-parallel benchmark is skipped)"; exit 0; }
[ -f "$DATA/val.bin" ] || { echo "(no $DATA: make data; the data-parallel benchmark is skipped)"; exit 0; }
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
run() { # name ranks extra-flags...
    local name=$1 n=$2; shift 2
    rm -rf "$W/$name"
    mpirun --oversubscribe -x OMP_NUM_THREADS -x SG_DIST_TIMES=1 -n "$n" "$B/sgtrain" train --tier "$TIER" \
        --micro_batch 8 --grad_accum 2 --iters "$STEPS" --warmup 1 --val_every 0 --val_batches_final 1 --ckpt_every 0 \
        --data "$DATA" --out "$W/$name" "$@" 2>"$W/$name.log" >/dev/null || { echo "$name failed:"; tail -n 5 "$W/$name.log"; exit 1; }
    local tps comm
    tps=$(grep '"tokens_per_s"' "$W/$name/metrics.jsonl" | sed -E 's/.*"tokens_per_s":([0-9.]+).*/\1/' | tail -n +3 | sort -g |
        awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }')
    comm=$(sed -nE 's/.*rank 0 of [0-9]+: .* collectives ([0-9.]+) ms a step.*/\1/p' "$W/$name.log")
    echo "$name $tps ${comm:--}" >>"$W/all"
}
for rep in $(seq 1 "$REPS"); do
    run one 1
    run after 2 --bucket_mb 0
    for b in $BUCKETS; do run "overlap-$b" 2 --bucket_mb "$b"; done
    run zero-after 2 --zero 1 --bucket_mb 0
    for b in $BUCKETS; do run "zero-overlap-$b" 2 --zero 1 --bucket_mb "$b"; done
done
{
    echo "data parallelism, $TIER, micro-batch 8 x 2, $STEPS steps, median step tokens/s over steps 3..$STEPS ($REPS runs each)"
    echo "(exposed ms/step: the host's time in the gradient collectives, and with zero 1 in the parameter all-gather too)"
    printf "%-19s %-24s %-26s %s\n" setting tokens/s "vs 1 rank" "exposed ms/step"
    base=$(awk '$1 == "one" { s += $2; n++ } END { print s / n }' "$W/all")
    for name in one after $(for b in $BUCKETS; do echo "overlap-$b"; done) zero-after $(for b in $BUCKETS; do echo "zero-overlap-$b"; done); do
        awk -v n="$name" -v base="$base" '$1 == n { t = t (t ? " / " : "") sprintf("%.0f", $2); c = c (c ? " / " : "") $3; s += $2; k++ }
            END { printf "%-19s %-24s %-26s %s\n", n, t, sprintf("%.2fx (%.0f%% of 2x)", s / k / base, 50 * s / k / base), c }' "$W/all"
    done
} | tee "$OUT/dist.txt"
