#!/usr/bin/env bash
# End-to-end tests of sgsweep without a cluster: the expansion of the
# shipped sweeps (paper.yaml's 83 runs), every kind of bad sweep file
# (file:line:column and what was expected), the local executor (skip
# finished, resume interrupted, rerun only the failed), status, the report
# at the end, and hostile values that must never reach a shell.
# The Slurm path is tests/e2e_slurm.sh.
set -u
B=${1:-build}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SW=$(cd "$B" && pwd)/sgsweep
SG=$(cd "$B" && pwd)/sgtrain
SYN=$(cd "$B" && pwd)/sgsynth
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
E2E_NAME=e2e_sweep
source "$(dirname "$0")/lib.sh"

# --- the shipped sweeps ----------------------------------------------------------
cd "$ROOT"
plan=$("$SW" plan sweeps/paper.yaml)
check 'grep -q "^sweep paper: 83 training tasks in 5 groups" <<<"$plan"' "paper.yaml expands to Table 5's 83 runs"
for g in "tinystories-10M 12" "fineweb-10M 27" "fineweb-50M 22" "fineweb-124M 18" "fineweb-350M 4"; do
    gname=${g% *} gcount=${g#* }
    check '[ "$(grep -c "^$gname/" <<<"$plan")" = $gcount ]' "paper.yaml: $gname has $gcount runs"
done
check '[ "$(grep -cE "^fineweb-50M/(sinklogit|combo)-s[34] " <<<"$plan")" = 4 ]' "paper.yaml: seeds 3 and 4 only for the sink logit and combo at 50M"
check 'grep -q -- "--job-name=paper.fineweb-350M --array=0-3 .*--nodes=1 --ntasks-per-node=8 --gpus-per-node=8" <<<"$plan"' "paper.yaml: 350M asks for 8 GPUs, one task per GPU"
check 'grep -q -- "--dependency=afterany:JOBID_OF_tinystories-10M:JOBID_OF_fineweb-10M:JOBID_OF_fineweb-50M:JOBID_OF_fineweb-124M:JOBID_OF_fineweb-350M --kill-on-invalid-dep=yes" <<<"$plan"' "the report job depends on every array"
check '[ ! -e runs/paper ]' "plan writes nothing"
expect 0 "^sweep demo: 6 training tasks" -- "$SW" plan sweeps/demo.yaml
expect 0 "^sweep ci: 7 training tasks" -- "$SW" plan sweeps/ci.yaml

# --- bad sweep files ------------------------------------------------------------------
badsweep() { # NAME PATTERN, YAML on stdin
    cat >"$W/$1.yaml"
    expect 2 "$2" -- "$SW" plan "$W/$1.yaml"
}
printf 'name: x\nout: o\ngroups: {g: {tier: test, arms: [baseline], seeds: 1}}\n' >"$W/nodata.yaml"
expect 2 "nodata.yaml:3:[0-9]+: group g has no data" -- "$SW" plan "$W/nodata.yaml"
badsweep syntax "syntax.yaml:3:[0-9]+: .*(mapping|block)" <<'EOF'
name: x
out: o
  groups: [
EOF
badsweep unknown 'unknown.yaml:3:1: unknown key "grups" in the sweep \(known: name, out' <<'EOF'
name: x
out: o
grups: {}
EOF
badsweep noname "noname.yaml:1:1: no name" <<'EOF'
out: o
groups: {}
EOF
badsweep tier "tier.yaml:5:13: unknown tier '7B'" <<'EOF'
name: x
out: o
data: {d: /tmp}
groups:
  g: {tier: 7B, arms: [baseline], seeds: 1}
EOF
badsweep arm 'arm.yaml:5:26: unknown arm "sinkgate" \(known: baseline' <<'EOF'
name: x
out: o
data: {d: /tmp}
groups:
  g: {tier: test, arms: [sinkgate], seeds: 1}
EOF
badsweep arm2 'arm2.yaml:7:19: unknown arm "sinkgate"' <<'EOF'
name: x
out: o
data: {d: /tmp}
groups:
  g:
    tier: test
    arms: [combo, sinkgate]
    seeds: 1
EOF
badsweep seeds 'seeds.yaml:8:19: seed 1 is listed twice' <<'EOF'
name: x
out: o
data: {d: /tmp}
groups:
  g:
    tier: test
    arms: [combo]
    seeds: [0, 1, 1]
EOF
badsweep seedneg 'seedneg.yaml:8:13: a seed: expected an integer in 0..2147483647, got "-1"' <<'EOF'
name: x
out: o
data: {d: /tmp}
groups:
  g:
    tier: test
    arms: [combo]
    seeds: [-1]
EOF
badsweep perarm 'perarm.yaml:9:21: seeds_per_arm names baseline, which is not in this group' <<'EOF'
name: x
out: o
data: {d: /tmp}
groups:
  g:
    tier: test
    arms: [combo]
    seeds: 1
    seeds_per_arm: {baseline: 3}
EOF
badsweep setkey 'setkey.yaml:3:7: "learning_rate" is not an sgtrain setting' <<'EOF'
name: x
out: o
set: {learning_rate: 1}
groups: {}
EOF
badsweep setval "setval.yaml:8:18: iters: expected a positive integer, got 'many'" <<'EOF'
name: x
out: o
data: {d: /tmp}
groups:
  g:
    tier: test
    arms: [combo]
    set: {iters: many}
    seeds: 1
EOF
badsweep managed 'managed.yaml:3:7: "seed" is set by the sweep itself' <<'EOF'
name: x
out: o
set: {seed: 3}
groups: {}
EOF
badsweep datamissing 'datamissing.yaml:6:11: data "fw" is not one of the corpora' <<'EOF'
name: x
out: o
data: {d: /tmp}
groups:
  g:
    data: fw
    tier: test
    arms: [combo]
    seeds: 1
EOF
badsweep res 'res.yaml:8:17: unknown key "gpus" in resources \(known: nodes, gpus_per_node' <<'EOF'
name: x
out: o
data: {d: /tmp}
groups:
  g:
    tier: test
    arms: [combo]
    resources: {gpus: 2}
    seeds: 1
EOF
badsweep empty "empty.yaml: the file is empty" </dev/null
badsweep twodocs "twodocs.yaml:5: a second YAML document" <<'EOF'
name: x
out: o
data: {d: /tmp}
groups: {g: {tier: test, arms: [combo], seeds: 1}}
---
name: y
EOF
badsweep list 'list.yaml:1:1: a sweep file must be a mapping, not a list' <<'EOF'
- name: x
EOF
expect 2 "nope.yaml: No such file" -- "$SW" plan "$W/nope.yaml"
expect 2 "unknown command \"launch\"" -- "$SW" launch sweeps/ci.yaml
expect 2 "run: say where: --local" -- "$SW" run sweeps/ci.yaml
expect 2 "which sweep file" -- "$SW" status
expect 2 "usage: sgsweep" -- "$SW"
expect 2 "task needs --group NAME --index N" -- "$SW" task sweeps/ci.yaml

# --- hostile values: names are restricted, values never reach a shell --------------
badsweep hostname 'hostname.yaml:1:7: the sweep name "x;touch pwned": use only letters' <<'EOF'
name: "x;touch pwned"
out: o
groups: {}
EOF
badsweep hostgroup "hostgroup.yaml:5:3: a group name \"g\\\$\\(touch pwned\\)\": use only letters" <<'EOF'
name: x
out: o
data: {d: /tmp}
groups:
  "g$(touch pwned)": {tier: test, arms: [combo], seeds: 1}
EOF
badsweep hostpart 'hostpart.yaml:8:16: partition "gpu; touch pwned" contains a space' <<'EOF'
name: x
out: o
data: {d: /tmp}
groups:
  g:
    tier: test
    arms: [combo]
    resources: {partition: "gpu; touch pwned"}
    seeds: 1
EOF
badsweep hostsbatch 'hostsbatch.yaml:8:26: an sbatch argument must be one long option' <<'EOF'
name: x
out: o
data: {d: /tmp}
groups:
  g:
    tier: test
    arms: [combo]
    resources: {sbatch: ["; touch pwned"]}
    seeds: 1
EOF
mkdir -p "$W/host"
cat >"$W/host/h.yaml" <<EOF
name: h
out: $W/host/out dir \$(touch $W/pwned1)
sgtrain: $SG
data: {d: "$W/data'; touch $W/pwned2; '"}
groups:
  g: {tier: test, arms: [combo], seeds: 1}
EOF
plan=$(cd "$W/host" && "$SW" plan h.yaml)
line=$(grep "^sbatch.*--job-name=h.g" <<<"$plan")
check 'grep -qF "$W/host/out dir \$(touch $W/pwned1)/logs" <<<"$(eval "printf %s\\\\n $line")"' "the shown sbatch command, run by a shell, keeps the hostile path as one word"
(cd "$W/host" && "$SW" run h.yaml --local >/dev/null 2>&1)
check '[ ! -e $W/pwned1 ] && [ ! -e $W/pwned2 ] && [ -d "$W/host/out dir \$(touch $W/pwned1)/logs" ] && grep -q "touch $W/pwned2" "$W/host/out dir \$(touch $W/pwned1)/logs/g-combo-s0.log"' "hostile paths are used literally (sgtrain names the odd data path), nothing is executed"

# --- the local executor ------------------------------------------------------------------
"$SYN" --out "$W/data" --vocab 512 --val-tokens 20000 --train-tokens 100000 --shard-tokens 50000 >/dev/null
cat >"$W/s.yaml" <<EOF
name: t
out: $W/runs
sgtrain: $SG
data: {synth: $W/data}
set: {ckpt_every: 0}
groups:
  small:
    tier: test
    arms: [baseline, combo2]
    seeds: 2
  broken:
    tier: test
    set: {lr: 1e30, lr_min: 0, warmup: 0, ckpt_every: 5}
    arms: [projgate]
    seeds: [0]
  long:
    tier: test
    set: {iters: 40000, warmup: 10}
    arms: [sinklogit]
    seeds: [3]
report: {figures: false}
EOF
expect 0 "6 training tasks" -- "$SW" plan "$W/s.yaml"
# interrupt the long task: SIGINT to sgsweep asks sgtrain to checkpoint; exit 75
"$SW" run "$W/s.yaml" --local >"$W/run1.log" 2>&1 &
pid=$!
for i in $(seq 1 300); do [ -s "$W/runs/long/sinklogit-s3/metrics.jsonl" ] && break; sleep 0.1; done
sleep 0.5; kill -INT $pid; wait $pid; rc=$?
check '[ $rc -eq 75 ] && grep -q "interrupted; .*long/sinklogit-s3 checkpointed" $W/run1.log && [ -f $W/runs/long/sinklogit-s3/checkpoint.bin ]' "SIGINT: the task checkpoints, sgsweep exits 75 (rc $rc)"
check 'grep -q "small projgate\|broken projgate seed 0 failed (exit 1)" $W/run1.log' "the broken task fails and the sweep goes on"
for t in small/baseline-s0 small/baseline-s1 small/combo2-s0 small/combo2-s1; do check "[ -f $W/runs/$t/result.json ]" "$t done"; done
expect 1 "done .*failed|failed" -- "$SW" status "$W/s.yaml"
st=$("$SW" status "$W/s.yaml")
check 'grep -qE "^long/sinklogit-s3 +interrupted +[0-9]+" <<<"$st" && grep -qE "^broken/projgate-s0 +failed" <<<"$st" && grep -q "4 done, 0 running, 0 queued, 1 interrupted, 0 started, 1 failed, 0 pending (no squeue" <<<"$st"' "status: done, interrupted with its step, failed"
stamp=$(stat -c %Y.%s $W/runs/small/*/result.json | md5sum)
"$SW" run "$W/s.yaml" --local >"$W/run2.log" 2>&1; rc=$?
check '[ $rc -eq 1 ] && grep -q "\[1/1\] long sinklogit seed 3 (resuming)" $W/run2.log && [ -f $W/runs/long/sinklogit-s3/result.json ]' "run again: only the interrupted task runs, resumed to the end"
check 'grep -q "resum" $W/runs/logs/long-sinklogit-s3.log' "sgtrain resumed from the checkpoint"
check '[ "$(stat -c %Y.%s $W/runs/small/*/result.json | md5sum)" = "$stamp" ] && grep -q "1 run now, 4 already done, 1 failed" $W/run2.log' "finished tasks are skipped, untouched"
check '[ -f $W/runs/report/report.md ] && grep -q "broken/projgate-s0: test projgate seed 0: failed at step" $W/runs/report/report.md' "the report at the end names the failed task"
check 'grep -q "rerun the failed tasks with: sgsweep rerun" $W/run2.log' "the run says how to rerun the failed tasks"
# rerun: only the failed task; it fails again at the same config
expect 1 "\[1/1\] broken projgate seed 0 \(rerun of a failed run\)" -- "$SW" rerun "$W/s.yaml" --local
check '[ "$(stat -c %Y.%s $W/runs/small/*/result.json | md5sum)" = "$stamp" ]' "rerun leaves the other tasks alone"
# fixed in the sweep file, rerun --fresh moves the failed directory aside and starts over
sed -i 's/lr: 1e30, lr_min: 0, warmup: 0, ckpt_every: 5/lr: 6e-4, warmup: 2/' "$W/s.yaml"
expect 0 "moved .*broken/projgate-s0 aside to .*projgate-s0.failed-1" -- "$SW" rerun "$W/s.yaml" --local --fresh
check '[ -f $W/runs/broken/projgate-s0/result.json ] && [ -f $W/runs/broken/projgate-s0.failed-1/failed.json ]' "the fresh rerun finishes; the failed attempt is kept"
expect 0 "no failed task" -- "$SW" rerun "$W/s.yaml" --local
expect 0 "0 run now, 6 already done, 0 failed" -- "$SW" run "$W/s.yaml" --local
expect 0 "6 done, 0 running" -- "$SW" status "$W/s.yaml"
expect 0 "is done \(valid result.json\): nothing to do" -- "$SW" task "$W/s.yaml" --group small --index 1
expect 2 "no task 9 in group small" -- "$SW" task "$W/s.yaml" --group small --index 9
check 'grep -q "| combo2 |" $W/runs/report/report.md' "the report has the sweep's arms"
# several ranks without distributed support are refused, not run into one directory
expect 2 "(launcher started 4 processes|started as one of 4 processes)" -- env SLURM_STEP_NUM_TASKS=4 "$SG" train --tier test --data "$W/data" --out "$W/ranks"
finish
