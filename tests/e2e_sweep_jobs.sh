#!/usr/bin/env bash
# sgsweep's local executor running several tasks at once (`run --local
# --jobs N`, `--gpus LIST`): never more tasks at once than slots and never
# two on one GPU slot; each task's GPU and share of the cores in its
# environment; each analysis after its run, on the run's GPU; a task's
# parameters the same as when it runs alone; a failing task leaving the
# others to finish; Ctrl-C checkpointing every running task, and the next
# command resuming them; every bad --jobs or --gpus refused before anything
# is written.  The one-at-a-time executor is tests/e2e_sweep.sh.
set -u
B=${1:-build}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SW=$(cd "$B" && pwd)/sgsweep
SG=$(cd "$B" && pwd)/sgtrain
SYN=$(cd "$B" && pwd)/sgsynth
W=$(mktemp -d)
trap '[ -n "${KEEP-}" ] || rm -rf "$W"' EXIT
E2E_NAME=e2e_sweep_jobs
source "$(dirname "$0")/lib.sh"
unset OMP_NUM_THREADS # the executor gives each task its share
CORES=$(nproc)
"$SYN" --out "$W/data" --vocab 512 --val-tokens 20000 --train-tokens 100000 --shard-tokens 50000 >/dev/null

# sgtrain behind a wrapper that notes when each task starts and ends, with
# the GPU and threads it was given: "start|end TIME GPU THREADS PID KIND DIR [RC]".
# With EXEC set it becomes sgtrain after the start line, so that signals
# reach sgtrain itself.
cat >"$W/sgt" <<WRAPPER
#!/usr/bin/env bash
kind=\$1 dir=
if [ "\$1" = analyze ]; then dir=\$2; else
    a=("\$@"); for ((i = 0; i < \${#a[@]}; i++)); do [ "\${a[i]}" = --out ] && dir=\${a[i + 1]}; done
fi
say() { echo "\$1 \$(date +%s.%N) \${CUDA_VISIBLE_DEVICES-unset} \${OMP_NUM_THREADS-unset} \$\$ \$kind \$dir \${2-}" >>"$W/trace"; }
say start
if [ -n "\${EXEC-}" ]; then exec "$SG" "\$@"; fi
sleep 0.5 # a test-tier run takes less time than starting a process under load: make tasks overlap
"$SG" "\$@"; rc=\$?
say end \$rc
exit \$rc
WRAPPER
chmod +x "$W/sgt"

cat >"$W/p.yaml" <<YAML
name: p
out: $W/runs
sgtrain: $W/sgt
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
analyses:
  small:
    flags: {what: [telemetry], batches: 1}
report: {figures: false}
YAML

# --- bad --jobs and --gpus: exit 2, nothing written --------------------------------------------
expect 2 "--jobs: expected a whole number of tasks at once, 1 to 256, got \"0\"" -- "$SW" run "$W/p.yaml" --local --jobs 0
expect 2 "--jobs: expected .* got \"-3\"" -- "$SW" run "$W/p.yaml" --local --jobs -3
expect 2 "--jobs: expected .* got \"two\"" -- "$SW" run "$W/p.yaml" --local --jobs two
expect 2 "--jobs: expected .* got \"2x\"" -- "$SW" run "$W/p.yaml" --local --jobs 2x
expect 2 "--jobs: expected .* got \"257\"" -- "$SW" run "$W/p.yaml" --local --jobs 257
expect 2 "--jobs: expected .* got \"99999999999999999999\"" -- "$SW" run "$W/p.yaml" --local --jobs 99999999999999999999
expect 2 "--jobs: expected .* got \"\"" -- "$SW" run "$W/p.yaml" --local --jobs ''
expect 2 "--jobs needs a value" -- "$SW" run "$W/p.yaml" --local --jobs
expect 2 "--gpus: expected CUDA device numbers or UUIDs separated by commas \(such as 0,1,2,3\), got \"\"" -- "$SW" run "$W/p.yaml" --local --gpus ''
expect 2 "--gpus: expected .* got \"0,,1\"" -- "$SW" run "$W/p.yaml" --local --gpus 0,,1
expect 2 "--gpus: expected .* got \"0,\"" -- "$SW" run "$W/p.yaml" --local --gpus 0,
expect 2 "--gpus: expected .* got \"0;touch $W/pwned\"" -- "$SW" run "$W/p.yaml" --local --gpus "0;touch $W/pwned"
expect 2 "--gpus: expected .* got \"0 1\"" -- "$SW" run "$W/p.yaml" --local --gpus "0 1"
expect 2 "--gpus: 257 entries; at most 256" -- "$SW" run "$W/p.yaml" --local --gpus "$(seq -s, 0 256)"
expect 2 "--gpus needs a value" -- "$SW" rerun "$W/p.yaml" --local --gpus
expect 2 "--jobs or --gpus, not both" -- "$SW" run "$W/p.yaml" --local --jobs 2 --gpus 0,1
expect 2 "--jobs and --gpus are for run --local and rerun --local" -- "$SW" status "$W/p.yaml" --jobs 2
expect 2 "--jobs and --gpus are for run --local and rerun --local" -- "$SW" rerun "$W/p.yaml" --gpus 0
expect 2 "--jobs and --gpus are for run --local and rerun --local" -- "$SW" plan "$W/p.yaml" --jobs 2
expect 2 "--jobs and --gpus are for run --local and rerun --local" -- "$SW" submit "$W/p.yaml" --gpus 0
check '[ ! -e "$W/runs" ] && [ ! -e "$W/trace" ] && [ ! -e "$W/pwned" ]' "bad --jobs and --gpus write nothing and run nothing"

# --- two GPUs: five runs and two analyses, two at a time ---------------------------------------
"$SW" run "$W/p.yaml" --local --gpus 0,1 >"$W/run1.log" 2>&1; rc=$?
check '[ $rc -eq 1 ]' "a failed task: exit 1 (rc $rc)"
for t in small/baseline-s0 small/baseline-s1 small/combo2-s0 small/combo2-s1; do
    check "[ -f $W/runs/$t/result.json ]" "$t done"
done
check '[ -f $W/runs/small/baseline-s0/analysis/telemetry.json ] && [ -f $W/runs/small/combo2-s0/analysis/telemetry.json ]' "both analyses done"
check 'grep -q "broken projgate seed 0 failed (exit 1); log $W/runs/logs/broken-projgate-s0.log" $W/run1.log && [ -f $W/runs/broken/projgate-s0/failed.json ]' "the broken task fails, named with its log, and the others finish"
check 'grep -q "4 run now, 0 already done, 1 failed" $W/run1.log && grep -q "analyses: 2 run now, 0 already done, 0 failed, 0 skipped" $W/run1.log && [ -f $W/runs/report/report.md ]' "the counts, and the report at the end"
check '[ "$(grep -cE "^sgsweep: \[[1-7]/7\] .* on GPU [01]: log $W/runs/logs/" $W/run1.log)" = 7 ]' "each of the 7 tasks is announced with its GPU and its log"
check '[ "$(grep -cE "^sgsweep: (small/[a-z0-9]+-s[01]|analyze:small/[a-z0-9]+-s0) done in [0-9]+ s$" $W/run1.log)" = 6 ]' "each task that finishes says so, with its time"
check '! grep -q "val_loss\|step " $W/run1.log && grep -q "step " $W/runs/logs/small-combo2-s1.log && [ -s $W/runs/logs/analysis/small-combo2-s0.log ]' "several at once: each task's output goes to its log alone"
ov=$(awk -f "$ROOT/tests/sweep/overlap.awk" "$W/trace")
check '[ "$ov" = "max=2 clash=0 order=0" ]' "two at a time, never two on one GPU, each analysis after its run on its GPU ($ov)"
check '[ "$(awk '\''$1 == "start" { print $3 }'\'' $W/trace | sort -u | tr "\n" ,)" = "0,1," ]' "both GPUs used"
share=$((CORES / 2 > 1 ? CORES / 2 : 1))
check '[ "$(awk '\''$1 == "start" { print $4 }'\'' $W/trace | sort -u)" = "$share" ]' "each task gets half the cores: OMP_NUM_THREADS=$share"
# alone, with the same threads, a task trains the same parameters
cat >"$W/alone.yaml" <<YAML
name: a
out: $W/alone
sgtrain: $SG
data: {synth: $W/data}
set: {ckpt_every: 0}
groups:
  small: {tier: test, arms: [combo2], seeds: [1]}
report: {figures: false}
YAML
OMP_NUM_THREADS=$share "$SW" run "$W/alone.yaml" --local >/dev/null 2>&1
same() { grep -E '"(final_val_loss|params_crc32)"' "$1/result.json"; }
check '[ "$(same $W/runs/small/combo2-s1)" = "$(same $W/alone/small/combo2-s1)" ] && [ -n "$(same $W/alone/small/combo2-s1)" ]' "a task run beside another trains what it trains alone: the same parameters (crc32) and final loss"

# rerun, fixed, two at a time: the failed run moved aside and redone
sed -i 's/lr: 1e30, lr_min: 0, warmup: 0, ckpt_every: 5/lr: 6e-4, warmup: 2/' "$W/p.yaml"
expect 0 "moved .*broken/projgate-s0 aside to .*projgate-s0.failed-1" -- "$SW" rerun "$W/p.yaml" --local --fresh --jobs 2
check '[ -f $W/runs/broken/projgate-s0/result.json ] && [ -f $W/runs/broken/projgate-s0.failed-1/failed.json ]' "rerun --jobs 2: the failed run starts over and finishes"
expect 0 "0 run now, 5 already done, 0 failed" -- "$SW" run "$W/p.yaml" --local --jobs 3

# --- Ctrl-C with two tasks running: both checkpoint; the same command resumes both -------------
cat >"$W/q.yaml" <<YAML
name: q
out: $W/long
sgtrain: $W/sgt
data: {synth: $W/data}
set: {ckpt_every: 0, iters: 8000, warmup: 10}
groups:
  long:
    tier: test
    arms: [sinklogit, baseline]
    seeds: [3]
report: {figures: false}
YAML
: >"$W/trace"
EXEC=1 "$SW" run "$W/q.yaml" --local --gpus 5,5 >"$W/int.log" 2>&1 &
pid=$!
for i in $(seq 1 300); do
    [ -s "$W/long/long/sinklogit-s3/metrics.jsonl" ] && [ -s "$W/long/long/baseline-s3/metrics.jsonl" ] && break
    sleep 0.1
done
sleep 0.5
kill -INT $pid
wait $pid; rc=$?
check '[ $rc -eq 75 ]' "Ctrl-C: exit 75 (rc $rc)"
check '[ "$(grep -c "interrupted; .*long/long/[a-z]*-s3 checkpointed" $W/int.log)" = 2 ] && [ -f $W/long/long/sinklogit-s3/checkpoint.bin ] && [ -f $W/long/long/baseline-s3/checkpoint.bin ]' "both running tasks checkpoint"
check '! pgrep -f "$W/long/long" >/dev/null' "no task is left running"
check '[ "$(awk '\''$1 == "start" { print $3 }'\'' $W/trace | sort | uniq -c | awk '\''{ print $1 $2 }'\'')" = 25 ]' "a GPU named twice takes two tasks at once (both on GPU 5)"
: >"$W/trace"
"$SW" run "$W/q.yaml" --local --jobs 2 >"$W/res.log" 2>&1; rc=$?
check '[ $rc -eq 0 ] && [ "$(grep -c "\[[12]/2\] long [a-z]* seed 3 (resuming)" $W/res.log)" = 2 ] && [ -f $W/long/long/sinklogit-s3/result.json ] && [ -f $W/long/long/baseline-s3/result.json ]' "the same command resumes both to the end (rc $rc)"
check '[ "$(awk '\''$1 == "start" { print $3, $4 }'\'' $W/trace | sort -u)" = "unset $share" ] && [ "$(awk -f "$ROOT/tests/sweep/overlap.awk" "$W/trace")" = "max=2 clash=1 order=0" ]' "--jobs 2: two at once, no GPU named, each with its share of the cores"

# --- a signal while the running tasks end on their own: the rest wait, exit 75 ----------------
# Once: the wrapper of baseline's task waits until the other task has
# started, then signals sgsweep itself and exits 0; the other task's
# wrapper waits for that signal, so no place is free for the third task,
# ignores the SIGTERM passed on, and its sgtrain finishes.
cat >"$W/sgt-int" <<WRAPPER
#!/usr/bin/env bash
trap '' TERM
wait_for() { for i in \$(seq 1 600); do [ -e "\$1" ] && return; sleep 0.05; done; }
if [ "\$1" = train ] && [[ "\$*" == *"baseline-s0"* ]] && [ ! -e "$W/signalled" ]; then
    wait_for "$W/other-started"
    touch "$W/signalled"; kill -INT \$PPID; exit 0
fi
touch "$W/other-started"
wait_for "$W/signalled"
"$SG" "\$@"
WRAPPER
chmod +x "$W/sgt-int"
cat >"$W/r.yaml" <<YAML
name: r
out: $W/sig
sgtrain: $W/sgt-int
data: {synth: $W/data}
set: {ckpt_every: 0}
groups:
  g: {tier: test, arms: [baseline, sinklogit, combo2], seeds: [0]}
report: {figures: false}
YAML
"$SW" run "$W/r.yaml" --local --jobs 2 >"$W/sig.log" 2>&1; rc=$?
check '[ $rc -eq 75 ] && grep -q "^sgsweep: interrupted. Run the same command again to go on.$" $W/sig.log && [ -f $W/sig/g/sinklogit-s0/result.json ] && [ ! -e $W/sig/g/combo2-s0 ] && [ ! -e $W/sig/report ]' "a signal while the running tasks finish anyway: the rest do not start, no report, exit 75 (rc $rc)"
"$SW" run "$W/r.yaml" --local --jobs 2 >"$W/sig2.log" 2>&1; rc=$?
check '[ $rc -eq 0 ] && [ -f $W/sig/g/baseline-s0/result.json ] && [ -f $W/sig/g/combo2-s0/result.json ] && grep -q "2 run now, 1 already done, 0 failed" $W/sig2.log' "the same command then runs the rest (rc $rc)"
finish
