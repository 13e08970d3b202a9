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
trap '[ -n "${KEEP:-}" ] || rm -rf "$W"' EXIT
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
# the tokens lists ("What the filter removes"): seed 0's are malformed, so
# seed 1 gives the row; texts that need quoting in Markdown and CSV
tel 10M normgate 0 '"pos0_mass": 0.38, "gate_within_row_sd": 0.05, "gate_mean": 0.8, "tokens": {"ranked": 40, "most_attenuated": [{"id": 198, "text": "\n", "mean_gate": 0.36, "count": 50}, {"id": 262, "text": " the", "mean_gate": 1.5, "count": 70}], "least_attenuated": []}'
tel 10M normgate 1 '"pos0_mass": 0.36, "gate_within_row_sd": 0.07, "gate_mean": 0.8, "tokens": {"ranked": 40, "min_count": 20, "most_attenuated": [{"id": 198, "text": "\n", "mean_gate": 0.36, "count": 50}, {"id": 262, "text": " the", "mean_gate": 0.38, "count": 70}], "least_attenuated": [{"id": 543, "text": " which", "mean_gate": 0.56, "count": 21}]}'
tel 124M sinklogit 0 '"pos0_mass": 0.03, "phantom_mass": 0.45, "pos0_norm_ratio": 1.0'
tel 124M combo2 0 '"pos0_mass": 0.02, "phantom_mass": 0.5, "gate_within_row_sd": 0.12, "tokens": {"most_attenuated": [{"id": 91, "text": "|", "mean_gate": 0.3, "count": 25}, {"id": 63, "text": "`", "mean_gate": 0.31, "count": 30}, {"id": 11, "text": "a,\"b", "mean_gate": 0.32, "count": 30}], "least_attenuated": [{"id": 7, "text": null, "mean_gate": 0.6, "count": 22}]}'
tel 124M normgate 0 '"gate_within_row_sd": 0.09'
# incidence for Table 12 and Figure 4 (by hand: 0.36, 0.38 -> 0.37 ± 0.01;
# 1.03, 1.13 -> 1.08 ± 0.05; 0.258, 0.262 -> 0.26 ± 0.002), with the per-layer
# detail the report does not read
inc() { # tier arm seed "key: value, ..."
    mkdir -p "$S/fineweb-$1/$2/s$3/analysis"
    printf '{"kind": "incidence", "version": 1, "setup": {"sink_positions": 4, "percentiles": [30]}, %s, "layers": [{"layer": 0, "sink_mass": 9}]}\n' "$4" \
        >"$S/fineweb-$1/$2/s$3/analysis/incidence.json"
}
inc 10M baseline 0 '"sink_mass": 0.36, "blind_mass_ratio_q30": 1.03, "content_share_q30": 0.258, "r0_ratio": 0.14'
inc 10M baseline 1 '"sink_mass": 0.38, "blind_mass_ratio_q30": 1.13, "content_share_q30": 0.262, "r0_ratio": 0.16'
inc 124M baseline 0 '"sink_mass": 0.39, "blind_mass_ratio_q30": 1.18, "content_share_q30": 0.273, "r0_ratio": 0.09'
inc 124M sinklogit 0 '"sink_mass": 0.05, "blind_mass_ratio_q30": 1.5, "content_share_q30": 0.3, "r0_ratio": 0.9, "phantom_mass": 0.4'

# zero-shot files for Tables 10 and 11 (means ± SD over seeds by hand:
# 0.18, 0.19, 0.176 -> 0.182 ± 0.0072; 0.18, 0.19 -> 0.185 ± 0.0071), with
# keys the report ignores (setup, results), and malformed ones
zs() { # tier arm seed task 'fields'
    mkdir -p "$S/fineweb-$1/$2/s$3/analysis"
    printf '{"kind": "%s", "version": 1, "setup": {"arm": "%s"}, "file": "x", %s}\n' "$4" "$2" "$5" \
        >"$S/fineweb-$1/$2/s$3/analysis/$4.json"
}
lam() { # tier arm seed accuracy perplexity, the 4 buckets' accuracies, then their n (default the paper's)
    zs "$1" "$2" "$3" lambada "$(printf '"examples": 5153, "truncated": 0, "accuracy": %s, "perplexity": %s, "by_distance": [{"bucket": "absent", "n": %s, "accuracy": %s}, {"bucket": "<=32", "n": %s, "accuracy": %s}, {"bucket": "33-96", "n": %s, "accuracy": %s}, {"bucket": ">96", "n": %s, "accuracy": %s}], "results": [{"line": 1, "context_tokens": 80, "target_tokens": 1, "nll": 2.5, "greedy": true, "distance": null}]' \
        "$4" "$5" "${10:-953}" "$6" "${11:-1508}" "$7" "${12:-2660}" "$8" "${13:-32}" "$9")"
}
hs() { zs "$1" "$2" "$3" hellaswag "\"examples\": 10042, \"truncated\": 0, \"accuracy\": $4, \"accuracy_norm\": $5, \"results\": []"; }
wt() { zs "$1" "$2" "$3" wikitext "\"tokens\": 280000, \"words\": 245569, \"bytes\": 1290590, \"stride\": 512, \"windows\": 547, \"nll\": 1e6, \"token_perplexity\": $4, \"word_perplexity\": $5, \"bits_per_byte\": 1.1"; }
lam 124M baseline 0 0.18 40.1 0.028 0.25 0.198 0.1
lam 124M baseline 1 0.19 41.3 0.030 0.26 0.198 0.11
lam 124M baseline 2 0.176 39.8 0.026 0.249 0.198 0.1
hs 124M baseline 0 0.321 0.33
hs 124M baseline 1 0.325 0.34
wt 124M baseline 0 58.1 160.25
lam 124M sinklogit 0 0.18 42 0.03 0.26 0.19 0.115
lam 124M sinklogit 1 0.19 43 0.03 0.27 0.186 0.125
wt 124M sinklogit 0 57.0 150
wt 124M sinklogit 1 57.5 151
wt 10M sinklogit 0 300 900
# combo: lambada.json is not JSON, its HellaSwag still counts; combo2: a
# non-numeric accuracy_norm; normgate: three buckets
hs 124M combo 0 0.323 0.331
mkdir -p "$S/fineweb-124M/combo/s0/analysis" && printf '{"kind": "lambada", "accuracy": 0.18,' >"$S/fineweb-124M/combo/s0/analysis/lambada.json"
hs 124M combo2 0 0.324 '"0.33"'
wt 124M combo2 0 56.8 148.5
# projgate: HellaSwag on 100 examples (--limit) beside the others' 10042;
# sinklogit at 10M: a wikitext.json without its token count
zs 124M projgate 0 hellaswag '"examples": 100, "truncated": 0, "accuracy": 0.3, "accuracy_norm": 0.31, "results": []'
zs 10M sinklogit 1 wikitext '"words": 5, "bytes": 9, "token_perplexity": 300, "word_perplexity": 900'
zs 124M normgate 0 lambada '"accuracy": 0.185, "perplexity": 41, "by_distance": [{"bucket": "absent", "n": 953, "accuracy": 0.03}, {"bucket": "<=32", "n": 1508, "accuracy": 0.26}, {"bucket": "33-96", "n": 2692, "accuracy": 0.2}]'

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
check 'grep -qF "| Tier | Arm | LAMBADA acc | LAMBADA ppl | HellaSwag acc | HellaSwag acc_norm | WikiText-2 ppl (token) | WikiText-2 ppl (word) |" $W/r1/report.md &&
       grep -qF "**standard deviation** (n − 1)" $W/r1/report.md' "Table 10's header, and its note says SD, not SE"
check 'grep -qF "| 124M | baseline | 0.1820 ± 0.0072 (3 seeds) | 40.40 ± 0.79 (3 seeds) | 0.3230 ± 0.0028 (2 seeds) | 0.3350 ± 0.0071 (2 seeds) | 58.10 (1 seed) | 160.25 (1 seed) |" $W/r1/report.md' "Table 10: the baseline at 124M, mean ± SD (n − 1) as computed by hand, a single seed without ±"
check 'grep -qF "| 124M | sink logit | 0.1850 ± 0.0071 (2 seeds) | 42.50 ± 0.71 (2 seeds) | – | – | 57.25 ± 0.35 (2 seeds) | 150.50 ± 0.71 (2 seeds) |" $W/r1/report.md' "Table 10: the sink logit at 124M, a dash where no seed has hellaswag.json"
check 'grep -qF "| 124M | combo | – | – | 0.3230 (1 seed) | 0.3310 (1 seed) | – | – |" $W/r1/report.md &&
       grep -qF "| 124M | combo2 | – | – | – | – | 56.80 (1 seed) | 148.50 (1 seed) |" $W/r1/report.md' "Table 10: a malformed file leaves dashes, the run's other files still count"
check '! sed -n "/^## Zero-shot evaluation/,/^## LAMBADA/p" $W/r1/report.md | grep -qF "| 124M | norm gate | "' "Table 10: no row for an arm whose only file is malformed"
check '[ "$(grep -n "^## Zero-shot evaluation (Table 10)\|^## Telemetry\|^## LAMBADA accuracy by target distance (Table 11)\|^## Figures" $W/r1/report.md | cut -d: -f2- | tr "\n" "/")" = "## Telemetry/## Zero-shot evaluation (Table 10)/## LAMBADA accuracy by target distance (Table 11)/## Figures/" ] &&
       grep -A3 "^| Tier | Arm | LAMBADA acc" $W/r1/report.md | sed -n 3p | grep -qF "| fineweb 10M | sink logit | – | – | – | – | 300.00 (1 seed) | 900.00 (1 seed) |"' "Tables 10 and 11 after the other analysis tables, before the figures; tiers in the report's order"
check 'grep -qF "| Tier | Arm | target absent (n=953) | distance ≤ 32 (n=1508) | distance 33–96 (n=2660) | distance > 96 (n=32) |" $W/r1/report.md' "Table 11's header gives each bucket's n when every run agrees"
check 'grep -qF "| 124M | baseline | 0.0280 ± 0.0020 (3 seeds) | 0.2530 ± 0.0061 (3 seeds) | 0.1980 ± 0.0000 (3 seeds) | 0.1033 ± 0.0058 (3 seeds) |" $W/r1/report.md &&
       grep -qF "| 124M | sink logit | 0.0300 ± 0.0000 (2 seeds) | 0.2650 ± 0.0071 (2 seeds) | 0.1880 ± 0.0028 (2 seeds) | 0.1200 ± 0.0071 (2 seeds) |" $W/r1/report.md' "Table 11: accuracy by distance, mean ± SD over seeds"
check '[ "$(grep -c "^| [^|]* | [^|]* | [0-9.]* ± [0-9.]* (. seeds) | [0-9.]* ± [0-9.]* (. seeds) | [0-9.]* ± [0-9.]* (. seeds) | [0-9.]* ± [0-9.]* (. seeds) |$" $W/r1/report.md)" = 2 ]' "Table 11 has the two arms with a well-formed lambada.json"
# long CSV: tier,arm,column,n,mean,sd[,examples], full precision
csv_row() { # file, then the fields up to n, mean, sd (empty: none) and examples
    awk -F, -v k="$2" -v m="$3" -v s="$4" -v e="${5-}" -v ncol="$( [ "$1" = lambada_distance ] && echo 7 || echo 6)" '
        $1 "," $2 "," $3 "," $4 == k && NF == ncol && ($5 - m)^2 < 1e-24 &&
        (s == "" ? $6 == "" : ($6 - s)^2 < 1e-20) && (ncol == 6 || $7 == e) { f = 1 } END { exit !f }' "$W/r1/tables/$1.csv"
}
check '[ "$(head -1 $W/r1/tables/zeroshot.csv)" = tier,arm,column,n,mean,sd ] && [ "$(head -1 $W/r1/tables/lambada_distance.csv)" = tier,arm,column,n,mean,sd,examples ]' "the zero-shot CSVs' headers"
check 'csv_row zeroshot 124M,baseline,lambada_accuracy,3 0.182 0.0072111025509279784 &&
       csv_row zeroshot 124M,baseline,lambada_perplexity,3 40.4 0.79372539331937708 &&
       csv_row zeroshot 124M,sinklogit,lambada_accuracy,2 0.185 0.0070710678118654814 &&
       csv_row zeroshot 124M,baseline,wikitext_token_perplexity,1 58.1 "" &&
       ! grep -q "^124M,sinklogit,hellaswag" $W/r1/tables/zeroshot.csv' "tables/zeroshot.csv: mean and SD at full precision, one seed without SD, nothing where absent"
check 'csv_row lambada_distance 124M,baseline,">96",3 0.10333333333333333 0.0057735026918962623 32 &&
       csv_row lambada_distance 124M,sinklogit,absent,2 0.03 0 953 && [ "$(wc -l <$W/r1/tables/lambada_distance.csv)" = 9 ]' "tables/lambada_distance.csv: a line per bucket and arm, with the bucket's n"
check 'python3 -c "
import json, sys
j = json.load(open(sys.argv[1]))
z = {(r[\"tier\"], r[\"arm\"]): r[\"cells\"] for r in j[\"zeroshot\"][\"rows\"]}
c = z[(\"124M\", \"baseline\")][\"lambada_accuracy\"]
assert c[\"n\"] == 3 and abs(c[\"mean\"] - 0.182) < 1e-12 and abs(c[\"sd\"] - 0.0072111025509) < 1e-12, c
assert z[(\"124M\", \"sinklogit\")][\"hellaswag_accuracy\"] is None
assert z[(\"124M\", \"baseline\")][\"wikitext_word_perplexity\"][\"sd\"] is None
d = j[\"lambada_distance\"]
assert [(b[\"bucket\"], b[\"n\"]) for b in d[\"buckets\"]] == [(\"absent\", 953), (\"<=32\", 1508), (\"33-96\", 2660), (\">96\", 32)], d[\"buckets\"]
c = d[\"rows\"][0][\"cells\"][\"<=32\"]
assert d[\"rows\"][0][\"arm\"] == \"baseline\" and c[\"examples\"] == 1508 and abs(c[\"sd\"] - 0.0060827625303) < 1e-12, c
assert j[\"problems\"][\"zeroshot\"].startswith(\"- 124M: the runs\u2019 hellaswag.json\".replace(\"\u2019\", chr(39))), j[\"problems\"]
" $W/r1/report.json' "report.json: zeroshot and lambada_distance, mean and SD; its problems name the HellaSwag sizes"
check 'grep -qF -- "- 124M: the runs'"'"' hellaswag.json evaluated different numbers of examples (another file, or --limit?): $S/fineweb-124M/baseline/s0 10042; $S/fineweb-124M/baseline/s1 10042; $S/fineweb-124M/projgate/s0 100; $S/fineweb-124M/combo/s0 10042" $W/r1/report.md' \
    "runs of a tier that evaluated different numbers of HellaSwag examples are named with their counts"
check 'grep -qF -- "- $S/fineweb-10M/sinklogit/s1/analysis/wikitext.json: \"tokens\" is missing or not a positive count" $W/r1/report.md' \
    "a wikitext.json without its token count is named, not used"
check 'grep -qF -- "- $S/fineweb-124M/combo/s0/analysis/lambada.json: not readable JSON" $W/r1/report.md &&
       grep -qF -- "- $S/fineweb-124M/combo2/s0/analysis/hellaswag.json: \"accuracy_norm\" is missing or not a number in [0, 1]" $W/r1/report.md &&
       grep -qF -- "- $S/fineweb-124M/normgate/s0/analysis/lambada.json: \"by_distance\" is not a list of the 4 buckets absent, <=32, 33-96, >96" $W/r1/report.md' "malformed zero-shot files are named in Problems"
expect 1 "" -- "$REP" --no-figures --strict --quiet --out "$W/r4" "$S"
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
check 'grep -qF "## What the filter removes (Appendix G)" $W/r1/report.md &&
       grep -qxF "| fineweb 10M | norm gate | 1 | 40 | \`\"\\n\"\` 0.360, \`\" the\"\` 0.380 | \`\" which\"\` 0.560 |" $W/r1/report.md' \
    "tokens: the 10M norm gate from seed 1, seed 0's lists being malformed; texts as JSON strings with their mean gates"
check 'grep -qxF "| 124M | combo2 | 0 | – | \`\"\\|\"\` 0.300, \`\` \"\`\" \`\` 0.310, \`\"a,\\\"b\"\` 0.320 | #7 0.600 |" $W/r1/report.md' \
    "tokens: | escaped for the table, a backtick in a double-backtick span, no text as #id, no count ranked as a dash"
check 'grep -qF -- "- $S/fineweb-10M/normgate/s0/analysis/telemetry.json: tokens.most_attenuated[1] has no \"mean_gate\" in [0, 1]" $W/r1/report.md' \
    "a malformed tokens list is named in Problems"
check 'python3 -c "
import csv, sys
rows = list(csv.reader(open(sys.argv[1], newline=\"\")))
assert rows[0] == \"tier,arm,seed,end,rank,id,text,mean_gate,count\".split(\",\"), rows[0]
assert rows[1] == [\"fineweb 10M\", \"normgate\", \"1\", \"most_attenuated\", \"1\", \"198\", \"\\n\", \"0.35999999999999999\", \"50\"], rows[1]
assert [\"124M\", \"combo2\", \"0\", \"most_attenuated\", \"3\", \"11\", \"a,\\\"b\", \"0.32000000000000001\", \"30\"] in rows
assert [\"124M\", \"combo2\", \"0\", \"least_attenuated\", \"1\", \"7\", \"\", \"0.59999999999999998\", \"22\"] in rows
assert len(rows) == 8, len(rows)
" $W/r1/tables/tokens.csv' "tables/tokens.csv: one line per listed token, texts CSV-quoted"
check 'python3 -c "
import json, sys
t = json.load(open(sys.argv[1]))[\"tokens\"]
assert [(r[\"tier\"], r[\"arm\"], r[\"seed\"]) for r in t] == [(\"fineweb 10M\", \"normgate\", 1), (\"124M\", \"combo2\", 0)], t
assert t[0][\"ranked\"] == 40 and t[0][\"least_attenuated\"][0][\"text\"] == \" which\" and \"ranked\" not in t[1]
" $W/r1/report.json' "report.json: tokens, the rows with their lists"
check 'dat_is fig4a-sink-mass <<EOF
"fineweb 10M" 0.37 0.01 NaN NaN
"124M" 0.39 NaN 0.05 NaN
EOF
dat_is fig4b-blind-mass-ratio <<EOF
"fineweb 10M" 1.08 0.05 NaN NaN
"124M" 1.18 NaN 1.5 NaN
EOF
dat_is fig4c-content-share <<EOF
"fineweb 10M" 0.26 0.002 NaN NaN
"124M" 0.273 NaN 0.3 NaN
EOF' "Figure 4 (a)-(c): sink mass, blind-mass ratio and content share at the 30th percentile per tier, mean ± SE over seeds by hand"
check 'grep -qF "## Incidence (Table 12)" $W/r1/report.md &&
       grep -qxF "| fineweb 10M | baseline | 0.3700 ± 0.0100 (2 seeds) | 1.0800 ± 0.0500 (2 seeds) | 0.2600 ± 0.0020 (2 seeds) | 0.1500 ± 0.0100 (2 seeds) | – |" $W/r1/report.md &&
       grep -qxF "| 124M | sink logit | 0.0500 | 1.5000 | 0.3000 | 0.9000 | 0.4000 |" $W/r1/report.md' \
    "report.md: Table 12's row for the 10M baseline (two seeds, mean ± SE; no phantom)"
check 'awk -F, "\$1 == \"fineweb 10M\" && \$2 == \"baseline\" && \$3 == \"blind_mass_ratio_q30\" && \$4 == 2 && (\$5 - 1.08)^2 < 1e-24 && (\$6 - 0.05)^2 < 1e-24 { ok = 1 } END { exit !ok }" $W/r1/tables/incidence.csv' \
    "tables/incidence.csv: the 10M baseline's blind-mass ratio, 1.08 ± 0.05 at full precision"
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

# runs of one tier that disagree on the buckets' n: named, and each cell gives its n
cp -r "$S" "$W/zsd"
S=$W/zsd lam 124M sinklogit 1 0.19 43 0.03 0.27 0.186 null 100 200 300 0
"$REP" --out "$W/r5" --no-figures --quiet "$W/zsd"
check 'grep -qF "### Zero-shot evaluations" $W/r5/report.md &&
       grep -qF -- "- 124M: the runs'"'"' LAMBADA buckets (absent, ≤ 32, 33–96, > 96) hold different numbers of passages, which depend only on the data and the tokenizer (another file, or --limit?): n = 953/1508/2660/32 in $W/zsd/fineweb-124M/baseline/s0, $W/zsd/fineweb-124M/baseline/s1, $W/zsd/fineweb-124M/baseline/s2, $W/zsd/fineweb-124M/sinklogit/s0; n = 100/200/300/0 in $W/zsd/fineweb-124M/sinklogit/s1" $W/r5/report.md' "bucket n disagreeing within a tier: the runs are named in Problems, grouped by their n"
check 'grep -qF "| Tier | Arm | target absent | distance ≤ 32 | distance 33–96 | distance > 96 |" $W/r5/report.md &&
       grep -qF "| 124M | baseline | 0.0280 ± 0.0020 (3 seeds, n=953) | 0.2530 ± 0.0061 (3 seeds, n=1508) | 0.1980 ± 0.0000 (3 seeds, n=2660) | 0.1033 ± 0.0058 (3 seeds, n=32) |" $W/r5/report.md &&
       grep -qF "| 124M | sink logit | 0.0300 ± 0.0000 (2 seeds, n=100–953) | 0.2650 ± 0.0071 (2 seeds, n=200–1508) | 0.1880 ± 0.0028 (2 seeds, n=300–2660) | 0.1150 (1 seed, n=0–32) |" $W/r5/report.md' "then each cell gives the n of its runs, and an empty bucket adds no accuracy"
check 'grep -q "^124M,sinklogit,absent,2,0.0[0-9]*,0,$" $W/r5/tables/lambada_distance.csv && grep -q "^124M,baseline,absent,3,.*,953$" $W/r5/tables/lambada_distance.csv &&
       python3 -c "import json,sys; d = json.load(open(sys.argv[1]))[\"lambada_distance\"]; assert all(b[\"n\"] is None for b in d[\"buckets\"]); assert d[\"rows\"][1][\"cells\"][\">96\"][\"examples\"] is None" $W/r5/report.json' "CSV and JSON: no single n where the runs disagree"

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

# runs of one tier trained with other settings than their arm and seed
# (a variant mixed into the sweep): named in Problems, --strict fails
mkdir -p "$W/mix"
cp -r "$W/real/baseline-s0" "$W/real/combo2-s0" "$W/mix/"
"$SG" train --tier test --arm baseline --seed 1 --rotary_dims 8 --parallel_residual true --data "$D" --ckpt_every 0 \
    --out "$W/mix/rope-s1" 2>/dev/null
expect 0 "3 runs \(3 done" -- "$REP" --no-figures --out "$W/rmix" "$W/mix"
check 'grep -qF "### Runs of one tier trained with other settings" $W/rmix/report.md &&
       grep -qF -- "- test: rotary_dims: 0 -> 8; parallel_residual: false -> true (the first run, $W/mix/baseline-s0, has the former): $W/mix/rope-s1" $W/rmix/report.md &&
       python3 -c "import json,sys; assert \"rotary_dims\" in json.load(open(sys.argv[1]))[\"problems\"][\"settings\"]" $W/rmix/report.json' \
    "a run of the tier with other settings is named with what differs, in report.md and report.json"
expect 1 "" -- "$REP" --no-figures --strict --quiet --out "$W/rmix2" "$W/mix"
check 'grep -qF -- "- test: warmup: 2 -> 0; lr: 0.0006 -> 1e+30; lr_min: 6e-05 -> 0 (the first run, $W/real/baseline-s0, has the former): $W/real/projgate-s0" $W/real/report/report.md &&
       [ "$(grep -c "^- test: " $W/real/report/report.md)" = 1 ]' "the real runs: only the one trained with another learning rate is named (failed or not)"

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
