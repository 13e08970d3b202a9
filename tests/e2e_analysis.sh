#!/usr/bin/env bash
# End-to-end tests of `sgtrain analyze`: every arm's numbers against the
# independent NumPy reference (tests/analysis/ref_analysis.py), dose 0 ==
# the clean model exactly, results reproducible with a fixed seed and for any
# thread count, the files sgreport turns into tables, and every bad input
# (flags, runs, checkpoints, data, analyses an arm lacks) exits 2 with a
# clear message and leaves existing results as they were.
set -u
B=${1:-build}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SG=$(cd "$B" && pwd)/sgtrain
REP=$(cd "$B" && pwd)/sgreport
SYN=$(cd "$B" && pwd)/sgsynth
MK=$(cd "$B" && pwd)/tests/test_analysis
PY=$ROOT/build/venv/bin/python
W=$(mktemp -d)
trap '[ -n "${KEEP:-}" ] || rm -rf "$W"' EXIT
E2E_NAME=e2e_analysis
source "$(dirname "$0")/lib.sh"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
A="--batches 2 --batch-size 3 --seq-len 16 --quiet --top-tokens 5 --min-count 2"
json() { "$PY" -c "import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$@"; }

"$SYN" --out "$W/data" --vocab 61 --val-tokens 4000 --train-tokens 4000 >/dev/null
"$SYN" --out "$W/data97" --vocab 97 --val-tokens 4000 --train-tokens 4000 >/dev/null

# --- every arm against the NumPy reference ---------------------------------
have_ref=0
"$PY" -c 'import numpy' 2>/dev/null && have_ref=1
check '[ $have_ref = 1 ]' "NumPy in build/venv (tools/install-deps.sh installs it)"
# (ARM+gpt2: the arm in GPT-2's form, as `sgtrain import` builds it: linear
# biases and the tanh GELU; ARM+neox: GPT-NeoX's, rotary positions on half
# of each head, attention and MLP in parallel, an untied head)
for arm in baseline offbyone sinklogit sinktoken normgate renorm projgate combo combo2 baseline+gpt2 combo2+gpt2 \
           sinktoken+neox combo2+neox; do
    d=$W/${arm/+/-}
    "$MK" --write-ckpt "$d" $arm "$W/data"
    "$SG" export "$d" -o "$d/model.safetensors" 2>/dev/null
    expect 0 "wrote .*/${arm/+/-}/analysis" -- "$SG" analyze "$d" --batches 2 --batch-size 3 --seq-len 16 --top-tokens 5 --min-count 2
    case ${arm%+*} in normgate|renorm|projgate|combo|combo2) want="exposure incidence injection probes telemetry" ;;
                 *) want="exposure incidence injection telemetry" ;; esac
    check '[ "$(cd "$d/analysis" && ls *.json | sed "s/.json//" | sort | xargs)" = "$want" ]' "$arm: analysis files $want"
    n=$(json "$d/analysis/injection.json" "len(d['results'])")
    case ${arm%+*} in projgate|combo2) nw=40 ;; *) nw=32 ;; esac
    check '[ "$n" = $nw ]' "$arm: $nw injection conditions (got $n)"
    if [ $have_ref = 1 ]; then
        out=$("$PY" "$ROOT/tests/analysis/ref_analysis.py" "$d" "$d/model.safetensors" "$W/data" 2>&1)
        check 'grep -qE "ref_analysis: [0-9]+ passed, 0 failed" <<<"$out"' "$arm: NumPy reference"$'\n'"$out"
    fi
done
# other settings: a shorter context, other doses, cutoffs and probe condition
d=$W/combo2
# (incidence: 9 reads past 2 sink positions, so the 25th and 50th
# percentiles fall on order statistics: a read at the cut is not below it)
"$SG" analyze "$d" --out "$d/analysis" --batches 3 --batch-size 2 --seq-len 11 --doses 0.3,2.5 --cutoffs q25 \
    --probe-dose 0.6 --probe-junk gaussian --probe-cutoff q25 --seed 9 --sink-positions 2 --percentiles 50,25 --quiet
got=$(json "$d/analysis/incidence.json" 'json.dumps([d["setup"]["sink_positions"], d["setup"]["percentiles"], sorted(k for k in d if k.startswith("blind"))])')
check '[ "$got" = "[2, [25.0, 50.0], [\"blind_mass_ratio_q25\", \"blind_mass_ratio_q50\"]]" ]' \
    "incidence: --sink-positions and --percentiles (kept ascending) in the file: $got"
if [ $have_ref = 1 ]; then
    out=$("$PY" "$ROOT/tests/analysis/ref_analysis.py" "$d" "$d/model.safetensors" "$W/data" 2>&1)
    check 'grep -qE "ref_analysis: [0-9]+ passed, 0 failed" <<<"$out"' "combo2, other settings: NumPy reference"$'\n'"$out"
fi

# --- dose 0 is the clean model, exactly ----------------------------------
d=$W/normgate
"$SG" analyze "$d" --what injection --doses 0,0.4 --out "$W/dose0" --quiet $A
check '[ "$(json "$W/dose0/injection.json" "sum(r[\"val_loss\"] != d[\"clean_val_loss\"] for r in d[\"results\"] if r[\"dose\"] == 0)")" = 0 ]' \
    "dose 0: every junk type's loss equals the clean loss exactly"
check '[ "$(json "$W/dose0/injection.json" "sum(r[\"val_loss\"] != d[\"clean_val_loss\"] for r in d[\"results\"] if r[\"dose\"] > 0)")" = 8 ]' \
    "dose 0.4 changes the loss under every junk type and cutoff"

# --- reproducible: same seed, any thread count; another seed differs ----------
strip() { json "$1" "json.dumps({k: v for k, v in d.items() if k != 'setup'} | {'results': [{k: v for k, v in r.items() if k != 'seconds'} for r in d.get('results', [])]}, sort_keys=True)"; }
OMP_NUM_THREADS=1 "$SG" analyze "$W/combo2" --out "$W/rep1" $A
OMP_NUM_THREADS=2 "$SG" analyze "$W/combo2" --out "$W/rep2" $A
"$SG" analyze "$W/combo2" --out "$W/rep3" $A --seed 2
for f in injection probes exposure telemetry incidence; do
    check '[ "$(strip "$W/rep1/$f.json")" = "$(strip "$W/rep2/$f.json")" ]' "$f.json identical with 1 and 2 threads"
done
check '[ "$(strip "$W/rep1/injection.json")" != "$(strip "$W/rep3/injection.json")" ]' "--seed changes the junk draws"
check '[ "$(json "$W/rep1/injection.json" "d[\"clean_val_loss\"]")" = "$(json "$W/rep3/injection.json" "d[\"clean_val_loss\"]")" ]' \
    "--seed leaves the evaluated tokens (and the clean loss) alone"

# --- analyses a run does not have: clear errors, nothing written --------------
expect 2 "own_direction .*projection-gate arms" -- "$SG" analyze "$W/normgate" --junk own_direction --out "$W/no1" $A
expect 2 "probes need a gated arm.*baseline" -- "$SG" analyze "$W/baseline" --what probes --out "$W/no2" $A
expect 2 "probe-junk own_direction needs a projection-gate arm" -- "$SG" analyze "$W/combo" --what probes --probe-junk own_direction --out "$W/no3" $A
expect 2 "batch-size must be at least 2" -- "$SG" analyze "$W/baseline" --batch-size 1 --out "$W/no4" --quiet
check '[ ! -e "$W/no1" ] && [ ! -e "$W/no2" ] && [ ! -e "$W/no3" ] && [ ! -e "$W/no4" ]' "refused analyses write nothing"
# without naming them, the arm's analyses are chosen: no probes, no own_direction
expect 0 "wrote" -- "$SG" analyze "$W/sinklogit" --out "$W/auto" --batches 1 --batch-size 2 --seq-len 8 --doses 0.4
check '[ ! -e "$W/auto/probes.json" ] && ! grep -q own_direction "$W/auto/injection.json"' "defaults skip what the arm lacks"
expect 0 "wrote" -- "$SG" analyze "$W/baseline" --batch-size 1 --junk gaussian,random_direction --out "$W/b1" --batches 1
# unnamed, incidence is left out where the sequences are too short for it
expect 0 "wrote" -- "$SG" analyze "$W/baseline" --seq-len 5 --out "$W/short" --batches 1 --batch-size 2
check '[ -s "$W/short/telemetry.json" ] && [ ! -e "$W/short/incidence.json" ]' "--seq-len 5: every analysis but incidence"

# --- bad flags ------------------------------------------------------------------
sum_before=$(cat "$W/combo2/analysis/"*.json | md5sum)
R=$W/combo2
expect 2 "which run" -- "$SG" analyze
expect 2 "one run or checkpoint only" -- "$SG" analyze "$R" "$R"
expect 2 "unknown flag '--bogus'" -- "$SG" analyze "$R" --bogus 1
expect 2 "--batches: expected an integer" -- "$SG" analyze "$R" --batches 0
expect 2 "--batches: expected an integer" -- "$SG" analyze "$R" --batches abc
expect 2 "--batches needs a value" -- "$SG" analyze "$R" --batches
expect 2 "--doses: expected a dose" -- "$SG" analyze "$R" --doses -1
expect 2 "--doses: expected a dose" -- "$SG" analyze "$R" --doses 0.2,x
expect 2 "--doses: 0.2 is listed twice" -- "$SG" analyze "$R" --doses 0.2,0.2
expect 2 "--doses: at most 16" -- "$SG" analyze "$R" --doses 1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17
expect 2 "--junk: unknown 'foo'" -- "$SG" analyze "$R" --junk structured,foo
expect 2 "--cutoffs: unknown 'q50'" -- "$SG" analyze "$R" --cutoffs q50
expect 2 "--what: unknown 'everything'" -- "$SG" analyze "$R" --what everything
expect 2 "--probe-junk: unknown" -- "$SG" analyze "$R" --probe-junk nope
expect 2 "--probe-cutoff: unknown" -- "$SG" analyze "$R" --probe-cutoff q10
expect 2 "--threads: expected an integer" -- "$SG" analyze "$R" --threads 0
expect 2 "--seq-len: expected an integer" -- "$SG" analyze "$R" --seq-len 1
expect 2 "--seq-len 17 exceeds the model's context of 16" -- "$SG" analyze "$R" --seq-len 17
expect 2 "--probe-dose: expected a dose" -- "$SG" analyze "$R" --probe-dose nan
expect 2 "--percentiles: expected percentiles between 0 and 100 \(exclusive\), got '0'" -- "$SG" analyze "$R" --percentiles 0
expect 2 "--percentiles: expected percentiles between 0 and 100 \(exclusive\), got '100'" -- "$SG" analyze "$R" --percentiles 30,100
expect 2 "--percentiles: expected percentiles .*got 'x'" -- "$SG" analyze "$R" --percentiles 30,x
expect 2 "--percentiles: 30 is listed twice" -- "$SG" analyze "$R" --percentiles 30,30
expect 2 "--percentiles: at most 8" -- "$SG" analyze "$R" --percentiles 1,2,3,4,5,6,7,8,9
expect 2 "--percentiles: empty list" -- "$SG" analyze "$R" --percentiles ,
expect 2 "--sink-positions: expected an integer" -- "$SG" analyze "$R" --sink-positions -1
expect 2 "--what: unknown 'incidences'" -- "$SG" analyze "$R" --what incidence,incidences
expect 2 "incidence needs at least 2 reads past the 4 sink positions; sequences of 5 tokens have 1" -- \
    "$SG" analyze "$R" --what incidence --seq-len 5
expect 2 "incidence needs at least 2 reads past the 16 sink positions" -- "$SG" analyze "$R" --what incidence --sink-positions 16
expect 0 "batch-size" -- "$SG" analyze --help

# --- bad runs, checkpoints and data -----------------------------------------------
expect 2 "$W/nothing: No such file" -- "$SG" analyze "$W/nothing"
cp -r "$R" "$W/corrupt"; rm -rf "$W/corrupt/analysis"
size=$(stat -c %s "$W/corrupt/checkpoint.bin")
printf '\x55' | dd of="$W/corrupt/checkpoint.bin" bs=1 seek=$((size / 2)) conv=notrunc 2>/dev/null
expect 2 "checksum|CRC" -- "$SG" analyze "$W/corrupt" $A
cp -r "$R" "$W/trunc"; rm -rf "$W/trunc/analysis"
truncate -s $((size - 100)) "$W/trunc/checkpoint.bin"
expect 2 "truncated" -- "$SG" analyze "$W/trunc" $A
echo "not a checkpoint" >"$W/garbage.bin"
expect 2 "garbage.bin" -- "$SG" analyze "$W/garbage.bin"
expect 2 "$W/nodata" -- "$SG" analyze "$R" --data "$W/nodata" $A
expect 2 "vocab" -- "$SG" analyze "$R" --data "$W/data97" $A
# evaluation reads val.bin alone: a directory without training shards serves
mkdir -p "$W/valonly" && cp "$W/data/val.bin" "$W/valonly/"
expect 0 "" -- "$SG" analyze "$R" --data "$W/valonly" --what exposure,incidence --out "$W/vo" $A
"$SG" analyze "$R" --what exposure,incidence --out "$W/vo-full" $A
check '[ "$(strip "$W/vo/incidence.json")" = "$(strip "$W/vo-full/incidence.json")" ] && [ "$(strip "$W/vo/exposure.json")" = "$(strip "$W/vo-full/exposure.json")" ]' \
    "a data directory holding only val.bin gives the same analyses"
expect 2 "$W/nodata2: data directory not found; point data at a directory holding val.bin \(made by" -- \
    "$SG" analyze "$R" --data "$W/nodata2" $A
expect 2 "--vocab: .*missing.tiktoken" -- "$SG" analyze "$R" --vocab "$W/missing.tiktoken" $A
check '[ "$(cat "$R/analysis/"*.json | md5sum)" = "$sum_before" ]' "bad inputs leave existing analysis files untouched"
check '[ ! -e "$W/corrupt/analysis" ] && [ ! -e "$W/trunc/analysis" ]' "nothing written for an unreadable checkpoint"
expect 0 "" -- "$SG" analyze "$R/checkpoint.bin" --out "$W/ckpt-file-out" --what exposure $A
check '[ -s "$W/ckpt-file-out/exposure.json" ] && [ ! -e "$W/ckpt-file-out/injection.json" ]' "--what exposure writes exposure.json alone"
"$SG" analyze "$R/checkpoint.bin" --what exposure $A
check '[ -s "$R/analysis/exposure.json" ]' "a checkpoint file's analyses go next to it"

# --- real runs, analysed and reported ------------------------------------------------
for arm in baseline normgate; do
    "$SG" train --tier test --arm $arm --seed 0 --iters 30 --vocab_size 61 --data "$W/data" --out "$W/study/test/$arm-s0" >/dev/null 2>&1
    "$SG" analyze "$W/study/test/$arm-s0" --batches 2 --batch-size 2 --quiet
done
expect 0 "2 runs" -- "$REP" --no-figures --out "$W/report" "$W/study"
check 'grep -q "Injection battery" "$W/report/report.md" && grep -q "structured (q25)" "$W/report/report.md"' \
    "the report's injection table"
check 'grep -q "Gate-override probes" "$W/report/report.md" && grep -q "row_mean" "$W/report/report.md"' "the report's probes table"
check 'grep -qi "exposure" "$W/report/report.md" && grep -q "quiet_median" "$W/report/tables/exposure.csv"' "the exposure table"
check 'grep -q "gate_within_row_sd" "$W/report/tables/telemetry.csv"' "the telemetry table"
check 'grep -qE "^\| test \| norm gate \| 0 \| [0-9]+ \|" "$W/report/report.md" && ! grep -qE "^\| test \| baseline \| 0 \| [0-9]+ \|" "$W/report/report.md" && [ -s "$W/report/tables/tokens.csv" ]' \
    "What the filter removes: a row for the gated arm's tokens, none for the baseline"
check 'grep -q "## Incidence (Table 12)" "$W/report/report.md" && grep -q ",blind_mass_ratio_q30," "$W/report/tables/incidence.csv"' \
    "the incidence table (Table 12's columns)"
check 'grep -q "^None: every run finished and was read" "$W/report/report.md"' "no problems reported"
# the figures drawn from telemetry.json: Figure 5's points are the files' own numbers
expect 0 "2 runs" -- "$REP" --out "$W/report-fig" "$W/study"
tnum() { sed -nE "s/^  \"$2\": ?([^,]*),?$/\1/p" "$W/study/test/$1-s0/analysis/telemetry.json"; }
dat_row() { # figure, arm label, telemetry value: the row has it (to the .dat's 8 digits), no phantom
    awk -v arm="\"$2\"" -v want="$3" '$0 ~ "^" arm " " { n = split(substr($0, length(arm) + 2), f, " ")
        ok = n == 4 && f[2] == "NaN" && f[3] == "NaN" && f[4] == "NaN" && want != "" && (f[1] - want)^2 <= (1e-7 * want)^2 }
        END { exit !ok }' "$W/report-fig/figures/$1.dat"
}
check 'dat_row fig5a-sink-mass-test baseline "$(tnum baseline pos0_mass)" && dat_row fig5a-sink-mass-test "norm gate" "$(tnum normgate pos0_mass)"' \
    "Figure 5(a) from real telemetry: each arm's pos0_mass as telemetry.json has it ($(tnum baseline pos0_mass), $(tnum normgate pos0_mass)), no phantom on these arms"
inum() { sed -nE "s/^  \"$2\": ?([^,]*),?$/\1/p" "$W/study/test/$1-s0/analysis/incidence.json"; }
check 'awk -v b="$(inum baseline blind_mass_ratio_q30)" -v g="$(inum normgate blind_mass_ratio_q30)" "
        /^\"test\" / { ok = NF == 5 && (\$2 - b)^2 <= (1e-7 * b)^2 && (\$4 - g)^2 <= (1e-7 * g)^2 && \$3 == \"NaN\" } END { exit !ok }" \
        "$W/report-fig/figures/fig4b-blind-mass-ratio.dat"' \
    "Figure 4(b) from real incidence files: each arm's blind_mass_ratio_q30 ($(inum baseline blind_mass_ratio_q30), $(inum normgate blind_mass_ratio_q30)), one seed so no bar"
check '[ -s "$W/report-fig/figures/fig4a-sink-mass.dat" ] && [ -s "$W/report-fig/figures/fig4c-content-share.dat" ]' "Figure 4(a) and 4(c)"
check '[ -s "$W/report-fig/figures/fig1c-gate-spread.dat" ] && [ ! -e "$W/report-fig/figures/fig1b-phantom-mass.dat" ]' \
    "Figure 1(c) for the gated arm; no Figure 1(b) without a phantom arm"
finish
