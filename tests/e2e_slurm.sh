#!/usr/bin/env bash
# The sweep on a real Slurm cluster: starts a one-node cluster
# (tests/slurm/cluster.sh: munge, slurmctld, slurmd; installed from Debian
# if missing), runs `sbatch slurm/grid.sh sweeps/ci.yaml` end to end,
# pre-empts the long task with the time-limit signal (it checkpoints,
# requeues itself and finishes), checks every result and the report,
# resubmits (nothing left to train), and stops the daemons it started.
# SG_NO_SLURM=1 skips it (a machine where daemons cannot run as root).
set -u
B=${1:-build}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
E2E_NAME=e2e_slurm
source "$(dirname "$0")/lib.sh"
if [ -n "${SG_NO_SLURM:-}" ]; then echo "(SG_NO_SLURM set: the Slurm test is skipped)"; finish; fi
W=$(mktemp -d)
C=$W/cluster
cleanup() { bash tests/slurm/cluster.sh stop "$C" >/dev/null 2>&1; rm -rf "$W"; }
trap cleanup EXIT
if ! env_line=$(bash tests/slurm/cluster.sh start "$C" 2>"$W/start.log"); then
    cat "$W/start.log" >&2
    bad "the Slurm cluster did not start (see above)"; finish
fi
eval "$env_line"
ok
export SG_SGSWEEP=$ROOT/$B/sgsweep

# the sweep's data and a clean output directory
[ -f data/ci-synth/val.bin ] || "$B/sgsynth" --out data/ci-synth --vocab 512 --val-tokens 20000 --train-tokens 100000 --shard-tokens 50000 >/dev/null
rm -rf runs/ci
t0=$SECONDS
grid=$(sbatch --parsable --output="$W/grid-%j.out" slurm/grid.sh sweeps/ci.yaml)
bash tests/slurm/cluster.sh wait "$C" -t 60 "$grid"
check 'grep -qE "^test: array job [0-9]+ \(6 tasks\)" $W/grid-$grid.out && grep -qE "^long: array job [0-9]+ \(1 tasks\)" $W/grid-$grid.out && grep -qE "^report: job [0-9]+ \(after the arrays\)" $W/grid-$grid.out' "grid.sh submits one array per group and the report job: $(cat $W/grid-$grid.out 2>/dev/null)"
long=$(sed -nE 's/^long: array job ([0-9]+).*/\1/p' "$W/grid-$grid.out")
report=$(sed -nE 's/^report: job ([0-9]+).*/\1/p' "$W/grid-$grid.out")
check 'scontrol show job "$report" | grep -q "Dependency=afterany:"' "the report job waits on the arrays (afterany)"

# pre-empt the long task once it is well under way: SIGUSR1 to its batch shell,
# as Slurm sends it signal_margin seconds before the time limit
m=runs/ci/long/combo2-s7/metrics.jsonl
for i in $(seq 1 600); do
    [ -f "$m" ] && [ "$(tail -n 1 "$m" | sed -nE 's/^\{"step":([0-9]+),.*/\1/p')" -ge 500 ] 2>/dev/null && break
    sleep 0.1
done
scancel --signal=USR1 --batch "${long}_0"
bash tests/slurm/cluster.sh wait "$C" -t 300 "$long" "$report"
log=$(ls runs/ci/logs/long-"${long}"_0.out 2>/dev/null)
check '[ -n "$log" ] && grep -q "SIGUSR1 received at step [0-9]*: checkpoint saved" "$log" && grep -q "checkpointed; requeueing ${long}_0" "$log"' "the signalled task checkpoints and requeues itself"
check '[ -n "$log" ] && grep -q "(restart 1)" "$log" && grep -q "resum" "$log"' "it starts again (SLURM_RESTART_COUNT 1) and resumes from the checkpoint"
check '[ -f runs/ci/long/combo2-s7/result.json ] && grep -q "\"steps\": 20000" runs/ci/long/combo2-s7/result.json' "the pre-empted task finishes all 20000 steps"
n=$(ls runs/ci/*/*/result.json 2>/dev/null | wc -l)
check '[ "$n" = 7 ]' "all 7 tasks finished ($n)"
check '[ -f runs/ci/report/report.md ] && grep -q "^7 run directories: 7 done" runs/ci/report/report.md' "the report job reports all 7 runs"
check 'grep -qE "^\| combo2 \| [-+]0\.[0-9]{4} ± [0-9.]+ \(./2\) \|" runs/ci/report/report.md' "Table 1 pairs combo2 with the baseline over 2 seeds"
check '[ -s runs/ci/report/figures/fig1a-increments.png ]' "the report job draws Figure 1(a)"
st=$("$B/sgsweep" status sweeps/ci.yaml)
check 'grep -q "^7 done, 0 running, 0 queued" <<<"$st"' "status after the jobs left the queue: 7 done"
# submitting again: everything is done, only a report job
out=$(bash slurm/grid.sh sweeps/ci.yaml)
check 'grep -q "^report: job [0-9]* (nothing left to train)" <<<"$out" && ! grep -q "array job" <<<"$out"' "resubmitting skips finished work: $out"
bash tests/slurm/cluster.sh wait "$C" -t 60 $(sed -nE 's/^report: job ([0-9]+).*/\1/p' <<<"$out")
echo "(the sweep took $((SECONDS - t0)) s on the cluster)"
finish
