#!/usr/bin/env bash
# End-to-end tests of tools/hf_tokenize.py (a data directory from a Hugging
# Face tokenizer.json): with GPT-2's vocabulary as a tokenizer.json
# (tests/tok/make_hf_gpt2_tokenizer.py derives it from gpt2.tiktoken), its
# data directory equals `sgtok prepare`'s byte for byte (every shard, and the
# manifest outside "tokenizer") on real text (English, Japanese, Chinese,
# Russian, emoji), a document long enough to be cut, whitespace runs, CRLF and
# "<|endoftext|>" written in the text, and in every input format and split
# mode; its vocabulary identity is GPT-2's.  A GPT-NeoX/Pythia layout of the
# same tokens (end-of-text id 0, config.json's vocab_size, added tokens) gives
# sgtok's tokens shifted by 2 and the identity defined in docs/data.md, and
# sgtrain trains on it.  Every
# bad input exits 2 with a clear message and leaves nothing behind.
# Needs `make data` (vocabulary and corpora), build/sgtok, and tokenizers in
# build/venv (tools/install-deps.sh).
set -u
B=${1:-build}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TOK=$(cd "$B" && pwd)/sgtok
SG=$(cd "$B" && pwd)/sgtrain
V=$ROOT/data/vocab/gpt2.tiktoken
DEMO=$ROOT/data/text/demo
MIXED=$ROOT/data/text/mixed
HF=$ROOT/tools/hf_tokenize.py
GPT2=306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930
PY=python3
[ -x "$B/venv/bin/python" ] && PY=$(cd "$B" && pwd)/venv/bin/python
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
E2E_NAME=e2e_hf_tokenize
source "$(dirname "$0")/lib.sh"
json() { "$PY" -c "import json,sys; print(eval(sys.argv[2], {'d': json.load(open(sys.argv[1]))}))" "$1" "$2"; }
# the same shards, byte for byte, and the same manifest outside its "tokenizer" block
same() {
    [ "$(ls -A "$1")" = "$(ls -A "$2")" ] && [ -f "$1/val.bin" ] && [ -f "$1/train_000000.bin" ] || return 1
    for f in "$1"/*.bin; do cmp -s "$f" "$2/${f##*/}" || return 1; done
    [ "$(sed '/^  "tokenizer":{$/,/^  },$/d' "$1/manifest.json")" = "$(sed '/^  "tokenizer":{$/,/^  },$/d' "$2/manifest.json")" ]
}

if [ ! -f "$V" ] || [ ! -d "$MIXED" ] || [ ! -d "$DEMO" ]; then
    bad "no vocabulary or test corpus in data/: run \`make data\` first"; finish
fi
if [ ! -x "$TOK" ] || [ ! -x "$SG" ]; then bad "no $TOK or $SG: build them (make)"; finish; fi
if ! "$PY" -c 'import tokenizers' 2>/dev/null; then
    bad "$PY cannot import tokenizers: run tools/install-deps.sh (it puts tokenizers in build/venv)"; finish
fi
"$PY" "$ROOT/tests/tok/make_hf_gpt2_tokenizer.py" "$V" "$W/gpt2/tokenizer.json"
G=$W/gpt2/tokenizer.json
hf() { "$PY" "$HF" --tokenizer "$G" "$@"; }
expect 0 "sha256 $GPT2" -- hf --info
expect 0 "eot 50256" -- "$PY" "$HF" --tokenizer "$W/gpt2" --info

# --- the same data directory as sgtok --------------------------------------
C=$W/corpus
mkdir -p "$C/en" "$C/mixed"
for f in $(find "$DEMO/python-docs" -type f | sort | head -n 30); do cp "$f" "$C/en/"; done
n=0
for f in $(find "$MIXED" -type f -size +2k | sort | awk 'NR % 90 == 1'); do
    n=$((n + 1)); cp "$f" "$C/mixed/doc$(printf %03d $n).txt"
done
# one document over 2 MiB, which both tools encode in parts
{ cat "$DEMO/gcide/gcide-00.txt"; head -c 300000 "$DEMO/gcide/gcide-01.txt"; } >"$C/long.txt"
printf 'Plain <|endoftext|> inside, and<|endoftext|>glued.\r\nTabs\t\there, runs     of spaces   \n\n\n  \nI'"'"'m sure it'"'"'s 12345 caf\xc3\xa9 e\xcc\x81 \xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e \xf0\x9f\x98\x80\xf0\x9f\x91\x8d\xf0\x9f\x8f\xbd <|padding|>   \n' >"$C/special.txt"
P="--val-tokens 100000 --shard-tokens 150000 --quiet"
expect 0 "[0-9]+ file\(s\)" -- "$TOK" prepare --vocab "$V" $P --out "$W/s1" "$C"
expect 0 "$(ls -R "$C" | grep -c '\.txt$') file\(s\), [0-9]+ documents,.* train shard" -- hf $P --out "$W/h1" "$C"
check 'same "$W/s1" "$W/h1"' "hf_tokenize.py writes sgtok's val.bin, train shards and manifest, byte for byte"$'\n'"$(ls -l "$W/s1" "$W/h1"; diff "$W/s1/manifest.json" "$W/h1/manifest.json")"
check '[ "$(ls "$W/h1" | grep -c train_)" -ge 3 ]' "several train shards"
check '[ -z "$(ls -A "$W/h1" | grep -v -E "^(val|train_[0-9]{6})\.bin$|^manifest\.json$")" ]' "no working directory or temporary file left behind"
check '[ "$(json "$W/h1/manifest.json" "[d[\"tokenizer\"][k] for k in (\"vocab_sha256\", \"vocab_size\", \"eot\", \"vocab\", \"encoding\", \"vocab_size_from\")]")" = "['"'"'$GPT2'"'"', 50257, 50256, '"'"'$G'"'"', '"'"'huggingface tokenizers (tokenizer.json)'"'"', '"'"'tokenizer.json'"'"']" ]' "manifest: GPT-2's identity, vocab_size, eot, the tokenizer's path"
check '[ "$(json "$W/h1/manifest.json" "d[\"tokenizer\"][\"tokenizer_json_sha256\"]")" = "$(sha256sum "$G" | cut -d" " -f1)" ]' "manifest: the SHA-256 of the tokenizer.json file"
check '[ "$(od -An -tx1 -j32 -N32 "$W/h1/train_000000.bin" | tr -d " \n")" = $GPT2 ]' "the shard header holds the vocabulary identity"
# "<|endoftext|>" in the text is ordinary text: one end-of-text token per document
check '[ "$("$PY" -c "import array,glob,sys; a=array.array(\"H\"); [a.frombytes(open(f,\"rb\").read()[256:]) for f in sorted(glob.glob(sys.argv[1]+\"/*.bin\"), key=lambda f: f.endswith(\"val.bin\")==False)]; print(a.count(50256))" "$W/h1")" = "$(json "$W/h1/manifest.json" "d[\"totals\"][\"documents\"]")" ]' "<|endoftext|> written in the text is encoded as text, as sgtok does"
expect 0 "" -- hf $P --val-tokens 20000 --threads 1 --out "$W/h1t" "$C/en" "$C/special.txt"
"$TOK" prepare --vocab "$V" $P --val-tokens 20000 --out "$W/s1t" "$C/en" "$C/special.txt" 2>/dev/null
check 'same "$W/s1t" "$W/h1t"' "--threads 1: the same output"

# every input format and split mode, against sgtok
M=$W/modes
mkdir -p "$M"
printf 'Once upon a time.\n<|endoftext|>\nThe end.\n<|endoftext|>\n\n<|endoftext|>  Third story,\r\nwith two lines. \n' >"$M/ts.txt"
printf 'first line\r\nsecond  line\n\n\nthird\n  \nfourth \xc3\xa9t\xc3\xa9\n\nfifth' >"$M/lines.txt"
printf '{"text": "Once upon a time."}\n\n{"text": "The end.", "id": 2}\n  {"text": "caf\\u00e9 \\ud83d\\ude00 <|endoftext|>", "body": "other"}  \r\n{"text": ""}\n{"text": "last\\nline"}' >"$M/j.jsonl"
gzip -c "$M/j.jsonl" >"$M/j2.jsonl.gz"
gzip -c "$M/lines.txt" >"$M/lz.txt.gz"
{ gzip -c "$M/ts.txt"; gzip -c "$M/lines.txt"; } >"$M/two.gz"
cp "$M/j.jsonl" "$M/j.txt"
printf '{"body": "x y z"}\n{"body": "more words\\there", "text": 1}\n' >"$M/jb.jsonl"
Q="--val-tokens 20 --quiet"
m=0
mode() { # OPTIONS... -- INPUTS...
    m=$((m + 1))
    local opts=() ins=()
    while [ "$1" != "--" ]; do opts+=("$1"); shift; done
    shift; ins=("$@")
    "$TOK" prepare --vocab "$V" $Q "${opts[@]}" --out "$W/ms$m" "${ins[@]}" >/dev/null 2>&1
    hf $Q "${opts[@]}" --out "$W/mh$m" "${ins[@]}" >/dev/null 2>&1
    check 'same "$W/ms$m" "$W/mh$m"' "the same as sgtok with ${opts[*]} on ${ins[*]##*/}"$'\n'"$(ls -l "$W/ms$m" "$W/mh$m" 2>&1)"
}
mode -- "$M/ts.txt" "$M/lines.txt" "$M/j.jsonl" "$M/j2.jsonl.gz" "$M/lz.txt.gz" "$M/two.gz"
mode --sep '<|endoftext|>' -- "$M/ts.txt" "$M/j.jsonl" "$M/two.gz"
mode --split line -- "$M/lines.txt" "$M/ts.txt" "$M/lz.txt.gz"
mode --split para -- "$M/lines.txt" "$M/ts.txt" "$M/two.gz"
mode --format jsonl -- "$M/j.txt" "$M/j2.jsonl.gz"
mode --format text -- "$M/j.jsonl" "$M/ts.txt"
mode --text-field body --val-tokens 3 -- "$M/jb.jsonl"
m=$((m + 1))
"$TOK" prepare --vocab "$V" $Q --out "$W/ms$m" - <"$M/ts.txt" 2>/dev/null
hf $Q --out "$W/mh$m" - <"$M/ts.txt" 2>/dev/null
check 'same "$W/ms$m" "$W/mh$m" && [ "$(json "$W/mh$m/manifest.json" "d[\"sources\"][0][\"path\"]")" = - ]' "standard input (-), as sgtok reads it"

# --- GPT-NeoX/Pythia's layout: end-of-text 0, config.json's vocab_size ------
NX=$W/neox
"$PY" "$ROOT/tests/tok/make_hf_gpt2_tokenizer.py" --neox "$V" "$NX/tokenizer.json"
echo '{"architectures": ["GPTNeoXForCausalLM"], "vocab_size": 50304}' >"$NX/config.json"
mkdir -p "$W/nc"
for f in $(find "$C/en" -type f | sort | head -n 10); do tr -s ' ' <"$f" >"$W/nc/${f##*/}"; done
printf 'no runs: <|endoftext|> and <|padding|> as text, caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac\n' >"$W/nc/zz.txt"
"$TOK" prepare --vocab "$V" --val-tokens 1000 --quiet --out "$W/ns" "$W/nc" 2>/dev/null
expect 0 "" -- "$PY" "$HF" --tokenizer "$NX" --val-tokens 1000 --quiet --out "$W/nh" "$W/nc"
toks() { "$PY" -c "import array,glob,sys
a=array.array('H')
for f in [sys.argv[1]+'/val.bin']+sorted(glob.glob(sys.argv[1]+'/train_*.bin')): a.frombytes(open(f,'rb').read()[256:])
print(' '.join(map(str, a)))" "$1"; }
"$PY" -c "import sys; print(' '.join('0' if t == '50256' else str(int(t) + 2) for t in sys.stdin.read().split()))" <<<"$(toks "$W/ns")" >"$W/ns.shifted"
toks "$W/nh" >"$W/nh.toks"
check 'cmp -s "$W/ns.shifted" "$W/nh.toks" && [ -s "$W/nh.toks" ]' "NeoX layout: sgtok's tokens at id + 2, end-of-text 0, special-token strings as text"
check '[ "$(json "$W/nh/manifest.json" "[d[\"tokenizer\"][k] for k in (\"vocab_size\", \"eot\", \"tokenizer_ids\", \"vocab_size_from\")]")" = "[50304, 0, 50260, '"'"'config.json'"'"']" ]' "NeoX layout: vocab_size from config.json (50304), eot 0, 50260 ids"
check '[ "$(od -An -tu4 -j20 -N4 "$W/nh/val.bin" | tr -d " ")" = 50304 ] && [ "$(od -An -tu4 -j20 -N4 "$W/nh/train_000000.bin" | tr -d " ")" = 50304 ]' "NeoX layout: the shards' vocab_size is the embedding's"
want=$("$PY" -c "import base64,hashlib,sys
h=hashlib.sha256()
for l in open(sys.argv[1],'rb'):
    b,r=l.split(); h.update(b+b' %d\n' % (int(r)+2))
h.update(b'ICA= 50258\nICAg 50259\n')
print(h.hexdigest())" "$V")
check '[ "$(json "$W/nh/manifest.json" "d[\"tokenizer\"][\"vocab_sha256\"]")" = "$want" ] && [ "$(od -An -tx1 -j32 -N32 "$W/nh/val.bin" | tr -d " \n")" = "$want" ]' "NeoX layout: the identity is the tiktoken form by id, special tokens left out, added ones as their bytes"
expect 0 "final val_loss" -- "$SG" train --tier cpu-tiny --vocab_size 50304 --data "$W/nh" --iters 2 --warmup 1 --val_every 0 --val_batches_final 1 --micro_batch 2 --ckpt_every 0 --out "$W/run"
printf 'a  b   c\n' >"$W/spaces.txt"
expect 0 "" -- "$PY" "$HF" --tokenizer "$NX" --val-tokens 2 --quiet --out "$W/nsp" "$W/spaces.txt"
check '[ "$(toks "$W/nsp")" = "0 66 50258 67 50259 68 200" ]' "NeoX layout: added tokens that are not special are matched (runs of spaces)"
expect 2 "vocab-size 50000 is smaller than the tokenizer's largest id \+ 1 \(50260\)" -- "$PY" "$HF" --tokenizer "$NX" --vocab-size 50000 --out "$W/o1" "$W/nc"
expect 2 "vocab-size 70000 does not fit the shards' 16-bit tokens" -- "$PY" "$HF" --tokenizer "$NX" --vocab-size 70000 --out "$W/o1" "$W/nc"
expect 0 "vocab_size 50260" -- "$PY" "$HF" --tokenizer "$NX" --vocab-size 50260 --info
echo '{"vocab_size": 50000}' >"$NX/config.json"
expect 2 "config.json: vocab_size 50000 is smaller than the tokenizer's largest id \+ 1" -- "$PY" "$HF" --tokenizer "$NX" --out "$W/o1" "$W/nc"
echo '{"vocab_size": 50304' >"$NX/config.json"
expect 2 "config.json: cannot read the model's config.*--vocab-size" -- "$PY" "$HF" --tokenizer "$NX/tokenizer.json" --out "$W/o1" "$W/nc"
check '[ ! -e "$W/o1" ]' "a refused tokenizer writes nothing"

# --- bad inputs: a clear message, exit 2, nothing written --------------------
expect 2 "missing.json: no such file or directory" -- "$PY" "$HF" --tokenizer "$W/missing.json" --out "$W/o2" "$C/en"
mkdir -p "$W/empty"
expect 2 "empty: no tokenizer.json in this directory" -- "$PY" "$HF" --tokenizer "$W/empty" --out "$W/o2" "$C/en"
head -c 100000 "$G" >"$W/trunc.json"
expect 2 "trunc.json: not valid JSON" -- "$PY" "$HF" --tokenizer "$W/trunc.json" --out "$W/o2" "$C/en"
echo '{"a": 1}' >"$W/notok.json"
expect 2 "notok.json: not a Hugging Face tokenizer.json" -- "$PY" "$HF" --tokenizer "$W/notok.json" --out "$W/o2" "$C/en"
echo '{"model": {"type": "BPE", "vocab": 5}}' >"$W/badtok.json"
expect 2 "badtok.json: the tokenizers library cannot load it" -- "$PY" "$HF" --tokenizer "$W/badtok.json" --out "$W/o2" "$C/en"
echo '{"version":"1.0","truncation":null,"padding":null,"added_tokens":[],"normalizer":null,"pre_tokenizer":{"type":"Whitespace"},"post_processor":null,"decoder":null,"model":{"type":"WordPiece","unk_token":"[UNK]","continuing_subword_prefix":"##","max_input_chars_per_word":100,"vocab":{"[UNK]":0,"hello":1}}}' >"$W/wp.json"
expect 2 "wp.json: not a byte-level BPE tokenizer \(its model is WordPiece" -- "$PY" "$HF" --tokenizer "$W/wp.json" --out "$W/o2" "$C/en"
expect 2 "no token \"<\|nope\|>\".*--eot" -- hf --eot '<|nope|>' --out "$W/o2" "$C/en"
expect 2 "the vocabulary's SHA-256 is $GPT2, expected 0{64}" -- hf --vocab-sha256 "$(printf '0%.0s' $(seq 64))" --out "$W/o2" "$C/en"
expect 2 "tokenizers. is not available.*pip install tokenizers" -- "$PY" -S "$HF" --tokenizer "$G" --out "$W/o2" "$C/en"
check '[ ! -e "$W/o2" ]' "a refused tokenizer writes nothing (not even the output directory)"

mkdir -p "$W/keep"; cp "$W"/h1/* "$W/keep/"; echo notes >"$W/keep/notes.txt"
snap() { (cd "$W/keep" && ls -A | sort && cat -- * | md5sum); }
before=$(snap)
expect 2 "keep already holds a corpus \(manifest.json and [0-9]+ more file\(s\)\); nothing was changed.*--force" -- hf $P --out "$W/keep" "$C/en"
check '[ "$(snap)" = "$before" ]' "an output directory with shards is left untouched"

# a malformed JSONL line after enough text for val.bin and a train shard
mkdir -p "$W/j"
printf '{"text": "fine"}\n{"text": "broken\n{"text": "fine"}\n' >"$W/j/z.jsonl"
expect 2 "z.jsonl:2: not valid JSON" -- hf $P --out "$W/o3/deeper" "$C/en" "$W/j/z.jsonl"
check '[ ! -e "$W/o3" ]' "a failed run leaves no shard, no working directory, no directory it created"
mkdir -p "$W/o4"
expect 2 "z.jsonl:2: not valid JSON" -- hf $P --out "$W/o4" "$C/en" "$W/j/z.jsonl"
check '[ -d "$W/o4" ] && [ -z "$(ls -A "$W/o4")" ]' "a failed run leaves an existing output directory as it was"
printf '{"text": "a"}\n{"body": "b"}\n' >"$W/j/nf.jsonl"
expect 2 "nf.jsonl:2: no \"text\" field \(choose the field with --text-field\)" -- hf $P --out "$W/o5" "$W/j/nf.jsonl"
printf '{"text": 5}\n' >"$W/j/nt.jsonl"
expect 2 "nt.jsonl:1: the \"text\" field is a int, expected a string" -- hf $P --out "$W/o5" "$W/j/nt.jsonl"
printf '\n["text"]\n' >"$W/j/arr.jsonl"
expect 2 "arr.jsonl:2: a JSON array, expected an object with a \"text\" field" -- hf $P --out "$W/o5" "$W/j/arr.jsonl"
printf '{"text": NaN}\n' >"$W/j/nan.jsonl"
expect 2 "nan.jsonl:1: not valid JSON \(NaN is not JSON\)" -- hf $P --out "$W/o5" "$W/j/nan.jsonl"
printf '{"text": "a"} {"text": "b"}\n' >"$W/j/two.jsonl"
expect 2 "two.jsonl:1: text after the JSON value" -- hf $P --out "$W/o5" "$W/j/two.jsonl"
printf '{"text": "x \\ud800 y"}\n' >"$W/j/sur.jsonl"
expect 2 "sur.jsonl:1: the \"text\" field holds an unpaired surrogate \(.ud800\)" -- hf $P --out "$W/o5" "$W/j/sur.jsonl"
printf 'valid text, then \xff\xfe\n' >"$W/latin.txt"
expect 2 "latin.txt: not UTF-8 text \(byte 0xff at offset 17\).*sgtok" -- hf $P --out "$W/o5" "$W/latin.txt"
expect 2 "nope.txt: No such file or directory" -- hf $P --out "$W/o5" "$W/nope.txt"
expect 2 "no file matches this pattern" -- hf $P --out "$W/o5" "$W/*.nothing"
expect 2 "named twice" -- hf $P --out "$W/o5" "$C/en" "$C/en/$(ls "$C/en" | head -n 1)"
expect 2 "self/mem: read error" -- hf $P --out "$W/o5" /proc/self/mem
printf 'x' | gzip -c | head -c 12 >"$W/cut.txt.gz"
expect 2 "cut.txt.gz: the gzip stream is truncated" -- hf $P --out "$W/o5" "$W/cut.txt.gz"
expect 2 "the text makes [0-9]+ tokens, fewer than the 100000 the validation split takes" -- hf $P --out "$W/o5" "$M/ts.txt"
printf 'Once upon a time.' >"$W/tiny.txt"
expect 2 "the text makes 6 tokens and all of them went to val.bin" -- hf --val-tokens 6 --quiet --out "$W/o5" "$W/tiny.txt"
check '[ ! -e "$W/o5" ]' "bad inputs write nothing"

# an interrupted run (its input, a pipe, still open) exits 130 and leaves nothing
mkfifo "$W/pipe"
"$PY" "$HF" --tokenizer "$G" $P --out "$W/o6" - <"$W/pipe" 2>"$W/int.log" &
pid=$!
exec 3>"$W/pipe"
cat "$C"/en/* >&3
for _ in $(seq 100); do ls -A "$W/o6" 2>/dev/null | grep -q hf_tokenize && break; sleep 0.1; done
kill -INT $pid; wait $pid; rc=$?
exec 3>&-
check '[ $rc -eq 130 ] && grep -q "interrupted; nothing was written" "$W/int.log" && [ ! -e "$W/o6" ]' "SIGINT: exit 130, nothing written (rc $rc: $(cat "$W/int.log"))"

# --force replaces the corpus, drops old train shards, keeps other files
cp "$W/keep/train_000000.bin" "$W/keep/train_000099.bin"
expect 0 "" -- hf $P --val-tokens 20000 --force --out "$W/keep" "$C/en"
check '[ ! -e "$W/keep/train_000099.bin" ] && [ -f "$W/keep/notes.txt" ] && [ "$(json "$W/keep/manifest.json" "d[\"totals\"][\"files\"]")" = 30 ]' "--force installs the new corpus, removes stale shards, keeps notes.txt"

# flags
expect 2 "unrecognized arguments: --bogus" -- hf --bogus
expect 2 "--val-tokens: expected an integer >= 1, got \"abc\"" -- hf --val-tokens abc
expect 2 "--shard-tokens: expected an integer >= 1025" -- hf --shard-tokens 10
expect 2 "--threads: expected an integer >= 1" -- hf --threads 0
expect 2 "--vocab-size: expected an integer >= 1" -- hf --vocab-size x
expect 2 "--format: expected auto, text or jsonl" -- hf --format xml
expect 2 "--split: expected file, line or para" -- hf --split words
expect 2 "--sep: the separator is empty" -- hf --sep ''
expect 2 "--split and --sep both" -- hf --split line --sep x
expect 2 "--out DIR is required" -- hf "$C"
expect 2 "no INPUT" -- hf --out "$W/o7"
expect 2 "--tokenizer PATH is required" -- "$PY" "$HF" --out "$W/o7" "$C"
expect 0 "usage: python3 tools/hf_tokenize.py" -- "$PY" "$HF" --help
finish
