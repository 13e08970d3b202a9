#!/bin/bash
# End-to-end check of tests/slurm/cluster.sh on this machine (root): start a one-node cluster in
# DIR, run the job shapes the sweep tests rely on, time each, stop, and check that no slurm or
# munge process is left.   usage: bash tests/slurm/smoke.sh [DIR]   (default: a fresh temp dir)
# Prints one line per check ("ok"/"FAIL", seconds) and ends with "N passed, N failed".

# shellcheck disable=SC2016  # the checks are single-quoted on purpose: check() evals them
set -u
here=$(cd "$(dirname "$0")" && pwd)
cl="$here/cluster.sh"
dir=${1:-$(mktemp -d /tmp/sgslurm.XXXXXX)}
mkdir -p "$dir/jobs"
cd "$dir/jobs" || exit 1
pass=0 fail=0

now() { date +%s.%N; }
el() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
ok() { pass=$((pass + 1)); printf 'ok    %-34s %6s s  %s\n' "$1" "$2" "${3:-}"; }
bad() { fail=$((fail + 1)); printf 'FAIL  %-34s %6s s  %s\n' "$1" "$2" "${3:-}"; }
check() { if eval "$3"; then ok "$1" "$2" "${4:-}"; else bad "$1" "$2" "${4:-} [$3]"; fi; }
wait_jobs() { bash "$cl" wait "$dir" -t "${T:-120}" "$@"; }
jstate() { scontrol show job "$1" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p' | head -1; }
jfield() { scontrol show job "$1" 2>/dev/null | tr ' ' '\n' | sed -n "s/^$2=//p" | head -1; }
# processes (not zombies) named like slurm*/munged
daemons() { ps -eo pid=,stat=,comm= | awk '$2 !~ /^Z/ && ($3 ~ /^slurm/ || $3 == "munged")'; }

before=$(daemons)
[ -z "$before" ] || { echo "slurm/munge processes already running:"; echo "$before"; }

t=$(now)
exports=$(bash "$cl" start "$dir") || { bad "start" "$(el "$t")" "cluster.sh start failed"; echo "0 passed, 1 failed"; exit 1; }
eval "$exports"
check "start (install if missing)" "$(el "$t")" '[ -n "${SLURM_CONF:-}" ] && sinfo -h -o %T | grep -q idle' "$exports"

# 1. a plain batch job
t=$(now)
j=$(sbatch --parsable -o hostname.out --wrap hostname)
wait_jobs "$j"
check "sbatch --wrap hostname" "$(el "$t")" '[ "$(cat hostname.out)" = "$(hostname -s)" ] && [ "$(jstate "$j")" = COMPLETED ]' "job $j $(jstate "$j")"

# 2. an array, at most 2 tasks at a time
t=$(now)
j=$(sbatch --parsable -o 'array_%a.out' --array=0-3%2 --wrap 'echo $SLURM_ARRAY_TASK_ID; date +%s.%N; sleep 2; date +%s.%N')
wait_jobs "$j"
overlap=$(cat array_*.out 2>/dev/null | awk 'NR % 3 == 2 { print $1, 1 } NR % 3 == 0 { print $1, -1 }' | sort -g |
	awk '{ c += $2; if (c > m) m = c } END { print m + 0 }')
check "array 0-3%2" "$(el "$t")" '[ "$(cat array_{0,1,2,3}.out 2>/dev/null | awk "NR % 3 == 1" | tr -d "\n")" = 0123 ] && [ "$overlap" = 2 ]' "max concurrent tasks $overlap"

# 3. a job that requeues itself once and completes on its second run
cat >requeue.sh <<'EOF'
#!/bin/bash
echo "run ${SLURM_RESTART_COUNT:-0} start $(date +%s.%N)"
if [ "${SLURM_RESTART_COUNT:-0}" = 0 ]; then
	echo "requeue $(date +%s.%N)"
	scontrol requeue "${SLURM_ARRAY_JOB_ID:-$SLURM_JOB_ID}${SLURM_ARRAY_TASK_ID:+_$SLURM_ARRAY_TASK_ID}"
	sleep 60
	echo "not killed by the requeue"
fi
echo "done"
EOF
t=$(now)
j=$(sbatch --parsable --requeue --open-mode=append -o requeue.out requeue.sh)
wait_jobs "$j"
gap=$(awk '/^requeue/ { r = $2 } /^run 1 start/ { s = $4 } END { if (r && s) printf "%.1f", s - r; else print "?" }' requeue.out)
check "requeue self, restart" "$(el "$t")" 'grep -q "^run 1 start" requeue.out && tail -1 requeue.out | grep -qx done && [ "$(jfield "$j" Restarts)" = 1 ] && [ "$(jstate "$j")" = COMPLETED ]' "requeue->second start ${gap} s"

# 3b. the same inside an array task (scontrol requeue JOBID_TASK)
t=$(now)
j=$(sbatch --parsable --requeue --open-mode=append -o 'requeue_a%a.out' --array=0-1 requeue.sh)
wait_jobs "$j"
check "requeue self, array task" "$(el "$t")" 'for a in 0 1; do grep -q "^run 1 start" requeue_a$a.out && tail -1 requeue_a$a.out | grep -qx done || exit 1; done' ""

# 4. afterok on a failing job: the dependents are cancelled, not left pending
t=$(now)
x=$(sbatch --parsable -o dep_x.out --wrap 'sleep 1; exit 3')
y=$(sbatch --parsable -o dep_y.out --dependency=afterok:"$x" --kill-on-invalid-dep=yes --wrap 'echo ran')
z=$(sbatch --parsable -o dep_z.out --dependency=afterok:"$y" --kill-on-invalid-dep=yes --wrap 'echo ran')
wait_jobs "$x" "$y" "$z"
check "afterok chain, head fails" "$(el "$t")" '[ "$(jstate "$x")" = FAILED ] && [ "$(jfield "$x" ExitCode)" = 3:0 ] && [ "$(jstate "$y")" = CANCELLED ] && [ "$(jstate "$z")" = CANCELLED ] && [ ! -e dep_y.out ] && [ ! -e dep_z.out ]' "$x $(jstate "$x") $(jfield "$x" ExitCode), $y $(jstate "$y") $(jfield "$y" Reason), $z $(jstate "$z")"

# 5. scancel --signal=USR1 --batch, trapped in the batch shell
cat >signal.sh <<'EOF'
#!/bin/bash
trap 'echo "USR1 $(date +%s.%N)"; kill $pid 2>/dev/null; exit 0' USR1
echo "ready"
sleep 60 & pid=$!
wait
echo "no signal"
EOF
t=$(now)
j=$(sbatch --parsable -o signal.out signal.sh)
for ((i = 0; i < 600; i++)); do grep -q ready signal.out 2>/dev/null && break; sleep 0.1; done
t1=$(now)
scancel --signal=USR1 --batch "$j"
wait_jobs "$j"
check "scancel --signal=USR1 --batch" "$(el "$t")" 'grep -q ^USR1 signal.out && [ "$(jstate "$j")" = COMPLETED ]' "signal->job gone $(el "$t1") s"

# 6. srun inside a job (MpiDefault: pmix when the library is there)
t=$(now)
j=$(sbatch --parsable -n 2 -o srun.out --wrap 'srun -n 2 hostname; srun -n 2 bash -c "echo rank \$SLURM_PROCID pmix \${PMIX_RANK:-none}"')
wait_jobs "$j"
check "srun -n 2 in a job" "$(el "$t")" '[ "$(grep -cx "$(hostname -s)" srun.out)" = 2 ] && grep -q "rank 1" srun.out' "$(grep -c pmix srun.out) pmix lines, $(grep -o 'pmix [0-9none]*' srun.out | sort | tr '\n' ' ')"

# 7. gres gpus (fake ones unless the machine has /dev/nvidiaN); without cgroup device
# confinement CUDA_VISIBLE_DEVICES is the gpu's index on the node, so the jobs see 0 and 1
if grep -q '^GresTypes=gpu' "$SLURM_CONF"; then
	t=$(now)
	a=$(sbatch --parsable --gpus-per-node=1 -o gpu_a.out --wrap 'echo $CUDA_VISIBLE_DEVICES; sleep 2')
	b=$(sbatch --parsable --gpus-per-node=1 -o gpu_b.out --wrap 'echo $CUDA_VISIBLE_DEVICES; sleep 2')
	wait_jobs "$a" "$b"
	check "--gpus-per-node=1, two jobs" "$(el "$t")" '[ "$(cat gpu_a.out gpu_b.out | sort | tr "\n" " ")" = "0 1 " ] && [ "$(jstate "$a")" = COMPLETED ] && [ "$(jstate "$b")" = COMPLETED ]' "CUDA_VISIBLE_DEVICES $(cat gpu_a.out gpu_b.out | tr '\n' ' ')"
fi

# 8. job records without sacct
check "jobcomp/filetxt records" 0 '[ "$(grep -c "^JobId=" "$dir/log/jobcomp.txt")" -ge 10 ]' "$(grep -c '^JobId=' "$dir/log/jobcomp.txt") lines in $dir/log/jobcomp.txt"

# 9. stop with jobs still running, one of which left a child behind
sbatch -o /dev/null --wrap 'sleep 300 & echo $!' >/dev/null
sbatch -o /dev/null --wrap 'trap "" TERM; sleep 300' >/dev/null
sbatch -n 2 -o /dev/null --wrap 'srun -n 2 sleep 300' >/dev/null
sbatch -o /dev/null --wrap 'sleep 300' >/dev/null # pending
sleep 2
t=$(now)
bash "$cl" stop "$dir"
left=$(daemons)
leaked=$(pgrep -fx 'sleep 300')
check "stop (4 jobs queued)" "$(el "$t")" '[ -z "$left" ] && [ -z "$leaked" ]' "${left:+left: $left}${leaked:+ leaked: $leaked}"
t=$(now)
bash "$cl" stop "$dir"
check "stop again (nothing running)" "$(el "$t")" 'true'

echo "$pass passed, $fail failed"
[ $fail = 0 ]
