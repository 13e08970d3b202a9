#!/usr/bin/env bash
# End-to-end tests of sgreport: the paper's Table 5 as a sweep of run
# directories gives back its Tables 1 and 2 (the exact numbers are checked
# in test_report.c; here the files, the Markdown and the figures), analysis
# files make the injection table and Figure 2, real sgtrain runs are read,
# and every bad input exits non-zero with a clear message.
set -u
B=${1:-build}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
REP=$(cd "$B" && pwd)/sgreport
SG=$(cd "$B" && pwd)/sgtrain
SYN=$(cd "$B" && pwd)/sgsynth
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
E2E_NAME=e2e_report
source "$(dirname "$0")/lib.sh"
png_size() { od -An -tu1 -j16 -N8 "$1" | awk '{ printf "%dx%d", $1*16777216+$2*65536+$3*256+$4, $5*16777216+$6*65536+$7*256+$8 }'; }
have_gnuplot=0; command -v gnuplot >/dev/null && have_gnuplot=1

# --- the paper's sweep -------------------------------------------------------
S=$W/paper
while IFS=$'\t' read -r tier data arm s0 s1 s2 s3 s4; do
    seed=0
    for loss in $s0 $s1 $s2 $s3 $s4; do
        if [ "$loss" != 0 ]; then
            d=$S/$data-$tier/$arm/s$seed; mkdir -p "$d"
            printf '{\n  "tier": "%s",\n  "arm": "%s",\n  "seed": %d,\n  "steps": 100,\n  "final_val_loss": %s,\n  "config": {"data": "data/%s"}\n}\n' \
                "$tier" "$arm" "$seed" "$loss" "$data" >"$d/result.json"
            for st in 10 20 30 40 50 60 70 80 90 100; do
                printf '{"step":%d,"loss":%s,"lr":0.0006,"grad_norm":1,"tokens_per_s":1,"elapsed_s":1}\n' $st "$(awk -v l="$loss" -v s=$st 'BEGIN{print l + 3/s}')"
                [ $((st % 50)) -eq 0 ] && printf '{"step":%d,"val_loss":%s,"val_batches":16,"elapsed_s":1}\n' $st "$(awk -v l="$loss" -v s=$st 'BEGIN{print l + 2/s}')"
            done >"$d/metrics.jsonl"
        fi
        seed=$((seed + 1))
    done
done <"$ROOT/tests/report/table5.tsv"
# Table 6's first rows (10M, seed 0) as analysis files
inj() { # arm, then "junk cutoff dose loss-increase" lines on stdin
    local d=$S/fineweb-10M/$1/s0 first=1
    mkdir -p "$d/analysis"
    { printf '{"kind": "injection", "version": 1, "clean_val_loss": 4.0, "results": ['
      while read -r j c x inc; do
          [ $first -eq 1 ] || printf ', '; first=0
          printf '{"junk": "%s", "cutoff": "%s", "dose": %s, "val_loss": %s}' "$j" "$c" "$x" "$(awk -v i="$inc" 'BEGIN{print 4.0 + i}')"
      done
      printf ']}\n'; } >"$d/analysis/injection.json"
}
inj baseline <<'EOF'
structured q25 0.2 0.032
structured q25 0.4 0.138
structured q25 0.8 0.771
structured q25 1.6 2.695
gaussian median 0.2 0.009
gaussian median 1.6 0.589
EOF
inj sinklogit <<'EOF'
structured q25 0.2 0.009
structured q25 0.4 0.041
structured q25 0.8 0.178
structured q25 1.6 0.778
EOF
printf '{"kind": "exposure", "version": 1, "quiet_median": 0.564, "quiet_q25": 0.373}\n' >"$W/exp.json"
mkdir -p "$S/fineweb-10M/baseline/s0/analysis" && cp "$W/exp.json" "$S/fineweb-10M/baseline/s0/analysis/exposure.json"
# telemetry for Figures 1(b), 1(c) and 5: two seeds at 10M (mean ± SE by
# hand: 0.30, 0.34 -> 0.32 ± 0.02), one at 124M (no bar)
tel() { # tier arm seed "key: value, ..."
    mkdir -p "$S/fineweb-$1/$2/s$3/analysis"
    printf '{"kind": "telemetry", "version": 1, %s}\n' "$4" >"$S/fineweb-$1/$2/s$3/analysis/telemetry.json"
}
tel 10M baseline 0 '"pos0_mass": 0.40, "pos0_norm_ratio": 0.1, "value_excess_kurtosis": 3'
tel 10M baseline 1 '"pos0_mass": 0.44, "pos0_norm_ratio": 0.3'
tel 10M sinklogit 0 '"pos0_mass": 0.05, "phantom_mass": 0.30, "pos0_norm_ratio": 0.9'
tel 10M sinklogit 1 '"pos0_mass": 0.07, "phantom_mass": 0.34, "pos0_norm_ratio": 1.1'
tel 10M normgate 0 '"pos0_mass": 0.38, "gate_within_row_sd": 0.05, "gate_mean": 0.8'
tel 10M normgate 1 '"pos0_mass": 0.36, "gate_within_row_sd": 0.07, "gate_mean": 0.8'
tel 124M sinklogit 0 '"pos0_mass": 0.03, "phantom_mass": 0.45, "pos0_norm_ratio": 1.0'
tel 124M combo2 0 '"pos0_mass": 0.02, "phantom_mass": 0.5, "gate_within_row_sd": 0.12'
tel 124M normgate 0 '"gate_within_row_sd": 0.09'

expect 0 "83 runs \(83 done, 0 failed, 0 unfinished, 0 unreadable\); 8 missing" -- "$REP" --out "$W/r1" --curves "$S"
for f in report.md report.json tables/table1.csv tables/table2.csv tables/table5.csv tables/injection.csv tables/exposure.csv; do
    check "[ -s $W/r1/$f ]" "report writes $f"
done
check 'grep -qF "| sink logit | -0.0185 ± 0.0033 (3/3) | – | -0.0068 ± 0.0003 (3/3) | -0.0052 ± 0.0025 (3/3) | -0.0013 (1 seed) |" $W/r1/report.md' "Table 1's sink-logit row as the paper prints it"
# The paper prints -0.0065 and -0.0114 from unrounded losses; its rounded Table 5 gives
# -0.006567 and -0.0115 (test_report.c checks all within one unit of the last digit).
check 'grep -qF "| combo2 | -0.0036 ± 0.0008 (3/3) | – | -0.0066 ± 0.0016 (3/3) | -0.0054 ± 0.0012 (3/3) | -0.0115 (1 seed) |" $W/r1/report.md' "Table 1's combo2-over-sink-logit row"
check 'grep -qF "| norm | fineweb 10M | 0.0185 ± 0.0033 | 0.0037 ± 0.0026 | 0.0177 ± 0.0037 | 0.0045 | -0.0008 ± 0.0013 |" $W/r1/report.md' "Table 2's first row"
check 'grep -qF "| 350M | baseline | 3.0338 | – | – | – | – | 3.0338 |" $W/r1/report.md' "Table 5's 350M row"
check 'grep -qE "^vs_reference,combo,sinklogit,50M,5,5,-0.0030" $W/r1/tables/table1.csv' "CSV: combo vs sink logit at 50M pairs 5 seeds"
check 'grep -qF "| fineweb 10M | structured (q25) | baseline | +0.032 | +0.138 | +0.771 | +2.695 |" $W/r1/report.md' "injection table from analysis files"
check 'grep -qF "| fineweb 10M | baseline | 0.5640 | 0.3730 |" $W/r1/report.md' "exposure table"
dat_is() { # figure, then its .dat after the header on stdin
    cmp -s <(grep -v '^#' "$W/r1/figures/$1.dat") -
}
check 'dat_is fig1b-phantom-mass <<EOF
"fineweb 10M" 0.32 0.02 NaN NaN
"124M" 0.45 NaN 0.5 NaN
EOF' "Figure 1(b): the phantom's mass per tier, a series per phantom arm, mean ± SE over seeds as computed by hand"
check 'dat_is fig1c-gate-spread <<EOF
"fineweb 10M" 0.06 0.01 NaN NaN
"124M" 0.09 NaN 0.12 NaN
EOF' "Figure 1(c): the gate's within-row SD per tier, a series per gated arm"
check 'dat_is fig5a-sink-mass-fineweb_10M <<EOF
"baseline" 0.42 0.02 NaN NaN
"sink logit" 0.06 0.01 0.32 0.02
"norm gate" 0.37 0.01 NaN NaN
EOF' "Figure 5(a) at 10M: mass on the first key position and on the phantom, per arm"
check 'dat_is fig5b-pos0-norm-fineweb_10M <<EOF
"baseline" 0.2 0.1
"sink logit" 1 0.1
"norm gate" NaN NaN
EOF' "Figure 5(b) at 10M: the position-0 read norm ratio, per arm (a gap where an arm has none)"
check 'grep -q "with points ls 1 title .first key position." $W/r1/figures/fig5a-sink-mass-fineweb_10M.gp &&
       ! grep -q linespoints $W/r1/figures/fig5a-sink-mass-fineweb_10M.gp' "Figure 5 draws the arms as points, not joined by lines"
check 'dat_is fig5a-sink-mass-124M <<EOF
"sink logit" 0.03 NaN 0.45 NaN
"combo2" 0.02 NaN 0.5 NaN
EOF
dat_is fig5b-pos0-norm-124M <<EOF
"sink logit" 1 NaN
"combo2" NaN NaN
EOF' "Figure 5 at 124M: single seeds without bars; an arm with none of its measurements (norm gate) left out"
check '! ls $W/r1/figures | grep -q "fig5.-.*350M"' "no Figure 5 for a tier without telemetry"
if [ $have_gnuplot -eq 1 ]; then
    for f in fig1b-phantom-mass fig1c-gate-spread fig5a-sink-mass-fineweb_10M fig5b-pos0-norm-fineweb_10M; do
        check "[ -s $W/r1/figures/$f.png ] && [ -s $W/r1/figures/$f.svg ]" "figure $f as PNG and SVG"
    done
    check 'grep -q "!\[Figure 1(b)" $W/r1/report.md && grep -q "!\[Figure 1(c)" $W/r1/report.md && grep -q "!\[Figure 5(a).*fineweb 10M" $W/r1/report.md && grep -q "!\[Figure 5(b).*fineweb 10M" $W/r1/report.md' "report.md shows Figures 1(b), 1(c), 5(a) and 5(b)"
    for f in fig1a-increments fig2-dose-fineweb_10M-structured__q25_ fig2-dose-fineweb_10M-gaussian__median_ curves/fineweb_10M-combo2-s0; do
        check "[ -s $W/r1/figures/$f.png ] && [ -s $W/r1/figures/$f.svg ] && head -c 8 $W/r1/figures/$f.png | od -An -tx1 | grep -q '89 50 4e 47 0d 0a 1a 0a'" "figure $f as PNG and SVG"
    done
    check '[ "$(png_size $W/r1/figures/fig1a-increments.png)" = 800x500 ]' "Figure 1(a) is 800x500: $(png_size $W/r1/figures/fig1a-increments.png)"
    check 'grep -q "zero option" $W/r1/figures/fig1a-increments.svg && grep -q "projection gate" $W/r1/figures/fig1a-increments.svg' "Figure 1(a) legend names the increments"
    check '[ "$(ls $W/r1/figures/curves/*.png | wc -l)" = 83 ]' "--curves: one loss-curve figure per run"
    check 'grep -q "!\[Figure 1(a)" $W/r1/report.md' "report.md shows Figure 1(a)"
else
    echo "(gnuplot not installed: figure checks skipped)"
fi
# Same input, same report (figures aside): deterministic
"$REP" --out "$W/r2" --no-figures --quiet "$S"
"$REP" --out "$W/r3" --no-figures --quiet "$S"
check 'cmp -s $W/r2/report.md $W/r3/report.md && cmp -s $W/r2/report.json $W/r3/report.json' "the same runs give the same report"
check '[ ! -e $W/r2/figures ]' "--no-figures draws nothing"

# --- real sgtrain runs ---------------------------------------------------------
D=$W/data
"$SYN" --out "$D" --vocab 512 --val-tokens 20000 --train-tokens 100000 --shard-tokens 50000 >/dev/null
for arm in baseline combo2; do for seed in 0 1; do
    "$SG" train --tier test --arm $arm --seed $seed --data "$D" --ckpt_every 0 --out "$W/real/$arm-s$seed" 2>/dev/null
done; done
"$SG" train --tier test --arm sinklogit --seed 0 --data "$D" --stop_at 5 --ckpt_every 0 --out "$W/real/sinklogit-s0" 2>/dev/null
"$SG" train --tier test --arm projgate --seed 0 --data "$D" --lr 1e30 --lr_min 0 --warmup 0 --out "$W/real/projgate-s0" 2>/dev/null
expect 0 "6 runs \(4 done, 1 failed, 1 unfinished, 0 unreadable\)" -- "$REP" --no-figures "$W/real"
l() { sed -nE 's/.*"final_val_loss": ([^,]*),/\1/p' "$W/real/$1/result.json"; }
want=$(awk -v a="$(l combo2-s0)" -v b="$(l baseline-s0)" -v c="$(l combo2-s1)" -v d="$(l baseline-s1)" 'BEGIN { printf "%+.4f", ((a-b)+(c-d))/2 }')
check 'grep -q "| combo2 | $want ± " $W/real/report/report.md' "combo2's paired difference from the real runs' result.json: $want"
t() { sed -nE 's/.*"steady_tokens_per_s": ([^,]*),.*/\1/p' "$W/real/$1/result.json"; }
want=$(awk -v a="$(t combo2-s0)" -v b="$(t baseline-s0)" -v c="$(t combo2-s1)" -v d="$(t baseline-s1)" 'BEGIN { printf "%.3f", (a/b + c/d)/2 }')
check 'grep -q "| \*where\* | cpu |" $W/real/report/report.md && grep -q "| combo2 | $want ± [0-9.]* (2) |" $W/real/report/report.md &&
       grep -qE "^\| \*device-hours\* \| [0-9.e-]+ \(4 runs\) \|$" $W/real/report/report.md &&
       grep -q "^test,combo2,2," $W/real/report/tables/throughput.csv' "the throughput table from the real runs' steady tokens/s: combo2 at $want of the baseline, on the cpu; the device-hours of the 4 finished runs"
check 'grep -q "sinklogit-s0: test sinklogit seed 0: interrupted or running, checkpointed, at step 5 of 20" $W/real/report/report.md' "the interrupted run is named with its step"
check 'grep -qE "projgate-s0: test projgate seed 0: failed at step [0-9]+: the (training loss|gradient norm)" $W/real/report/report.md' "the failed run is named with its reason"
expect 1 "" -- "$REP" --no-figures --strict --quiet "$W/real"

# --- bad inputs ---------------------------------------------------------------------
cp -r "$W/real" "$W/bad"
printf '{"tier": "test", "arm": "baseline", "seed": 0, "final_val_loss": 3.1' >"$W/bad/baseline-s0/result.json"
expect 0 "unreadable run: .*bad/baseline-s0/result.json" -- "$REP" --no-figures "$W/bad"
check 'grep -q "bad/baseline-s0/result.json: not readable JSON" $W/bad/report/report.md && grep -q "| combo2 |" $W/bad/report/report.md' "a corrupt result.json is named and the rest reported"
expect 2 "usage: sgreport" -- "$REP"
expect 0 "usage: sgreport" -- "$REP" --help
expect 2 "unknown option --bogus" -- "$REP" --bogus "$S"
expect 2 "nowhere: No such file or directory" -- "$REP" "$W/nowhere"
mkdir -p "$W/empty"
expect 2 "no run directories" -- "$REP" "$W/empty"
expect 2 "--baseline nosuch: unknown arm" -- "$REP" --baseline nosuch --no-figures "$S"
expect 2 "several ROOTs.*--out" -- "$REP" "$S" "$W/real"
expect 2 "--out needs a value" -- "$REP" "$S" --out
printf 'x' >"$W/afile"
expect 2 "afile: not a directory" -- "$REP" "$W/afile"
expect 1 "" -- "$REP" --no-figures --out /proc/sgreport-cannot "$S"
finish
