#!/usr/bin/env bash
# End-to-end tests of `sgtrain zeroshot` (docs/zeroshot.md): every arm's
# LAMBADA, HellaSwag and WikiText-2 numbers against the independent
# reference (tests/zeroshot/ref_zeroshot.py: tiktoken and the NumPy model),
# the hand-made passages' distances and buckets, the windows' count, the
# same numbers for any batch size and on a second run, and every bad input
# (flags, runs, vocabularies, data files) exiting 2 with a clear message
# and writing nothing.  Needs `make data` (GPT-2's vocabulary).
set -u
B=${1:-build}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SG=$(cd "$B" && pwd)/sgtrain
SYN=$(cd "$B" && pwd)/sgsynth
PY=$ROOT/build/venv/bin/python
V=$ROOT/data/vocab/gpt2.tiktoken
F=$ROOT/tests/zeroshot
W=$(mktemp -d)
trap '[ -n "${KEEP:-}" ] || rm -rf "$W"' EXIT
E2E_NAME=e2e_zeroshot
source "$(dirname "$0")/lib.sh"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
json() { "$PY" -c "import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$@"; }
if [ ! -s "$V" ]; then
    bad "no vocabulary at $V: run \`make data\` first"
    finish
fi
have_ref=0
"$PY" -c 'import numpy, tiktoken' 2>/dev/null && have_ref=1
check '[ $have_ref = 1 ]' "NumPy and tiktoken in build/venv (tools/install-deps.sh installs them)"

"$SYN" --out "$W/data" --vocab 50257 --val-tokens 4000 --train-tokens 40000 >/dev/null
ZS() { "$SG" zeroshot "$@" --vocab "$V" --quiet; }

# --- every arm against the reference -------------------------------------------
for arm in baseline offbyone sinklogit sinktoken normgate renorm projgate combo combo2; do
    d=$W/$arm
    "$SG" train --tier test --arm $arm --seed 0 --vocab_size 50257 --iters 3 --data "$W/data" --out "$d" >/dev/null 2>&1
    "$SG" export "$d" -o "$d/model.safetensors" 2>/dev/null
    ok_all=1
    ZS "$d" --task lambada --file "$F/lambada.jsonl" || ok_all=0
    ZS "$d" --task hellaswag --file "$F/hellaswag.jsonl" || ok_all=0
    ZS "$d" --task wikitext --file "$F/wikitext.raw" || ok_all=0
    check '[ $ok_all = 1 ] && [ "$(cd "$d/analysis" && ls | xargs)" = "hellaswag.json lambada.json wikitext.json" ]' \
        "$arm: the three tasks write analysis/{hellaswag,lambada,wikitext}.json"
    if [ $have_ref = 1 ]; then
        out=$("$PY" "$ROOT/tests/zeroshot/ref_zeroshot.py" "$d" "$d/model.safetensors" "$V" 2>&1)
        check 'grep -qE "ref_zeroshot: [0-9]+ passed, 0 failed" <<<"$out"' "$arm: the reference"$'\n'"$out"
    fi
done

# --- hand-made cases --------------------------------------------------------------
d=$W/combo2
L=$d/analysis/lambada.json H=$d/analysis/hellaswag.json T=$d/analysis/wikitext.json
check '[ "$(json $L "[r[\"line\"] for r in d[\"results\"]]")" = "[1, 2, 3, 5, 6, 7, 8]" ]' \
    "LAMBADA: 7 passages, the blank line 4 skipped, 1-based lines"
check '[ "$(json $L "[(b[\"bucket\"], b[\"n\"]) for b in d[\"by_distance\"]]")" = "[('"'"'absent'"'"', 1), ('"'"'<=32'"'"', 4), ('"'"'33-96'"'"', 1), ('"'"'>96'"'"', 1)]" ]' \
    "LAMBADA buckets as the passages were written: one target never seen before, one 5 filler sentences back, one 2 back, four close"
check '[ "$(json $L "[r[\"distance\"] is None for r in d[\"results\"]]")" = "[False, True, False, False, False, False, False]" ]' \
    "LAMBADA: the passage without an earlier occurrence (\"contraption\") has a null distance"
check '[ "$(json $L "d[\"results\"][2][\"distance\"] == d[\"results\"][2][\"context_tokens\"]")" = True ]' \
    "LAMBADA: \"Anna\" first stands at the passage's start without a space: distance = all its context tokens"
check '[ "$(json $L "d[\"truncated\"] == sum(r[\"context_tokens\"] + r[\"target_tokens\"] > 17 for r in d[\"results\"])")" = True ]' \
    "LAMBADA: truncated counts the passages longer than the context of 16 + 1 tokens ($(json $L "d['truncated']"))"
check '[ "$(json $L "abs(d[\"accuracy\"] - sum(r[\"greedy\"] for r in d[\"results\"]) / 7) < 1e-15 and abs(d[\"perplexity\"] - __import__(\"math\").exp(sum(r[\"nll\"] for r in d[\"results\"]) / 7)) < 1e-9 * d[\"perplexity\"]")" = True ]' \
    "LAMBADA: accuracy and perplexity from the passages' own flags and NLLs"
check '[ "$(json $H "[(r[\"line\"], r[\"label\"], r[\"chars\"]) for r in d[\"results\"]]")" = "[(1, 3, [45, 38, 26, 41]), (3, 1, [28, 51, 21, 28]), (4, 0, [37, 20, 27, 18])]" ]' \
    "HellaSwag: lines, labels (\"1\" as a string) and the cleaned choices' lengths in code points (\" Water the plants every day.\" 28, \"Ask a neighbour for éclairs.\" 28, a bracket open across a newline kept: 27, no-break and em spaces stripped: 18)"
check '[ "$(json $T "(d[\"tokens\"], d[\"words\"], d[\"bytes\"], d[\"stride\"], d[\"windows\"])")" = "(252, 209, 1037, 8, 31)" ]' \
    "WikiText-2: 252 tokens, 209 words (a no-break and an ideographic space separate words too), 1037 bytes; stride 8 (half of 16) gives 1 + ceil((252 - 16) / 8) = 31 windows"
ZS "$d" --task wikitext --file "$F/wikitext.raw" --stride 16 --out "$W/s16"
check '[ "$(json $W/s16/wikitext.json "(d[\"tokens\"], d[\"windows\"])")" = "(252, 16)" ]' "--stride 16: 16 windows side by side"
nll8=$(json $T "d['nll']")
check '[ "$(json $W/s16/wikitext.json "d[\"nll\"] > 0 and d[\"nll\"] != $nll8")" = True ]' \
    "--stride 16 scores the same tokens with less context: another NLL"

# --- the same numbers whatever the batch, and on a second run -------------------
# Another batch is another shape for the BLAS, whose sums may round
# differently (measured: 1e-9 relative): numbers within 1e-7 relative,
# everything else equal.
same() {
    "$PY" - "$1" "$2" <<'PYEOF'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
a.pop("setup"), b.pop("setup")
def eq(x, y):
    if isinstance(x, bool) or isinstance(y, bool) or not isinstance(x, (int, float)):
        if isinstance(x, dict):
            return isinstance(y, dict) and x.keys() == y.keys() and all(eq(x[k], y[k]) for k in x)
        if isinstance(x, list):
            return isinstance(y, list) and len(x) == len(y) and all(eq(u, v) for u, v in zip(x, y))
        return x == y
    return isinstance(y, (int, float)) and abs(x - y) <= 1e-7 * abs(y) + 1e-12
sys.exit(0 if eq(a, b) else 1)
PYEOF
}
strip_setup() { "$PY" -c "import json,sys; d=json.load(open(sys.argv[1])); d.pop('setup'); print(json.dumps(d, sort_keys=True))" "$1"; }
for t in lambada:lambada.jsonl hellaswag:hellaswag.jsonl wikitext:wikitext.raw; do
    task=${t%%:*} file=$F/${t#*:}
    ZS "$d" --task $task --file "$file" --out "$W/again"
    ZS "$d" --task $task --file "$file" --out "$W/b1" --batch-size 1
    ZS "$d" --task $task --file "$file" --out "$W/b3" --batch-size 3 --threads 1
    check '[ "$(strip_setup $W/again/$task.json)" = "$(strip_setup $d/analysis/$task.json)" ]' "$task: a second run gives the same file"
    check 'same $W/b1/$task.json $d/analysis/$task.json && same $W/b3/$task.json $d/analysis/$task.json' \
        "$task: batches of 1 and 3 (one thread) give what batches of 8 give: padding changes nothing"
done
ZS "$d" --task lambada --file "$F/lambada.jsonl" --limit 2 --out "$W/lim"
check '[ "$(json $W/lim/lambada.json "(d[\"examples\"], [r[\"line\"] for r in d[\"results\"]])")" = "(2, [1, 2])" ]' "--limit 2: the first two passages"
if [ $have_ref = 1 ]; then
    for o in lim s16 b3; do
        out=$("$PY" "$ROOT/tests/zeroshot/ref_zeroshot.py" "$d" "$d/model.safetensors" "$V" --analysis "$W/$o" 2>&1)
        check 'grep -qE "ref_zeroshot: [0-9]+ passed, 0 failed" <<<"$out"' "the reference on $o (--limit 2, --stride 16, batches of 3)"$'\n'"$out"
    done
    # the reference is not blind: an NLL 1e-3 off, a greedy flag and a
    # choice's length, each changed in a copy, fail it
    mkdir -p "$W/mut" && cp "$d"/analysis/{lambada,hellaswag,wikitext}.json "$W/mut/"
    "$PY" - "$W/mut" <<'PYEOF'
import json, sys
def edit(task, f):
    p = f"{sys.argv[1]}/{task}.json"
    d = json.load(open(p))
    f(d)
    json.dump(d, open(p, "w"))
edit("lambada", lambda d: d["results"][0].update(nll=d["results"][0]["nll"] + 1e-3))
edit("hellaswag", lambda d: d["results"][2]["chars"].__setitem__(2, 22))
edit("wikitext", lambda d: d.update(nll=d["nll"] * (1 + 1e-4)))
PYEOF
    out=$("$PY" "$ROOT/tests/zeroshot/ref_zeroshot.py" "$d" "$d/model.safetensors" "$V" --analysis "$W/mut" 2>&1); rc=$?
    check '[ $rc = 1 ] && grep -q "lambada.results\[line 1\].nll" <<<"$out" && grep -q "hellaswag.*chars" <<<"$out" && grep -q "wikitext.nll" <<<"$out"' \
        "the reference fails a LAMBADA NLL 1e-3 off, a HellaSwag length and a WikiText NLL 1e-4 off"$'\n'"$out"
fi
ZS "$d/checkpoint.bin" --task hellaswag --file "$F/hellaswag.jsonl"
check '[ "$(strip_setup $d/analysis/hellaswag.json)" = "$(strip_setup $W/again/hellaswag.json)" ]' \
    "a checkpoint file: the same numbers, written next to it"
expect 0 "hellaswag: 3 examples, accuracy [0-9.]+, accuracy_norm [0-9.]+" -- "$SG" zeroshot "$d" --task hellaswag \
    --file "$F/hellaswag.jsonl" --vocab "$V" --out "$W/sum"

# the data's manifest names the vocabulary (sgtok writes one): no --vocab needed
printf '{"tokenizer": {"vocab": "%s", "vocab_sha256": "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930"}}\n' "$V" >"$W/data/manifest.json"
expect 0 "wrote $W/man/lambada.json" -- "$SG" zeroshot "$d" --task lambada --file "$F/lambada.jsonl" --out "$W/man"

# --- in a sweep: analyses entries with zeroshot: (docs/sweeps.md) ------------------------
SW=$(cd "$B" && pwd)/sgsweep
cat >"$W/z.yaml" <<YAML
name: z
out: $W/sweep
sgtrain: $SG
data: {synth: $W/data}
set: {ckpt_every: 0, vocab_size: 50257}
groups:
  small: {tier: test, arms: [baseline, combo2], seeds: 2}
analyses:
  lambada:
    group: small
    seeds: all
    zeroshot: {task: lambada, file: $F/lambada.jsonl, vocab: $V}
  wikitext:
    group: small
    zeroshot: {task: wikitext, file: "$F/wikitext.raw", stride: 4, batch-size: 3, vocab: $V}
report: {figures: false}
YAML
plan=$("$SW" plan "$W/z.yaml" 2>&1)
check 'grep -q "^sweep z: 4 training tasks in 1 groups, 6 analysis tasks in 2 analyses" <<<"$plan" &&
       grep -qxF "$SG zeroshot $W/sweep/small/combo2-s1 --task lambada --file $F/lambada.jsonl --vocab $V" <<<"$plan" &&
       grep -qxF "$SG zeroshot $W/sweep/small/baseline-s0 --task wikitext --file $F/wikitext.raw --vocab $V --batch-size 3 --stride 4" <<<"$plan"' \
    "sgsweep plan: a zero-shot task for every seed of lambada, seed 0 of wikitext, with the exact commands"$'\n'"$plan"
"$SW" run "$W/z.yaml" --local >"$W/sweep.log" 2>&1
check '[ "$(cd "$W/sweep/small" && ls */analysis/*.json | xargs)" = "baseline-s0/analysis/lambada.json baseline-s0/analysis/wikitext.json baseline-s1/analysis/lambada.json combo2-s0/analysis/lambada.json combo2-s0/analysis/wikitext.json combo2-s1/analysis/lambada.json" ]' \
    "sgsweep run --local: each run's zero-shot files after it"$'\n'"$(tail -n 5 "$W/sweep.log")"
check '[ "$(json $W/sweep/small/combo2-s0/analysis/wikitext.json "(d[\"stride\"], d[\"windows\"], d[\"setup\"][\"batch_size\"])")" = "(4, 60, 3)" ]' \
    "the entry's stride and batch size reach sgtrain zeroshot: 1 + ceil((252 - 16) / 4) = 60 windows"
check 'grep -q "| test | combo2 | 0.0000 ± 0.0000 (2 seeds) | [0-9.]* ± [0-9.]* (2 seeds) | – | – | [0-9.]* (1 seed) |" "$W/sweep/report/report.md" && grep -q "Table 11" "$W/sweep/report/report.md"' \
    "the sweep's report has Tables 10 and 11 from the zero-shot files"
expect 0 "analyses: 0 run now, 6 already done" -- "$SW" run "$W/z.yaml" --local
badzs() { # NAME PATTERN; the zeroshot mapping's lines on stdin (from line 9)
    { printf 'name: x\nout: %s/zs-out\ndata: {d: /tmp}\ngroups:\n  g: {tier: test, arms: [baseline], seeds: 1}\nanalyses:\n  a:\n    group: g\n' "$W"
      cat; } >"$W/$1.yaml"
    expect 2 "$2" -- "$SW" plan "$W/$1.yaml"
}
badzs zstask 'zstask.yaml:9:22: zeroshot: unknown task "piqa" \(known: lambada, hellaswag, wikitext\)' <<<'    zeroshot: {task: piqa, file: x}'
badzs zsnotask 'zsnotask.yaml:9:15: analysis a: zeroshot needs a task' <<<'    zeroshot: {file: x}'
badzs zsnofile 'zsnofile.yaml:9:15: analysis a: zeroshot needs the task.s file' <<<'    zeroshot: {task: lambada}'
badzs zsempty 'zsempty.yaml:9:37: zeroshot: file is empty' <<<'    zeroshot: {task: lambada, file: ""}'
badzs zskey 'zskey.yaml:9:40: unknown key "dose" in zeroshot \(known: task, file, vocab, batch_size, stride, limit, threads\)' <<<'    zeroshot: {task: lambada, file: x, dose: 1}'
badzs zstwice 'zstwice.yaml:9:40: zeroshot: file is given twice' <<<'    zeroshot: {task: lambada, file: x, file: y}'
badzs zsstride 'zsstride.yaml:9:48: zeroshot: stride is for the wikitext task only' <<<'    zeroshot: {task: lambada, file: x, stride: 4}'
badzs zslimit 'zslimit.yaml:9:48: zeroshot: limit is for lambada and hellaswag' <<<'    zeroshot: {task: wikitext, file: x, limit: 4}'
badzs zsbig 'zsbig.yaml:9:49: zeroshot: stride 17 exceeds the context of group g \(test: 16 tokens\)' <<<'    zeroshot: {task: wikitext, file: x, stride: 17}'
badzs zsneg 'zsneg.yaml:9:54: batch_size: expected an integer in 1..4096, got "0"' <<<'    zeroshot: {task: hellaswag, file: x, batch_size: 0}'
badzs zslist 'zslist.yaml:9:15: zeroshot must be a mapping' <<<'    zeroshot: [lambada]'
badzs zsboth 'zsboth.yaml:10:15: analysis a: flags are sgtrain analyze.s and zeroshot is sgtrain zeroshot.s: an entry runs one of them' <<'EOF'
    flags: {batches: 1}
    zeroshot: {task: lambada, file: x}
EOF
badzs zsdup 'zsdup.yaml:1[0-9]:[0-9]+: .*lambada' <<'EOF'
    zeroshot: {task: lambada, file: x}
  b:
    group: g
    zeroshot: {task: lambada, file: y}
EOF
check '[ ! -e "$W/zs-out" ]' "a bad zeroshot entry writes nothing"

# --- bad inputs: exit 2, a clear message, nothing written ----------------------------
sum_before=$(cat "$d"/analysis/*.json | md5sum)
bad_in() { # name, pattern, then the file's text on stdin: LAMBADA unless the name says hellaswag/wikitext
    local name=$1 pat=$2 task=lambada
    case $name in hs*) task=hellaswag ;; wt*) task=wikitext ;; esac
    cat >"$W/$name"
    expect 2 "$pat" -- "$SG" zeroshot "$d" --task $task --file "$W/$name" --vocab "$V" --quiet
}
bad_in notjson "notjson:2: not a JSON object" <<'EOF'
{"text": "a fine passage ends here"}
{"text": "broken
EOF
bad_in array "array:1: not a JSON object" <<<'["text", "a b"]'
bad_in trailing "trailing:1: not a JSON object" <<<'{"text": "a b"} x'
bad_in notext "notext:1: expected an object with a string \"text\"" <<<'{"txt": "a b"}'
bad_in numtext "numtext:1: expected an object with a string \"text\"" <<<'{"text": 42}'
bad_in nospace "nospace:1: no space" <<<'{"text": "oneword"}'
bad_in endspace "endspace:1: the passage ends in a space" <<<'{"text": "two words "}'
bad_in startspace "startspace:1: nothing before the target word" <<<'{"text": " word"}'
bad_in empty "empty: no examples" </dev/null
bad_in blanks "blanks: no examples" <<<$'\n  \n'
E='"endings": ["a", "b", "c", "d"]'
bad_in hs3 "hs3:1: expected strings .*4 strings" <<<'{"activity_label": "x", "ctx_a": "y", "ctx_b": "z", "endings": ["a", "b", "c"], "label": 0}'
bad_in hslabel "hslabel:1: .*label\" 0..3" <<<"{\"activity_label\": \"x\", \"ctx_a\": \"y\", \"ctx_b\": \"z\", $E, \"label\": 4}"
bad_in hslabels "hslabels:1: .*label\" 0..3" <<<"{\"activity_label\": \"x\", \"ctx_a\": \"y\", \"ctx_b\": \"z\", $E, \"label\": \"x1\"}"
bad_in hsnolabel "hsnolabel:1: .*label\" 0..3" <<<"{\"activity_label\": \"x\", \"ctx_a\": \"y\", \"ctx_b\": \"z\", $E}"
bad_in hsctx "hsctx:1: expected strings" <<<"{\"activity_label\": \"x\", \"ctx_a\": 5, \"ctx_b\": \"z\", $E, \"label\": 0}"
bad_in hsend "hsend:1: ending 2 is not a string" <<<'{"activity_label": "x", "ctx_a": "y", "ctx_b": "z", "endings": ["a", "b", 3, "d"], "label": 0}'
bad_in hsempty "hsempty:1: ending 1 is empty after clean-up" <<<'{"activity_label": "x", "ctx_a": "y", "ctx_b": "z", "endings": ["a", " [gone] ", "c", "d"], "label": 0}'
bad_in wtempty "wtempty: empty file" </dev/null
expect 2 "nowhere.jsonl: No such file or directory" -- "$SG" zeroshot "$d" --task lambada --file "$W/nowhere.jsonl" --vocab "$V"
expect 2 "is a directory|Is a directory|read error" -- "$SG" zeroshot "$d" --task lambada --file "$W" --vocab "$V"
expect 2 "--task is required" -- "$SG" zeroshot "$d" --file "$F/lambada.jsonl"
expect 2 "--task: unknown 'piqa' \(expected lambada, hellaswag or wikitext\)" -- "$SG" zeroshot "$d" --task piqa --file x
expect 2 "--file is required: the hellaswag data" -- "$SG" zeroshot "$d" --task hellaswag
expect 2 "no run directory or checkpoint given" -- "$SG" zeroshot --task lambada --file x
expect 2 "one run or checkpoint only" -- "$SG" zeroshot "$d" "$d" --task lambada --file x
expect 2 "unknown flag '--bogus'" -- "$SG" zeroshot "$d" --task lambada --file x --bogus 1
expect 2 "--batch-size: expected an integer in \[1, 4096\], got '0'" -- "$SG" zeroshot "$d" --task lambada --file x --batch-size 0
expect 2 "--stride is for --task wikitext only" -- "$SG" zeroshot "$d" --task lambada --file x --stride 4
expect 2 "--limit is for lambada and hellaswag" -- "$SG" zeroshot "$d" --task wikitext --file x --limit 4
expect 2 "--stride 17 exceeds the model's context of 16 tokens" -- "$SG" zeroshot "$d" --task wikitext --file "$F/wikitext.raw" --stride 17 --vocab "$V"
expect 2 "--vocab: .*missing.tiktoken" -- "$SG" zeroshot "$d" --task lambada --file "$F/lambada.jsonl" --vocab "$W/missing.tiktoken"
head -c 1000 "$V" >"$W/cut.tiktoken"
expect 2 "--vocab: .*cut.tiktoken" -- "$SG" zeroshot "$d" --task lambada --file "$F/lambada.jsonl" --vocab "$W/cut.tiktoken"
printf '{"tokenizer": {"vocab": "%s", "vocab_sha256": "%064d"}}\n' "$V" 0 >"$W/data/manifest.json"
expect 2 "gpt2.tiktoken is not the vocabulary the run was trained with \(SHA-256 306cd27f03c1a714..., the data manifest says 0000000000000000...\)" \
    -- "$SG" zeroshot "$d" --task lambada --file "$F/lambada.jsonl"
rm "$W/data/manifest.json"
expect 2 "no vocabulary: the run's data \(.*\) has no manifest naming one; give --vocab" -- "$SG" zeroshot "$d" --task lambada --file "$F/lambada.jsonl"
"$SYN" --out "$W/data512" --vocab 512 --val-tokens 2000 --train-tokens 4000 >/dev/null
"$SG" train --tier test --arm baseline --seed 0 --iters 3 --data "$W/data512" --out "$W/small" >/dev/null 2>&1
expect 2 "gpt2.tiktoken has 50257 tokens but the model only 512" -- "$SG" zeroshot "$W/small" --task lambada --file "$F/lambada.jsonl" --vocab "$V"
echo "not a checkpoint" >"$W/garbage.bin"
expect 2 "garbage.bin" -- "$SG" zeroshot "$W/garbage.bin" --task lambada --file "$F/lambada.jsonl" --vocab "$V"
expect 2 "nothere: No such file or directory" -- "$SG" zeroshot "$W/nothere" --task lambada --file "$F/lambada.jsonl" --vocab "$V"
check '[ "$(cat "$d"/analysis/*.json | md5sum)" = "$sum_before" ] && [ ! -e "$W/small/analysis" ] && [ ! -e "$W/analysis" ]' \
    "bad inputs leave the existing files as they were and write nothing"
expect 0 "usage: sgtrain zeroshot" -- "$SG" zeroshot --help
finish
