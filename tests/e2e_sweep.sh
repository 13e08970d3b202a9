#!/usr/bin/env bash
# End-to-end tests of sgsweep without a cluster: the expansion of the
# shipped sweeps (paper.yaml's 83 runs and 79 analyses), every kind of bad
# sweep file and analyses entry (file:line:column and what was expected),
# the local executor (skip finished, resume interrupted, rerun only the
# failed; each analysis right after its run, skipped when the run failed,
# a failed analysis recorded and rerun), status, the report at the end,
# and hostile values that must never reach a shell.
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
check 'grep -q -- "--dependency=afterany:JOBID_OF_tinystories-10M:JOBID_OF_fineweb-10M:JOBID_OF_fineweb-50M:JOBID_OF_fineweb-124M:JOBID_OF_fineweb-350M:JOBID_OF_analysis-fineweb-10M:JOBID_OF_analysis-fineweb-50M:JOBID_OF_analysis-fineweb-124M:JOBID_OF_analysis-fineweb-350M:JOBID_OF_analysis-zeroshot-lambada:JOBID_OF_analysis-zeroshot-hellaswag:JOBID_OF_analysis-zeroshot-wikitext --kill-on-invalid-dep=yes" <<<"$plan"' "the report job depends on every array, training and analysis"
# the analyses of Appendix C: seed 0 of every FineWeb run, each after its training task
check 'grep -q "^sweep paper: 83 training tasks in 5 groups, 79 analysis tasks in 7 analyses" <<<"$plan"' "paper.yaml: 79 analysis tasks (seed 0 of every FineWeb run, and 3 zero-shot tasks of each 124M run)"
check '[ "$(grep -cE "^analyze:fineweb-[0-9]+M/[a-z0-9]+-s0 " <<<"$plan")" = 25 ] && ! grep -q "^analyze:tinystories" <<<"$plan"' "paper.yaml: the analyses take seed 0 of the FineWeb tiers only"
check '[ "$(grep -cE "^analyze:zeroshot-(lambada|hellaswag|wikitext)/[a-z0-9]+-s[012] +analyze +124M " <<<"$plan")" = 54 ]' "paper.yaml: Tables 10-11's zero-shot tasks, every seed of the 6 arms at 124M"
check 'grep -qx "build/sgtrain zeroshot runs/paper/fineweb-124M/combo-s2 --task hellaswag --file data/eval/hellaswag_val.jsonl" <<<"$plan" && grep -qx "build/sgtrain zeroshot runs/paper/fineweb-124M/baseline-s0 --task wikitext --file data/eval/wiki.test.raw" <<<"$plan"' "paper.yaml: the exact sgtrain zeroshot commands"
check 'grep -q -- "--job-name=paper.analyze:fineweb-124M --array=0,3,6,9,12,15 --dependency=aftercorr:JOBID_OF_fineweb-124M --kill-on-invalid-dep=yes " <<<"$plan"' "paper.yaml: analysis task k waits for training task k (aftercorr, the same array ids)"
check 'grep -q -- "--job-name=paper.analyze:fineweb-350M --array=0-3 .*--ntasks-per-node=1 --gpus-per-node=1 --cpus-per-task=8 " <<<"$plan"' "paper.yaml: a 350M analysis takes one GPU"
check 'grep -qx "build/sgtrain analyze runs/paper/fineweb-124M/combo2-s0 --seq-len 512" <<<"$plan" && grep -qx "build/sgtrain analyze runs/paper/fineweb-50M/normgate-s0 --what injection,exposure,telemetry,incidence --seq-len 512" <<<"$plan" && grep -qx "build/sgtrain analyze runs/paper/fineweb-350M/combo-s0 --what injection,telemetry,incidence --seq-len 1024" <<<"$plan"' "paper.yaml: the exact sgtrain analyze commands (all at 124M, exposure at 50M, incidence everywhere; 512 tokens, 1024 at 350M)"
check 'grep -qE "^analyze:fineweb-124M/combo2-s0 +analyze +124M +combo2 +0 +15 .* fineweb-124M/combo2-s0 +waiting" <<<"$plan"' "plan: an analysis row names its training run and waits for it"
check '[ ! -e runs/paper ]' "plan writes nothing"
expect 0 "^sweep demo: 6 training tasks in 1 groups, 3 analysis tasks" -- "$SW" plan sweeps/demo.yaml
expect 0 "^sweep ci: 7 training tasks in 2 groups, 3 analysis tasks" -- "$SW" plan sweeps/ci.yaml

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
# a batch the group's ranks cannot share: every task would stop at once
badsweep ranks 'ranks.yaml:9:16: group g \(nodes x gpus_per_node = 8 ranks\): grad_accum 4 is not a multiple of the 8 ranks: each rank takes an equal share of the micro-batches \(set grad_accum, and micro_batch to keep the batch; or auto_micro_batch true\)' <<'EOF'
name: x
out: o
data: {d: /tmp}
groups:
  g:
    tier: 124M
    arms: [baseline]
    seeds: 1
    resources: {nodes: 2, gpus_per_node: 4}
EOF
badsweep ranks2 'ranks2.yaml:10:16: group g \(nodes x gpus_per_node = 3 ranks\): auto_micro_batch: the 32 sequences of a step \(micro_batch 8 x grad_accum 4\) do not split evenly over 3 ranks' <<'EOF'
name: x
out: o
data: {d: /tmp}
set: {auto_micro_batch: true}
groups:
  g:
    tier: 124M
    arms: [baseline]
    seeds: 1
    resources: {gpus_per_node: 3}
EOF
# ... and the same 8 GPUs with the batch split 4 a GPU, or by auto_micro_batch
for fix in "set: {micro_batch: 4, grad_accum: 8}" "set: {auto_micro_batch: on}"; do
    printf 'name: x\nout: o\ndata: {d: /tmp}\ngroups:\n  g:\n    tier: 124M\n    arms: [baseline]\n    seeds: 1\n    %s\n    resources: {nodes: 2, gpus_per_node: 4}\n' "$fix" >"$W/ranksok.yaml"
    out=$("$SW" plan "$W/ranksok.yaml" 2>&1); rc=$?
    check '[ $rc -eq 0 ] && grep -q -- "--nodes=2 --ntasks-per-node=4 --gpus-per-node=4" <<<"$out"' "8 ranks with $fix: planned ($rc): $(head -n 2 <<<"$out")"
done
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
# a "\0" escape would end the value early in every C string that holds it
badsweep nul 'nul.yaml:2:6: a value holds a NUL character \(\\0\)' <<'EOF'
name: x
out: "runs\0/other"
data: {d: /tmp}
groups: {g: {tier: test, arms: [baseline], seeds: 1}}
EOF
# --- bad analyses: each error names file:line:column, exits 2 and writes nothing -------------
badan() { # NAME PATTERN; the entries of analyses: on stdin, from line 8
    { printf 'name: x\nout: %s/an-out\ndata: {d: /tmp}\ngroups:\n' "$W"
      printf '  g: {tier: test, arms: [baseline, combo2, normgate], seeds: 2}\n  h: {tier: test, arms: [combo2], seeds: [7]}\nanalyses:\n'
      cat; } >"$W/$1.yaml"
    expect 2 "$2" -- "$SW" plan "$W/$1.yaml"
}
badan ankey 'ankey.yaml:9:5: unknown key "flag" in an analysis \(known: group, arms, seeds, flags, zeroshot, resources, throttle\)' <<'EOF'
  g:
    flag: {batches: 1}
EOF
badan anflag 'anflag.yaml:9:13: unknown key "dose" in flags \(known: what, batches, batch_size' <<'EOF'
  g:
    flags: {dose: 0.2}
EOF
badan angroup 'angroup.yaml:9:12: analysis a1: no group named "nope" \(groups: g, h\)' <<'EOF'
  a1:
    group: nope
EOF
badan anname 'anname.yaml:8:3: analysis probes: which group\? None is named probes; add group: \(one of g, h\)' <<'EOF'
  probes: {arms: [combo2]}
EOF
badan anarm 'anarm.yaml:8:22: arm sinklogit is not in group g \(its arms: baseline, combo2, normgate\)' <<'EOF'
  g: {arms: [combo2, sinklogit]}
EOF
badan anarm2 'anarm2.yaml:8:14: unknown arm "sinkgate" \(known: baseline' <<'EOF'
  g: {arms: [sinkgate]}
EOF
badan anseed 'anseed.yaml:8:18: analysis g: seed 5 is not a seed of baseline in group g \(its seeds: 0, 1\)' <<'EOF'
  g: {seeds: [0, 5]}
EOF
badan anseed0 'anseed0.yaml:8:3: analysis h: seed 0 is not a seed of combo2 in group h \(its seeds: 7\); an analysis takes seed 0 unless seeds: says otherwise' <<'EOF'
  h: {}
EOF
badan andoses 'andoses.yaml:9:26: doses: expected a dose eps, a number in 0..1e6, got "lots"' <<'EOF'
  g:
    flags: {doses: [0.2, lots]}
EOF
badan andoses2 'andoses2.yaml:9:20: doses: 0.2 is listed twice' <<'EOF'
  g:
    flags: {doses: "0.2,0.4,0.2"}
EOF
badan anpdose 'anpdose.yaml:9:25: probe_dose: expected a dose eps, a number in 0..1e6, got "-1"' <<'EOF'
  g:
    flags: {probe_dose: -1}
EOF
badan anown 'anown.yaml:9:19: analysis g: own_direction junk is the direction of a projection gate, which only projgate and combo2 have, and baseline has none' <<'EOF'
  g:
    flags: {junk: [structured, own_direction]}
EOF
badan anprobes 'anprobes.yaml:9:19: analysis g: probes override a gate, and baseline has none: list only gated arms' <<'EOF'
  g:
    flags: {what: [injection, probes]}
EOF
badan anpjunk 'anpjunk.yaml:8:53: analysis g: probe_junk own_direction needs a projection gate \(projgate, combo2\), and normgate has a norm gate' <<'EOF'
  g: {arms: [combo2, normgate], flags: {probe_junk: own_direction}}
EOF
badan anwhat 'anwhat.yaml:9:31: what: unknown "plots" \(known: injection, probes, exposure, telemetry, incidence, or all\)' <<'EOF'
  g:
    flags: {what: [injection, plots]}
EOF
badan anpct 'anpct.yaml:9:31: percentiles: expected a percentile between 0 and 100 \(exclusive\), got "100"' <<'EOF'
  g:
    flags: {percentiles: [30, 100]}
EOF
badan anpct2 'anpct2.yaml:9:31: percentiles: 30 is listed twice' <<'EOF'
  g:
    flags: {percentiles: [30, 30]}
EOF
badan anincshort 'anincshort.yaml:9:22: analysis g: incidence needs at least 2 reads past the 4 sink positions, and sequences of 5 tokens have 1: lower sink_positions, raise seq_len, or list what without incidence' <<'EOF'
  g:
    flags: {seq_len: 5}
EOF
badan ansink 'ansink.yaml:9:48: analysis g: incidence needs at least 2 reads past the 15 sink positions, and sequences of 16 tokens have 1' <<'EOF'
  g:
    flags: {what: [incidence], sink_positions: 15}
EOF
badan anbatch 'anbatch.yaml:9:25: analysis g: structured junk is a read from another sequence of the batch, so batch_size must be at least 2' <<'EOF'
  g:
    flags: {batch_size: 1}
EOF
badan anseqlen 'anseqlen.yaml:9:22: seq_len 64 exceeds the context of group g \(test: 16 tokens\)' <<'EOF'
  g:
    flags: {seq_len: 64}
EOF
badan anint 'anint.yaml:9:22: batches: expected an integer in 1..100000, got "many"' <<'EOF'
  g:
    flags: {batches: many}
EOF
badan ancut 'ancut.yaml:9:27: probe_cutoff: unknown "q50" \(known: median, q25\)' <<'EOF'
  g:
    flags: {probe_cutoff: q50}
EOF
badan antwice 'antwice.yaml:9:28: flags: batch_size is given twice' <<'EOF'
  g:
    flags: {batch_size: 2, batch-size: 4}
EOF
badan anres 'anres.yaml:9:16: analysis g: an analysis runs as one process: at most nodes: 1 and gpus_per_node: 1' <<'EOF'
  g:
    resources: {gpus_per_node: 2}
EOF
badan anoverlap 'anoverlap.yaml:9:3: analyses g and more both write telemetry.json of g/combo2-s0: give them different arms, seeds or what' <<'EOF'
  g: {arms: [combo2]}
  more: {group: g, arms: [normgate, combo2], flags: {what: [telemetry]}}
EOF
badan andup 'andup.yaml:9:3: analysis g is defined twice' <<'EOF'
  g: {arms: [baseline]}
  g: {arms: [combo2]}
EOF
badan anlist 'anlist.yaml:8:3: analyses must be a mapping, not a list' <<'EOF'
  - g
EOF
expect 2 "anown.yaml:9:19: analysis g: own_direction" -- "$SW" run "$W/anown.yaml" --local
check '[ ! -e "$W/an-out" ]' "a bad analyses entry: nothing is written, not even the log directory"

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
analyses:
  small:                       # seed 0 of baseline and combo2: everything each arm has
    flags: {batches: 1, batch_size: 2, doses: [0.4]}
  broken:
    flags: {what: [telemetry, incidence], batches: 1, sink_positions: 2, percentiles: [30, 10]}
report: {figures: false}
EOF
plan=$("$SW" plan "$W/s.yaml")
check 'grep -q "6 training tasks in 3 groups, 3 analysis tasks in 2 analyses" <<<"$plan"' "the sweep with analyses expands"
check 'grep -qxF "$SG analyze $W/runs/small/combo2-s0 --batches 1 --batch-size 2 --doses 0.4" <<<"$plan" && grep -qxF "$SG analyze $W/runs/broken/projgate-s0 --what telemetry,incidence --batches 1 --sink-positions 2 --percentiles 30,10" <<<"$plan"' "plan shows the exact sgtrain analyze commands"
check 'grep -q -- "--job-name=t.analyze:small --array=0,2 --dependency=aftercorr:JOBID_OF_small --kill-on-invalid-dep=yes " <<<"$plan"' "plan: the analysis array waits task by task for the training array"
# interrupt the long task: SIGINT to sgsweep asks sgtrain to checkpoint; exit 75
"$SW" run "$W/s.yaml" --local >"$W/run1.log" 2>&1 &
pid=$!
for i in $(seq 1 300); do [ -s "$W/runs/long/sinklogit-s3/metrics.jsonl" ] && break; sleep 0.1; done
sleep 0.5; kill -INT $pid; wait $pid; rc=$?
check '[ $rc -eq 75 ] && grep -q "interrupted; .*long/sinklogit-s3 checkpointed" $W/run1.log && [ -f $W/runs/long/sinklogit-s3/checkpoint.bin ]' "SIGINT: the task checkpoints, sgsweep exits 75 (rc $rc)"
check 'grep -q "small projgate\|broken projgate seed 0 failed (exit 1)" $W/run1.log' "the broken task fails and the sweep goes on"
for t in small/baseline-s0 small/baseline-s1 small/combo2-s0 small/combo2-s1; do check "[ -f $W/runs/$t/result.json ]" "$t done"; done
# each analysis runs right after its training run; the failed run's is skipped and named
order=$(grep -oE "\] (small [a-z0-9]+ seed [0-9]|analyze:small/[a-z0-9-]+) \(new\)" $W/run1.log | tr '\n' '|')
check '[ "$order" = "] small baseline seed 0 (new)|] analyze:small/baseline-s0 (new)|] small baseline seed 1 (new)|] small combo2 seed 0 (new)|] analyze:small/combo2-s0 (new)|] small combo2 seed 1 (new)|" ]' "run: each analysis right after its training run ($order)"
check 'grep -q "analyze:broken/projgate-s0 skipped: its training run failed" $W/run1.log && [ ! -e $W/runs/broken/projgate-s0/analysis ]' "the analysis of a failed run is skipped and named, not run"
a=$W/runs/small
check '[ -f $a/baseline-s0/analysis/injection.json ] && [ -f $a/baseline-s0/analysis/exposure.json ] && [ -f $a/baseline-s0/analysis/telemetry.json ] && [ -f $a/baseline-s0/analysis/incidence.json ] && [ ! -e $a/baseline-s0/analysis/probes.json ] && [ -f $a/combo2-s0/analysis/probes.json ] && [ ! -e $a/baseline-s1/analysis ]' "without what, each arm gets every analysis it has (probes for combo2's gate only); seed 1 is not analysed"
check '[ -s $W/runs/logs/analysis/small-combo2-s0.log ] && grep -q "analyze .*combo2-s0 (combo2" $W/runs/logs/analysis/small-combo2-s0.log' "an analysis logs to OUT/logs/analysis/ENTRY-ARM-sSEED.log"
expect 1 "done .*failed|failed" -- "$SW" status "$W/s.yaml"
st=$("$SW" status "$W/s.yaml")
check 'grep -qE "^long/sinklogit-s3 +interrupted +[0-9]+" <<<"$st" && grep -qE "^broken/projgate-s0 +failed" <<<"$st" && grep -q "4 done, 0 running, 0 queued, 1 interrupted, 0 started, 1 failed, 0 pending (no squeue" <<<"$st"' "status: done, interrupted with its step, failed"
check 'grep -qE "^analyze:small/combo2-s0 +done +- +$W/runs/small/combo2-s0$" <<<"$st" && grep -qE "^analyze:broken/projgate-s0 +blocked " <<<"$st" && grep -q "^analyses: 2 done, 0 running, 0 queued, 0 failed, 0 pending, 0 waiting for their run, 1 blocked (their run failed)" <<<"$st"' "status: the analyses, done and blocked by a failed run"
stamp=$(stat -c %Y.%s $W/runs/small/*/result.json | md5sum)
"$SW" run "$W/s.yaml" --local >"$W/run2.log" 2>&1; rc=$?
check '[ $rc -eq 1 ] && grep -q "\[1/1\] long sinklogit seed 3 (resuming)" $W/run2.log && [ -f $W/runs/long/sinklogit-s3/result.json ]' "run again: only the interrupted task runs, resumed to the end"
check 'grep -q "resum" $W/runs/logs/long-sinklogit-s3.log' "sgtrain resumed from the checkpoint"
check '[ "$(stat -c %Y.%s $W/runs/small/*/result.json | md5sum)" = "$stamp" ] && grep -q "1 run now, 4 already done, 1 failed" $W/run2.log' "finished tasks are skipped, untouched"
check 'grep -q "analyses: 0 run now, 2 already done, 0 failed, 1 skipped (their run failed)" $W/run2.log' "finished analyses are skipped; the failed run's is named again"
check '[ -f $W/runs/report/report.md ] && grep -q "broken/projgate-s0: test projgate seed 0: failed at step" $W/runs/report/report.md' "the report at the end names the failed task"
check 'grep -q "rerun the failed tasks with: sgsweep rerun" $W/run2.log' "the run says how to rerun the failed tasks"
# rerun: only the failed task; it fails again at the same config
expect 1 "\[1/2\] broken projgate seed 0 \(rerun of a failed run\)" -- "$SW" rerun "$W/s.yaml" --local
check '[ "$(stat -c %Y.%s $W/runs/small/*/result.json | md5sum)" = "$stamp" ]' "rerun leaves the other tasks alone"
# fixed in the sweep file, rerun --fresh moves the failed directory aside and starts over, then analyses it
sed -i 's/lr: 1e30, lr_min: 0, warmup: 0, ckpt_every: 5/lr: 6e-4, warmup: 2/' "$W/s.yaml"
expect 0 "moved .*broken/projgate-s0 aside to .*projgate-s0.failed-1" -- "$SW" rerun "$W/s.yaml" --local --fresh
check '[ -f $W/runs/broken/projgate-s0/result.json ] && [ -f $W/runs/broken/projgate-s0.failed-1/failed.json ]' "the fresh rerun finishes; the failed attempt is kept"
check '[ "$(ls $W/runs/broken/projgate-s0/analysis 2>&1 | xargs)" = "incidence.json telemetry.json" ] && grep -q "\"blind_mass_ratio_q10\"" $W/runs/broken/projgate-s0/analysis/incidence.json' \
    "rerun: the analysis of the rerun training run follows it (what: telemetry and incidence, at the 10th and 30th percentiles)"
expect 0 "no failed task" -- "$SW" rerun "$W/s.yaml" --local
expect 0 "0 run now, 6 already done, 0 failed" -- "$SW" run "$W/s.yaml" --local
expect 0 "analyses: 0 run now, 3 already done, 0 failed, 0 skipped" -- "$SW" run "$W/s.yaml" --local
expect 0 "6 done, 0 running" -- "$SW" status "$W/s.yaml"
expect 0 "analyses: 3 done, 0 running, 0 queued, 0 failed, 0 pending" -- "$SW" status "$W/s.yaml"
expect 0 "is done \(valid result.json\): nothing to do" -- "$SW" task "$W/s.yaml" --group small --index 1
expect 2 "no task 9 in group small" -- "$SW" task "$W/s.yaml" --group small --index 9
check 'grep -q "| combo2 |" $W/runs/report/report.md' "the report has the sweep's arms"
check 'grep -q "^## Injection battery" $W/runs/report/report.md && grep -q "^## Gate-override probes" $W/runs/report/report.md && grep -q "^## Telemetry" $W/runs/report/report.md' "the report has the analysis tables"
# a checkpoint newer than its analysis makes the analysis pending again; a failing
# analysis is recorded, shown failed, skipped by run and redone by rerun
touch $W/runs/small/combo2-s0/checkpoint.bin
expect 0 "analyze:small/combo2-s0 +pending " -- "$SW" status "$W/s.yaml"
mv $W/data $W/data.away
"$SW" run "$W/s.yaml" --local >"$W/run3.log" 2>&1; rc=$?
rec=$W/runs/small/combo2-s0/analysis/failed-small.json
check '[ $rc -eq 1 ] && grep -q "analyze:small/combo2-s0 failed (exit 2); log .*logs/analysis/small-combo2-s0.log" $W/run3.log && grep -qE "\"exit\": *2" $rec && grep -qE "\"command\": *\".*sgtrain analyze .*small/combo2-s0 --batches 1" $rec' "a failed analysis: exit 1, named, recorded in analysis/failed-ENTRY.json (rc $rc)"
expect 1 "analyze:small/combo2-s0 +failed " -- "$SW" status "$W/s.yaml"
expect 1 "analyses: 0 run now, 2 already done, 1 failed, 0 skipped" -- "$SW" run "$W/s.yaml" --local
mv $W/data.away $W/data
expect 0 "\[1/1\] analyze:small/combo2-s0 \(rerun of a failed analysis\)" -- "$SW" rerun "$W/s.yaml" --local
check '[ ! -e $rec ] && [ $W/runs/small/combo2-s0/analysis/probes.json -nt $W/runs/small/combo2-s0/checkpoint.bin ]' "the rerun analysis is done; its failure record is gone"
# one analysis task, as slurm/analysis.sh runs it
expect 0 "analyze:small/combo2-s0 is done .*: nothing to do" -- "$SW" task "$W/s.yaml" --analysis small --index 2
rm $W/runs/small/baseline-s0/analysis/exposure.json
expect 0 "sgsweep: analyze:small/baseline-s0 \(restart 0\): .*sgtrain analyze .*small/baseline-s0 --batches 1 --batch-size 2 --doses 0.4" -- "$SW" task "$W/s.yaml" --analysis small --index 0
check '[ -f $W/runs/small/baseline-s0/analysis/exposure.json ]' "task --analysis runs the analysis"
expect 2 "no task 1 in analysis small" -- "$SW" task "$W/s.yaml" --analysis small --index 1
expect 2 "no analysis named nope in .* \(analyses: small, broken\)" -- "$SW" task "$W/s.yaml" --analysis nope --index 0
expect 2 "task needs --group NAME --index N \(a training task\) or --analysis NAME --index N" -- "$SW" task "$W/s.yaml" --group small --analysis small --index 0
# several ranks without distributed support are refused, not run into one directory
expect 2 "(launcher started 4 processes|started as one of 4 processes)" -- env SLURM_STEP_NUM_TASKS=4 "$SG" train --tier test --data "$W/data" --out "$W/ranks"
finish
