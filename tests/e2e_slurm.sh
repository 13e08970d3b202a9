#!/usr/bin/env bash
# The sweep on a real Slurm cluster: starts a one-node cluster
# (tests/slurm/cluster.sh: munge, slurmctld, slurmd; installed from Debian
# if missing), runs `sbatch slurm/grid.sh sweeps/ci.yaml` end to end,
# pre-empts the long task with the time-limit signal (it checkpoints,
# requeues itself and finishes), checks every result, that each analysis
# task started after its own training task and the report after all, and
# the report's analysis tables, resubmits (nothing left to run); then a
# second sweep whose one failing training task cancels its analysis task
# alone, fixed and resubmitted; and stops the daemons it started.
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
testjob=$(sed -nE 's/^test: array job ([0-9]+).*/\1/p' "$W/grid-$grid.out")
an=$(sed -nE 's/^analyze:test: array job ([0-9]+).*/\1/p' "$W/grid-$grid.out")
check 'grep -qE "^analyze:test: array job [0-9]+ \(3 tasks, each after its training task in job $testjob\)" $W/grid-$grid.out' "grid.sh submits the analysis array after the test array"
check 'scontrol show job "$an" | grep -q "KillOInInvalidDependent=Yes"' "the analysis array is cancelled, not left pending, where its dependency fails (--kill-on-invalid-dep=yes)"
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
# the analyses: each array task after its own training task, the report after them all
# (start and end times from the cluster's job completion log, one line per finished job)
jc=$C/log/jobcomp.txt
jcf() { grep -E "$1" "$jc" | tail -n 1 | sed -nE "s/.* $2=([^ ]*) .*/\1/p"; } # PATTERN FIELD
order=ok
for k in 0 2 4; do
    a_start=$(jcf "ArrayJobId=$an ArrayTaskId=$k " StartTime) t_end=$(jcf "ArrayJobId=$testjob ArrayTaskId=$k " EndTime)
    [ "$(jcf "ArrayJobId=$an ArrayTaskId=$k " JobState)" = COMPLETED ] && [ -n "$t_end" ] && ! [[ "$a_start" < "$t_end" ]] || order="task $k: started $a_start, its training ended $t_end"
done
check '[ "$order" = ok ]' "analysis task k ran after training task k (aftercorr): $order"
r_start=$(jcf "^JobId=$report " StartTime) a_last=$(grep -E "ArrayJobId=$an " "$jc" | sed -nE 's/.* EndTime=([^ ]*) .*/\1/p' | sort | tail -n 1)
check '[ -n "$r_start" ] && [ -n "$a_last" ] && ! [[ "$r_start" < "$a_last" ]]' "the report job ran after the analyses (started $r_start, last analysis ended $a_last)"
check 'for a in baseline sinklogit combo2; do [ -f runs/ci/test/$a-s0/analysis/injection.json ] && [ -f runs/ci/test/$a-s0/analysis/telemetry.json ] || exit 1; done; [ -f runs/ci/test/combo2-s0/analysis/probes.json ] && [ ! -e runs/ci/test/combo2-s1/analysis ]' "the seed-0 runs are analysed, the others not"
check 'grep -q "^## Injection battery" runs/ci/report/report.md && grep -qE "^\| test \| structured \(median\) \| combo2 \| [-+]?0\.[0-9]+ \|" runs/ci/report/report.md && grep -q "^## Telemetry" runs/ci/report/report.md' "the report includes the analysis tables"
st=$("$B/sgsweep" status sweeps/ci.yaml)
check 'grep -q "^7 done, 0 running, 0 queued" <<<"$st" && grep -q "^analyses: 3 done, 0 running, 0 queued, 0 failed" <<<"$st"' "status after the jobs left the queue: 7 done, 3 analyses done"
# submitting again: everything is done, only a report job
out=$(bash slurm/grid.sh sweeps/ci.yaml)
check 'grep -q "^report: job [0-9]* (nothing left to run)" <<<"$out" && ! grep -q "array job" <<<"$out"' "resubmitting skips finished work: $out"
bash tests/slurm/cluster.sh wait "$C" -t 60 $(sed -nE 's/^report: job ([0-9]+).*/\1/p' <<<"$out")
echo "(the sweep took $((SECONDS - t0)) s on the cluster)"

# a failed training task cancels its own analysis task, not the others': task 1's
# run directory holds a corrupt checkpoint, so sgtrain refuses to resume it
t1=$SECONDS
cat >"$W/fail.yaml" <<EOF
name: cifail
out: $W/failruns
data: {synth: $ROOT/data/ci-synth}
set: {threads: 1, ckpt_every: 0}
groups:
  g:
    tier: test
    arms: [baseline]
    seeds: 3
    resources: {cpus_per_task: 1, mem: 500M, time: "00:05:00"}
analyses:
  g:
    seeds: all
    flags: {batches: 1, batch_size: 2, doses: [0.4]}
    resources: {cpus_per_task: 1, mem: 500M, time: "00:05:00"}
report: {figures: false}
EOF
mkdir -p "$W/failruns/g/baseline-s1" && echo garbage >"$W/failruns/g/baseline-s1/checkpoint.bin"
out=$(bash slurm/grid.sh "$W/fail.yaml")
ftr=$(sed -nE 's/^g: array job ([0-9]+).*/\1/p' <<<"$out") fan=$(sed -nE 's/^analyze:g: array job ([0-9]+).*/\1/p' <<<"$out") frep=$(sed -nE 's/^report: job ([0-9]+).*/\1/p' <<<"$out")
check '[ -n "$ftr" ] && [ -n "$fan" ] && [ -n "$frep" ] && grep -q "^analyze:g: array job $fan (3 tasks, each after its training task in job $ftr)" <<<"$out"' "the second sweep: a training array, an analysis array after it, the report: $out"
bash tests/slurm/cluster.sh wait "$C" -t 120 "$ftr" "$fan" "$frep"
check 'scontrol show job "${ftr}_1" | grep -q "JobState=FAILED .*Reason=NonZeroExitCode" && scontrol show job "${ftr}_1" | grep -q "ExitCode=2:0"' "training task 1 fails (a corrupt checkpoint, exit 2)"
check 'scontrol show job "${fan}_1" | grep -q "JobState=CANCELLED Reason=DependencyNeverSatisfied"' "its analysis task is cancelled (kill-on-invalid-dep), not left pending: $(scontrol show job "${fan}_1" | grep -o "JobState=[^ ]* Reason=[^ ]*")"
check '[ ! -e "$W/failruns/g/baseline-s1/analysis" ] && [ -f "$W/failruns/g/baseline-s0/analysis/telemetry.json" ] && [ -f "$W/failruns/g/baseline-s2/analysis/telemetry.json" ] && scontrol show job "${fan}_0" | grep -q "JobState=COMPLETED" && scontrol show job "${fan}_2" | grep -q "JobState=COMPLETED"' "the analyses of the other tasks run"
check '[ -f "$W/failruns/report/report.md" ]' "the report job runs anyway (afterany)"
st=$("$B/sgsweep" status "$W/fail.yaml")
check 'grep -qE "^g/baseline-s1 +interrupted " <<<"$st" && grep -qE "^analyze:g/baseline-s1 +waiting " <<<"$st" && grep -q "^analyses: 2 done, 0 running, 0 queued, 0 failed, 0 pending, 1 waiting" <<<"$st"' "status: the cancelled analysis waits for its run"
# fixed, submitted again: the run and then its analysis, nothing else
rm -rf "$W/failruns/g/baseline-s1"
out=$(bash slurm/grid.sh "$W/fail.yaml")
ftr=$(sed -nE 's/^g: array job ([0-9]+).*/\1/p' <<<"$out") fan=$(sed -nE 's/^analyze:g: array job ([0-9]+).*/\1/p' <<<"$out") frep=$(sed -nE 's/^report: job ([0-9]+).*/\1/p' <<<"$out")
check 'grep -q "^g: array job $ftr (1 tasks)" <<<"$out" && grep -q "^analyze:g: array job $fan (1 tasks, each after its training task in job $ftr)" <<<"$out"' "resubmitted: task 1 and its analysis only: $out"
bash tests/slurm/cluster.sh wait "$C" -t 120 "$ftr" "$fan" "$frep"
st=$("$B/sgsweep" status "$W/fail.yaml")
check 'grep -q "^3 done, 0 running" <<<"$st" && grep -q "^analyses: 3 done, 0 running, 0 queued, 0 failed, 0 pending, 0 waiting" <<<"$st"' "then every run and analysis is done"
echo "(the failing sweep took $((SECONDS - t1)) s on the cluster)"
finish
