#!/usr/bin/env bash
# End-to-end tests of `sgtrain toy`: a small grid writes the tables, the
# JSON and the figures; the numbers do not depend on the thread count; the
# routing-visible baseline learns; every bad flag exits 2 with a clear
# message and writes nothing.
set -u
B=${1:-build}
SG=$(cd "$B" && pwd)/sgtrain
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
E2E_NAME=e2e_toy
source "$(dirname "$0")/lib.sh"
PY=python3
S="--loads 1,2 --seeds 2 --steps 300 --batch 32 --lr 3e-3 --eval-seqs 256 --quiet"

expect 0 "" -- "$SG" toy $S --threads 2 --out "$W/t2"
"$SG" toy $S --threads 1 --out "$W/t1" --no-figures
for f in toy.md toy.csv toy.json; do check '[ -s "$W/t2/$f" ]' "writes $f"; done
if command -v gnuplot >/dev/null; then
    for c in blind visible; do
        check '[ -s "$W/t2/figures/fig3-toy-$c.png" ] && [ -s "$W/t2/figures/fig3-toy-$c.svg" ]' "figure 3 ($c): PNG and SVG"
    done
fi
check '[ -s "$W/t2/figures/fig3-toy-blind.dat" ] && [ ! -e "$W/t1/figures" ]' "figure data written; --no-figures draws none"
runs() { "$PY" -c "import json,sys; print(json.dumps([(r['condition'], r['arm'], r['load'], r['seed'], r['error'], r['bce']) for r in json.load(open(sys.argv[1]))['runs']], sort_keys=True))" "$1"; }
check '[ "$(runs "$W/t1/toy.json" | tr -d " " | tr "]" "\n" | sort)" = "$(runs "$W/t2/toy.json" | tr -d " " | tr "]" "\n" | sort)" ]' \
    "every run's numbers identical with 1 and 2 threads"
n=$("$PY" -c "import json,sys; print(len(json.load(open(sys.argv[1]))['runs']))" "$W/t2/toy.json")
check '[ "$n" = 40 ]' "2 loads x 5 arms x 2 conditions x 2 seeds = 40 runs (got $n)"
check 'grep -q "| routing-slot control |" "$W/t2/toy.md" && grep -q "| load 1 | load 2 |" "$W/t2/toy.md"' "the table"
check 'grep -q "^visible,oracle,2,2," "$W/t2/toy.csv"' "the CSV"
check 'grep -q "## Where the head looks" "$W/t2/toy.md" && grep -q "\"relevant_mass\"" "$W/t2/toy.json"' "the attention statistics"
# learning: the routing-visible baseline beats "always absent" (error 0.45) clearly
err=$("$PY" -c "
import json,sys
r=[x for x in json.load(open(sys.argv[1]))['runs'] if x['condition']=='visible' and x['arm']=='baseline']
print(max(x['error'] for x in r), min(x['first_bce']-x['train_bce'] for x in r))" "$W/t2/toy.json")
check 'awk -v e="${err% *}" -v d="${err#* }" "BEGIN { exit !(e < 0.35 && d > 0.05) }"' "short runs learn (worst error, least loss drop: $err)"

# --- bad flags: exit 2, a message, nothing written --------------------------
expect 2 "--loads: expected an integer" -- "$SG" toy --loads 1,x --out "$W/bad"
expect 2 "--loads: 2 is listed twice" -- "$SG" toy --loads 2,2 --out "$W/bad"
expect 2 "--loads: expected an integer" -- "$SG" toy --loads 0 --out "$W/bad"
expect 2 "--arms: unknown 'gated'" -- "$SG" toy --arms baseline,gated --out "$W/bad"
expect 2 "--conditions: unknown 'both'" -- "$SG" toy --conditions both --out "$W/bad"
expect 2 "--seeds: expected an integer" -- "$SG" toy --seeds 0 --out "$W/bad"
expect 2 "--steps: expected an integer" -- "$SG" toy --steps 1.5 --out "$W/bad"
expect 2 "--lr: expected a number" -- "$SG" toy --lr -1 --out "$W/bad"
expect 2 "--p-relevant: expected a number" -- "$SG" toy --p-relevant 2 --out "$W/bad"
expect 2 "--batch needs a value" -- "$SG" toy --batch
expect 2 "unknown flag '--bogus'" -- "$SG" toy --bogus 1 --out "$W/bad"
expect 2 "unexpected argument 'extra'" -- "$SG" toy extra --out "$W/bad"
expect 2 "cannot hold 16 relevant" -- "$SG" toy --loads 1 --dim 16 --relevant 16 --out "$W/bad"
check '[ ! -e "$W/bad" ]' "bad flags write nothing"
expect 0 "--loads LIST" -- "$SG" toy --help
touch "$W/file"
expect 1 "$W/file" -- "$SG" toy --loads 1 --seeds 1 --steps 2 --batch 4 --eval-seqs 8 --arms baseline --conditions blind --out "$W/file/sub" --quiet
finish
