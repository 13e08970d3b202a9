#!/usr/bin/env bash
# End-to-end tests of `sgtrain generate` (docs/generate.md): every arm's
# greedy and sampled continuations against the independent reference
# (tests/generate/ref_generate.py: tiktoken, the NumPy model without a
# cache, the counter-based draws), the same samples on a second run, for
# any thread count and any number of samples beside them, the text on
# stdout, and every bad input (flags, prompts, vocabularies, checkpoints,
# output paths) exiting 2 with a clear message and writing nothing.
# Needs `make data` (GPT-2's vocabulary).
set -u
B=${1:-build}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SG=$(cd "$B" && pwd)/sgtrain
SYN=$(cd "$B" && pwd)/sgsynth
MK=$(cd "$B" && pwd)/tests/test_analysis
PY=$ROOT/build/venv/bin/python
V=$ROOT/data/vocab/gpt2.tiktoken
W=$(mktemp -d)
trap '[ -n "${KEEP:-}" ] || rm -rf "$W"' EXIT
E2E_NAME=e2e_generate
source "$(dirname "$0")/lib.sh"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
json() { "$PY" -c "import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$@"; }
strip_setup() { "$PY" -c "import json,sys; d=json.load(open(sys.argv[1])); d.pop('setup'); print(json.dumps(d, sort_keys=True))" "$1"; }
if [ ! -s "$V" ]; then
    bad "no vocabulary at $V: run \`make data\` first"
    finish
fi
have_ref=0
"$PY" -c 'import numpy, tiktoken' 2>/dev/null && have_ref=1
check '[ $have_ref = 1 ]' "NumPy and tiktoken in build/venv (tools/install-deps.sh installs them)"
ref() { "$PY" "$ROOT/tests/generate/ref_generate.py" "$@" 2>&1; }

# Models whose gates spread over (0, 1) and whose phantom has weight
# (tests/tiny.h), over GPT-2's 50,257 tokens: 2 layers, 2 heads, C 16,
# a context of 16 tokens.
"$SYN" --out "$W/data" --vocab 50257 --val-tokens 2000 --train-tokens 2000 >/dev/null
G() { "$SG" generate "$@" --vocab "$V" --quiet; }
P="The cat sat"

# --- every arm against the reference ----------------------------------------------
# (ARM+gpt2, ARM+neox: the arm as `sgtrain import` builds GPT-2 and GPT-NeoX,
# tests/tiny.h: the key-value cache rotates each new key at its position)
for arm in baseline offbyone sinklogit sinktoken normgate renorm projgate combo combo2 baseline+gpt2 combo2+gpt2 \
           baseline+neox sinktoken+neox combo2+neox; do
    d=$W/$arm
    "$MK" --write-ckpt "$d" $arm "$W/data"
    "$SG" export "$d" -o "$d/model.safetensors" 2>/dev/null
    ok_all=1
    G "$d" --prompt "$P" --temperature 0 --json "$d/greedy.json" >/dev/null || ok_all=0
    G "$d" --prompt "$P" --temperature 0.9 --top-k 200 --top-p 0.95 --samples 3 --seed 5 --telemetry \
        --json "$d/sampled.json" >/dev/null || ok_all=0
    G "$d" --prompt "" --temperature 1.3 --ignore-eot --tokens 16 --seed 2 --json "$d/long.json" >/dev/null || ok_all=0
    check '[ $ok_all = 1 ]' "$arm: greedy, sampled (top-k, top-p, 3 samples, telemetry) and a whole context past <|endoftext|> exit 0"
    if [ $have_ref = 1 ]; then
        out=$(ref "$d/model.safetensors" "$V" "$d/greedy.json" "$d/sampled.json" "$d/long.json")
        check 'grep -qE "ref_generate: [0-9]+ passed, 0 failed" <<<"$out"' "$arm: the reference"$'\n'"$out"
    fi
done

if [ $have_ref = 1 ]; then
    # the reference is not blind: one token, one log-probability or one
    # phantom mass 1e-4 off, or a gate missing, changed in a copy, fails it
    for mut in 'd["samples"][1]["tokens"][2] += 1' 'd["samples"][2]["logprobs"][4] += 1e-4' \
               'd["samples"][0]["telemetry"]["phantom"][3][1][0] += 1e-4' 'd["samples"][1]["telemetry"]["gate"][0][0].pop()'; do
        "$PY" - "$W/combo2/sampled.json" "$W/mut.json" "$mut" <<'PYEOF2'
import json, sys
d = json.load(open(sys.argv[1]))
exec(sys.argv[3])
json.dump(d, open(sys.argv[2], "w"))
PYEOF2
        out=$(ref "$W/combo2/model.safetensors" "$V" "$W/mut.json"); rc=$?
        check '[ $rc = 1 ] && grep -qE "ref_generate: [0-9]+ passed, [1-9][0-9]* failed" <<<"$out"' \
            "the reference fails a copy with $mut"$'\n'"$out"
    done
fi

# --- the hand-checkable facts of one run ------------------------------------------
d=$W/combo2
check '[ "$(json $d/greedy.json "d[\"prompt\"][\"tokens\"]")" = "[50256, 464, 3797, 3332]" ]' \
    "the prompt: <|endoftext|>, then GPT-2's tokens of \"The cat sat\" (464 3797 3332)"
check '[ "$(json $d/greedy.json "(d[\"setup\"][\"max_tokens\"], len(d[\"samples\"][0][\"tokens\"]) + (d[\"samples\"][0][\"stop\"] == \"eot\"))")" = "(13, 13)" ] ||
       [ "$(json $d/greedy.json "d[\"samples\"][0][\"stop\"]")" = eot ]' \
    "the default limit is what the context leaves: 16 + 1 - 4 prompt tokens = 13"
check '[ "$(json $d/long.json "(d[\"prompt\"][\"tokens\"], len(d[\"samples\"][0][\"tokens\"]), d[\"samples\"][0][\"stop\"])")" = "([50256], 16, '"'"'length'"'"')" ]' \
    "an empty prompt is <|endoftext|> alone, and 16 new tokens fill the 16 positions (the last is never entered)"
check '[ "$(json $d/sampled.json "sorted(d[\"samples\"][0][\"telemetry\"])")" = "['"'"'gate'"'"', '"'"'phantom'"'"', '"'"'pos0'"'"']" ] &&
       [ "$(json $W/baseline/sampled.json "sorted(d[\"samples\"][0][\"telemetry\"])")" = "['"'"'pos0'"'"']" ] &&
       [ "$(json $d/sampled.json "[len(d[\"samples\"][0][\"telemetry\"][\"gate\"][0]), len(d[\"samples\"][0][\"telemetry\"][\"gate\"][0][0])]")" = "[2, 2]" ]' \
    "--telemetry: the fields each arm has (combo2 all three, baseline the first position only), layer by head for each draw"
check '[ "$(json $d/sampled.json "[s[\"index\"] for s in d[\"samples\"]]")" = "[0, 1, 2]" ] &&
       [ "$(json $d/sampled.json "len(set(tuple(s[\"tokens\"]) for s in d[\"samples\"]))")" = 3 ]' \
    "3 samples, each its own continuation"

# --- the same samples again, for any thread count and beside any others ---------
G "$d" --prompt "$P" --temperature 0.9 --top-k 200 --top-p 0.95 --samples 3 --seed 5 --telemetry --json "$W/again.json" >/dev/null
G "$d" --prompt "$P" --temperature 0.9 --top-k 200 --top-p 0.95 --samples 3 --seed 5 --threads 1 --telemetry --json "$W/t1.json" >/dev/null
check '[ "$(strip_setup $W/again.json)" = "$(strip_setup $d/sampled.json)" ] && [ "$(strip_setup $W/t1.json)" = "$(strip_setup $d/sampled.json)" ]' \
    "a second run, and one on one thread, write the same samples"
G "$d" --prompt "$P" --temperature 0.9 --top-k 200 --top-p 0.95 --samples 1 --seed 5 --json "$W/one.json" >/dev/null
check '[ "$(json $W/one.json "d[\"samples\"][0][\"tokens\"]")" = "$(json $d/sampled.json "d[\"samples\"][0][\"tokens\"]")" ]' \
    "sample 0 draws the same tokens alone as beside two others: its draws depend on (seed, sample, position) only"
G "$d" --prompt "$P" --temperature 0.9 --top-k 200 --top-p 0.95 --samples 3 --seed 6 --json "$W/seed6.json" >/dev/null
check '[ "$(json $W/seed6.json "[s[\"tokens\"] for s in d[\"samples\"]]")" != "$(json $d/sampled.json "[s[\"tokens\"] for s in d[\"samples\"]]")" ]' \
    "another --seed, other samples"
G "$d" --prompt "$P" --temperature 5 --top-k 1 --json "$W/k1.json" >/dev/null
check '[ "$(json $W/k1.json "d[\"samples\"][0][\"tokens\"]")" = "$(json $d/greedy.json "d[\"samples\"][0][\"tokens\"]")" ]' \
    "--top-k 1 at any temperature is greedy"

# --- stdout ------------------------------------------------------------------------
out=$("$SG" generate "$d" --prompt "$P" --temperature 0 --vocab "$V" --quiet)
want=$(json $d/greedy.json "d['prompt']['text'] + d['samples'][0]['text']")
check '[ "$out" = "$want" ]' "one sample: stdout is the prompt and its continuation"
printf '%s' "$P" >"$W/prompt.txt"
out=$("$SG" generate "$d" --prompt-file "$W/prompt.txt" --temperature 0 --samples 2 --vocab "$V" --quiet)
check '[ "$(grep -c "^=== sample [01]" <<<"$out")" = 2 ] && grep -qF "$want" <<<"$out"' \
    "--prompt-file, 2 samples: each under its own header, greedy twice the same"
expect 0 "generate: [0-9]+ tokens drawn in [0-9.]+ s" -- "$SG" generate "$d" --prompt "$P" --vocab "$V"
expect 0 "^The cat sat" -- "$SG" generate "$d/checkpoint.bin" --prompt "$P" --vocab "$V" --quiet

# the data's manifest names the vocabulary: no --vocab needed
printf '{"tokenizer": {"vocab": "%s", "vocab_sha256": "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930"}}\n' "$V" >"$W/data/manifest.json"
expect 0 "^The cat sat" -- "$SG" generate "$d" --prompt "$P" --quiet

# --- bad input: exit 2, a message, nothing written ---------------------------------
echo keep >"$W/kept.json"
bad_in() { # PATTERN -- flags...: exit 2 with PATTERN; kept.json untouched, no temporary left
    local pat=$1; shift 2
    expect 2 "$pat" -- "$SG" generate "$@" --json "$W/kept.json"
    check '[ "$(cat $W/kept.json)" = keep ] && [ -z "$(ls $W | grep kept.json.tmp)" ]' "nothing written: $*"
}
bad_in "no run directory or checkpoint given" -- --prompt x
bad_in "unknown flag '--nope'" -- "$d" --nope 1
bad_in "--tokens: expected an integer in \[1, " -- "$d" --tokens 0
bad_in "--samples: expected an integer in \[1, 4096\], got 'x'" -- "$d" --samples x
bad_in "--temperature: expected a number in \[0, 1e\+06\], got '-1'" -- "$d" --temperature -1
bad_in "--temperature: expected a number in \[0, 1e\+06\], got 'nan'" -- "$d" --temperature nan
bad_in "--top-p: expected a number in \(0, 1\], got '0'" -- "$d" --top-p 0
bad_in "--top-p: expected a number in \[0, 1\], got '1.5'" -- "$d" --top-p 1.5
bad_in "--top-k: expected an integer in \[0, " -- "$d" --top-k -3
bad_in "--seed: expected an integer" -- "$d" --seed 1.5
expect 2 "--prompt needs a value" -- "$SG" generate "$d" --prompt
expect 2 "--telemetry goes into the --json file: give one" -- "$SG" generate "$d" --telemetry
bad_in "--prompt and --prompt-file: one or the other" -- "$d" --prompt x --prompt-file "$W/prompt.txt"
bad_in "one run or checkpoint only" -- "$d" "$W/baseline"
bad_in "--tokens 14 does not fit: the prompt takes 4 of the model's 16 positions, which leaves room for 13 new tokens" \
    -- "$d" --prompt "$P" --tokens 14 --vocab "$V"
bad_in "the prompt is 17 tokens with the <\|endoftext\|> that starts it; the model's context is 16" \
    -- "$d" --prompt "a a a a a a a a a a a a a a a a" --vocab "$V"
bad_in "--prompt-file $W/none.txt: No such file" -- "$d" --prompt-file "$W/none.txt" --vocab "$V"
mkdir "$W/adir"
bad_in "--prompt-file $W/adir: read error: Is a directory" -- "$d" --prompt-file "$W/adir" --vocab "$V"
truncate -s 65M "$W/huge.txt"
bad_in "--prompt-file $W/huge.txt: more than 67108864 bytes" -- "$d" --prompt-file "$W/huge.txt" --vocab "$V"
bad_in "$W/none: No such file or directory" -- "$W/none" --vocab "$V"
head -c 3000 "$d/checkpoint.bin" >"$W/trunc.bin"
bad_in "trunc.bin" -- "$W/trunc.bin" --vocab "$V"
bad_in "--vocab: .*none.tiktoken" -- "$d" --vocab "$W/none.tiktoken"
printf '{"tokenizer": {"vocab": "%s", "vocab_sha256": "%064d"}}\n' "$V" 0 >"$W/data/manifest.json"
bad_in "gpt2.tiktoken is not the vocabulary the run was trained with" -- "$d" --vocab "$V"
rm "$W/data/manifest.json"
bad_in "no vocabulary: the run's data \(.*\) has no manifest naming one; give --vocab" -- "$d"
"$SYN" --out "$W/data61" --vocab 61 --val-tokens 500 --train-tokens 500 >/dev/null
"$MK" --write-ckpt "$W/small" baseline "$W/data61"
bad_in "gpt2.tiktoken has 50257 tokens but the model only 61" -- "$W/small" --vocab "$V"
# a cache larger than any machine's memory: 4096 samples of a 262,144-token
# context, 2 layers of 48 floats a row (412 GB), refused before it is allocated
"$MK" --write-ckpt "$W/long" baseline "$W/data" 262144
bad_in "--samples 4096: the key-value cache needs 384\.[0-9]+ GiB, more than the [0-9.]+ GiB of host memory" \
    -- "$W/long" --samples 4096 --vocab "$V"
expect 2 "$W/nodir/out.json: cannot create temporary file" -- "$SG" generate "$d" --vocab "$V" --json "$W/nodir/out.json"
check '[ ! -e "$W/nodir" ]' "an output in a missing directory: refused before any work, nothing created"
finish
