#!/usr/bin/env bash
# End-to-end tests of sgtok: token-for-token equality with tiktoken on the
# mixed corpus (tests/tok/check_tiktoken.py), GPT-2's original file format,
# shards that decode back to the exact input, output identical for any
# thread count, sgtrain reading the result, and every bad input: each exits
# non-zero with a clear message and leaves the output directory as it was.
# Needs `make data` (vocabulary and corpora) and tiktoken (tools/install-deps.sh
# puts it in build/venv).
set -u
B=${1:-build}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TOK=$(cd "$B" && pwd)/sgtok
SG=$(cd "$B" && pwd)/sgtrain
V=$ROOT/data/vocab/gpt2.tiktoken
MIXED=$ROOT/data/text/mixed
PY=python3
[ -x "$B/venv/bin/python" ] && PY=$(cd "$B" && pwd)/venv/bin/python
W=$(mktemp -d)
trap 'chmod -R u+w "$W" 2>/dev/null; rm -rf "$W"' EXIT
E2E_NAME=e2e_tok
source "$(dirname "$0")/lib.sh"
json() { "$PY" -c "import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2], {}, {'d': d}))" "$1" "$2"; }

if [ ! -f "$V" ] || [ ! -d "$MIXED" ]; then
    bad "no vocabulary or test corpus in data/: run \`make data\` first"; finish
fi
expect 0 "sha256 306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930" -- "$TOK" info --vocab "$V"

# --- tiktoken, token for token --------------------------------------------
out=$("$PY" "$ROOT/tests/tok/check_tiktoken.py" "$TOK" "$V" "$MIXED" 2>&1); rc=$?
echo "$out" | tail -n 3
check '[ $rc -eq 0 ] && grep -q "tiktoken: [0-9]* passed, 0 failed" <<<"$out"' "sgtok equals tiktoken on the mixed corpus"$'\n'"$out"

# --- GPT-2's encoder.json + vocab.bpe: the same vocabulary -----------------
"$PY" "$ROOT/tests/tok/make_gpt2_files.py" "$V" "$W/g2"
G2="--encoder-json $W/g2/encoder.json --vocab-bpe $W/g2/vocab.bpe"
expect 0 "sha256 306cd27f" -- "$TOK" info $G2
f1=$(find "$MIXED" -type f | sort | head -n 40)
"$TOK" encode --vocab "$V" $f1 >"$W/ids.tiktoken" && "$TOK" encode $G2 $f1 >"$W/ids.g2"
check 'cmp -s "$W/ids.tiktoken" "$W/ids.g2" && [ -s "$W/ids.g2" ]' "both vocabulary formats encode 40 files identically"

# --- prepare: a corpus of real text ----------------------------------------
C=$W/corpus
mkdir -p "$C/ja" "$C/en"
n=0
for f in $(find "$MIXED" -type f -size +2k | sort | head -n 300); do
    n=$((n + 1)); cp "$f" "$C/$([ $((n % 2)) -eq 0 ] && echo ja || echo en)/doc$(printf %03d $n).txt"
done
P="--vocab $V --val-tokens 100000 --shard-tokens 150000 --quiet"
expect 0 "300 file\(s\), 300 documents" -- "$TOK" prepare $P --threads 1 --out "$W/s1" "$C"
expect 0 "on 2 thread" -- "$TOK" prepare $P --threads 2 --out "$W/s2" "$C"
check '[ -f $W/s1/val.bin ] && [ -f $W/s1/train_000000.bin ] && [ -f $W/s1/manifest.json ]' "val.bin, train_000000.bin and manifest.json written"
check '[ -z "$(ls -A $W/s1 | grep sgtok)" ]' "no working directory left behind"
same=1
for f in "$W"/s1/*; do cmp -s "$f" "$W/s2/$(basename "$f")" || same=0; done
check '[ $same -eq 1 ] && [ "$(ls $W/s1)" = "$(ls $W/s2)" ]' "1 and 2 threads write identical shards and manifest"
check '[ "$(json $W/s1/manifest.json "d[\"tokenizer\"][\"vocab_sha256\"]")" = 306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930 ]' "manifest records the vocabulary hash"
check '[ "$(json $W/s1/manifest.json "sum(s[\"tokens\"] for s in d[\"shards\"]) == d[\"totals\"][\"tokens\"] == sum(s[\"tokens\"] for s in d[\"sources\"])")" = True ]' "manifest token counts add up"
check '[ "$(json $W/s1/manifest.json "d[\"shards\"][0]")" = "{'"'"'file'"'"': '"'"'val.bin'"'"', '"'"'kind'"'"': '"'"'val'"'"', '"'"'tokens'"'"': 100000}" ]' "val.bin holds exactly --val-tokens"
# Every shard decodes back to the exact input: <|endoftext|> then each file.
for f in $(find "$C" -type f | sort); do printf '<|endoftext|>'; cat "$f"; done >"$W/expect.txt"
{ "$TOK" decode --vocab "$V" "$W/s1/val.bin"; for s in "$W"/s1/train_*.bin; do "$TOK" decode --vocab "$V" "$s"; done; } >"$W/got.txt"
check 'cmp -s "$W/expect.txt" "$W/got.txt"' "decoding every shard gives back the input byte for byte"
"$TOK" decode --vocab "$V" --from 1 --count 5 "$W/s1/val.bin" >"$W/five.txt"
head -c 200 "$(find "$C" -type f | sort | head -n 1)" >"$W/head.txt"
check '[ -s $W/five.txt ] && [ "$(head -c $(stat -c %s $W/five.txt) $W/head.txt)" = "$(cat $W/five.txt)" ]' "decode --from/--count gives a range"
expect 0 "" -- "$SG" train --tier cpu-tiny --data "$W/s1" --iters 2 --warmup 1 --val_every 0 --val_batches_final 1 --micro_batch 2 --ckpt_every 0 --out "$W/run"
check '[ -f $W/run/result.json ]' "sgtrain trains on the shards"

# On a terminal, a progress bar; in a pipe (Slurm logs), only the summary line.
if command -v script >/dev/null; then
    script -qec "$TOK prepare --vocab $V --val-tokens 100000 --out $W/tty $C" /dev/null >"$W/tty.log" 2>&1
    check 'tr "\r" "\n" <"$W/tty.log" | grep -qE "^\[#+\.*\] [0-9.]+/[0-9.]+ MB +[0-9.]+ MB/s +[0-9.]+M tokens"' "a progress bar on a terminal"
    check '[ "$(grep -c "" <<<"$("$TOK" prepare --vocab "$V" --val-tokens 100000 --out "$W/pipe1" "$C" 2>&1)")" = 1 ]' "one summary line when stderr is not a terminal"
fi

# TinyStories' layout: documents separated by <|endoftext|> lines; JSONL; gzip.
printf 'Once upon a time.\n<|endoftext|>\nThe end.\n<|endoftext|>\n' >"$W/ts.txt"
printf '{"text": "Once upon a time."}\n\n{"text": "The end.", "id": 2}\n' >"$W/ts.jsonl"
gzip -c "$W/ts.jsonl" >"$W/ts2.jsonl.gz"
"$TOK" encode --vocab "$V" --eot --sep '<|endoftext|>' "$W/ts.txt" >"$W/e1"
"$TOK" encode --vocab "$V" --eot "$W/ts.jsonl" >"$W/e2"
"$TOK" encode --vocab "$V" --eot "$W/ts2.jsonl.gz" >"$W/e3"
check '[ "$(cat $W/e1)" = "$(printf "50256 7454 2402 257 640 13\n50256 464 886 13")" ]' "--sep splits and trims documents (ids from tiktoken)"
check 'cmp -s $W/e1 $W/e2 && cmp -s $W/e2 $W/e3' "the same documents from text, JSONL and gzipped JSONL"
printf '50256 7454 2402' | "$TOK" decode --vocab "$V" - >"$W/d"
check '[ "$(cat $W/d)" = "<|endoftext|>Once upon" ]' "decode - reads ids from stdin"

# --- bad inputs: a clear message, exit 2, nothing written --------------------
mkdir -p "$W/keep"; cp "$W"/s1/* "$W/keep/"; echo notes >"$W/keep/notes.txt"
snap() { (cd "$W/keep" && ls -A | sort && cat -- * | md5sum); }
before=$(snap)
expect 2 "already holds a corpus.*--force" -- "$TOK" prepare $P --out "$W/keep" "$C"
check '[ "$(snap)" = "$before" ]' "an output directory with shards is left untouched"
expect 2 "no vocabulary: pass --vocab" -- env -u SG_VOCAB sh -c "cd $W && $TOK info"
expect 2 "missing.tiktoken: cannot open the vocabulary" -- "$TOK" info --vocab "$W/missing.tiktoken"
cp "$V" "$W/corrupt.tiktoken"; printf 'x' | dd of="$W/corrupt.tiktoken" bs=1 seek=100000 conv=notrunc 2>/dev/null
expect 2 "corrupt.tiktoken.*(SHA-256|base64|BASE64)" -- "$TOK" prepare --vocab "$W/corrupt.tiktoken" --out "$W/o1" "$C"
sed 's/^IQ== 0$/IQ== 1/; s/^Ig== 1$/Ig== 0/' "$V" >"$W/changed.tiktoken"
expect 2 "SHA-256 is [0-9a-f]+, expected 306cd27f.*GPT-2.*--vocab-sha256 any" -- "$TOK" prepare --vocab "$W/changed.tiktoken" --out "$W/o1" "$C"
head -c 400000 "$V" >"$W/trunc.tiktoken"
expect 2 "trunc.tiktoken" -- "$TOK" info --vocab "$W/trunc.tiktoken"
check '[ ! -e $W/o1 ] || [ -z "$(ls -A $W/o1)" ]' "a refused vocabulary writes nothing"
sed '/^IQ== 0$/d; s/ \([0-9]*\)$/ \1/' "$V" | awk '{ $2 = NR - 1; print }' >"$W/other.tiktoken"
expect 2 "byte 0x21 is not a token" -- "$TOK" info --vocab "$W/other.tiktoken" --vocab-sha256 any

# A malformed JSONL line after enough text for val.bin and a train shard:
# the error names file and line, and nothing reaches the output directory.
mkdir -p "$W/j"; cp -r "$C" "$W/j/a"
printf '{"text": "fine"}\n{"text": "broken\n{"text": "fine"}\n' >"$W/j/z.jsonl"
expect 2 "z.jsonl:2: not valid JSON" -- "$TOK" prepare $P --out "$W/o2" "$W/j/a" "$W/j/z.jsonl"
check '[ -z "$(ls -A $W/o2)" ]' "a failed prepare leaves no shard and no working directory"
printf '{"text": "a"}\n{"body": "b"}\n' >"$W/nf.jsonl"
expect 2 "nf.jsonl:2: no \"text\" field \(choose the field with --text-field\)" -- "$TOK" prepare $P --out "$W/o2" "$W/nf.jsonl"
printf '{"text": 5}\n' >"$W/nt.jsonl"
expect 2 "nt.jsonl:1: the \"text\" field is a int, expected a string" -- "$TOK" encode --vocab "$V" "$W/nt.jsonl"
expect 2 "nope.txt: No such file" -- "$TOK" prepare $P --out "$W/o2" "$W/nope.txt"
expect 2 "no file matches this pattern" -- "$TOK" prepare $P --out "$W/o2" "$W/*.nothing"
expect 2 "named twice" -- "$TOK" prepare $P --out "$W/o2" "$C/en" "$C/en/doc001.txt"
expect 2 "self/mem: read error" -- "$TOK" prepare $P --out "$W/o2" /proc/self/mem
ln -s "$W/gone" "$W/dangling.txt"
expect 2 "dangling.txt: No such file" -- "$TOK" encode --vocab "$V" "$W/dangling.txt"
printf 'x' | gzip -c | head -c 12 >"$W/cut.txt.gz"
expect 2 "cut.txt.gz: the gzip stream is truncated" -- "$TOK" encode --vocab "$V" "$W/cut.txt.gz"
expect 2 "fewer than the 100000 the validation split takes" -- "$TOK" prepare $P --out "$W/o3" "$W/ts.txt"
check '[ -z "$(ls -A $W/o3)" ]' "too little text writes nothing"
expect 2 "all of them went to val.bin" -- "$TOK" prepare --vocab "$V" --val-tokens 27 --quiet --out "$W/o3" "$W/ts.txt"
# an interrupted prepare (its input, a pipe, still open) exits 130 and leaves nothing
mkfifo "$W/pipe"
"$TOK" prepare $P --out "$W/o4" - <"$W/pipe" 2>"$W/int.log" &
pid=$!
exec 3>"$W/pipe"
cat "$C"/en/* >&3
sleep 1
kill -INT $pid; wait $pid; rc=$?
exec 3>&-
check '[ $rc -eq 130 ] && grep -q "interrupted; nothing was written" $W/int.log && [ -z "$(ls -A $W/o4)" ]' "SIGINT: exit 130, nothing written (rc $rc: $(cat $W/int.log))"

# --force replaces the corpus, drops old train shards, keeps other files
cp "$W/keep/train_000000.bin" "$W/keep/train_000099.bin"
expect 0 "" -- "$TOK" prepare $P --force --out "$W/keep" "$C/en"
check '[ ! -e $W/keep/train_000099.bin ] && [ -f $W/keep/notes.txt ] && [ "$(json $W/keep/manifest.json "d[\"totals\"][\"files\"]")" = 150 ]' "--force installs the new corpus, removes stale shards, keeps notes.txt"

# flags
expect 2 "unknown option --bogus" -- "$TOK" prepare --bogus
expect 2 "--val-tokens: expected an integer >= 1, got \"abc\"" -- "$TOK" prepare --val-tokens abc
expect 2 "--shard-tokens: expected an integer >= 1025" -- "$TOK" prepare --shard-tokens 10
expect 2 "--threads: expected an integer >= 1" -- "$TOK" prepare --threads 0
expect 2 "--format: expected auto, text or jsonl" -- "$TOK" encode --format xml
expect 2 "--split: expected file, line or para" -- "$TOK" encode --split words
expect 2 "--out needs a value" -- "$TOK" prepare --out
expect 2 "--out DIR is required" -- "$TOK" prepare --vocab "$V" "$C"
expect 2 "no INPUT" -- "$TOK" prepare --vocab "$V" --out "$W/o5"
expect 2 "go together" -- "$TOK" info --encoder-json "$W/g2/encoder.json"
expect 2 "unknown command \"tokenize\"" -- "$TOK" tokenize
expect 2 "usage: sgtok" -- "$TOK"
expect 0 "usage: sgtok" -- "$TOK" --help
printf '15496 x9' | { out=$("$TOK" decode --vocab "$V" - 2>&1); rc=$?; [ $rc -eq 2 ] && grep -q 'token 1 is "x9", not a token id' <<<"$out"; }
check '[ $? -eq 0 ]' "decode: a non-numeric id is refused"
printf '15496 50300' | { out=$("$TOK" decode --vocab "$V" - 2>&1); rc=$?; [ $rc -eq 2 ] && grep -q "token 1 is 50300, outside the vocabulary" <<<"$out"; }
check '[ $? -eq 0 ]' "decode: an id outside the vocabulary is refused"
head -c 300 "$W/s1/val.bin" >"$W/short.bin"
expect 2 "short.bin.*truncated" -- "$TOK" decode --vocab "$V" "$W/short.bin"
finish
