#!/usr/bin/env bash
# Seed inputs for the fuzz targets, made by the real tools so that each
# seed is a file a user would have: a tiny run (sgsynth shards, sgtrain
# train, export and analyze) gives the checkpoint, safetensors, shard and
# run-directory seeds; the sweeps, configs, vocabulary and texts give the
# rest.  Hand-written inputs and past crashes live in tests/fuzz/corpus.
#   bash tests/fuzz/seeds.sh BUILD_DIR OUT_DIR
set -eu
B=${1:-build}
OUT=${2:-$B/fuzz/seeds}
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
vocab=${SG_VOCAB:-data/vocab/gpt2.tiktoken}
rm -rf "$OUT"
for t in tests/fuzz/fuzz_*.c; do t=${t##*/fuzz_}; mkdir -p "$OUT/${t%.c}"; done
work=$(mktemp -d "${TMPDIR:-/tmp}/sg_fuzzseeds_XXXXXX")
trap 'rm -rf "$work"' EXIT

# a model small enough that its checkpoint is a few kilobytes
tiny=(--tier test --n_layer 1 --n_head 2 --n_embd 8 --block_size 8 --vocab_size 64 --micro_batch 2
      --iters 3 --warmup 1 --val_every 2 --val_batches 1 --val_batches_final 1 --log_every 1 --threads 1)
"$B/sgsynth" --out "$work/data" --vocab 64 --val-tokens 200 --train-tokens 400 --shard-tokens 400 --seed 1 >/dev/null
for arm in baseline combo2; do
    "$B/sgtrain" train "${tiny[@]}" --arm $arm --seed 0 --data "$work/data" --out "$work/run-$arm" >/dev/null 2>&1
    cp "$work/run-$arm/checkpoint.bin" "$OUT/checkpoint/$arm.bin"
    "$B/sgtrain" export "$work/run-$arm" -o "$OUT/safetensors/$arm.safetensors" >/dev/null 2>&1
    cp "$work/run-$arm/config.yaml" "$OUT/config/run-$arm.yaml"
done
"$B/sgtrain" analyze "$work/run-combo2" --threads 1 >/dev/null 2>&1 || true
# a model file is a model source too
cp "$OUT/safetensors/combo2.safetensors" "$OUT/checkpoint/combo2.safetensors"
# import: a u32 length, config.json, model.safetensors (fuzz_import.c)
for v in gpt2/hub gpt2/saved neox/hub neox/saved; do
    fx=tests/fixtures/hf_$v s=$OUT/import/${v/\//-}
    python3 -c 'import struct, sys; sys.stdout.buffer.write(struct.pack("<I", int(sys.argv[1])))' \
        "$(stat -c %s "$fx/config.json")" >"$s"
    cat "$fx/config.json" "$fx/model.safetensors" >>"$s"
done
cp "$work/data/val.bin" "$OUT/shard/val.bin"
cp "$work/data/train_000.bin" "$OUT/shard/train.bin"

# run directories as one archive per input ("=== RUN/NAME" headers: fuzz_runs.c)
archive() { # out, then RUN=DIR pairs
    local out=$1; shift
    : >"$out"
    for pair in "$@"; do
        local run=${pair%%=*} dir=${pair#*=}
        for f in result.json failed.json config.yaml metrics.jsonl analysis/injection.json \
                 analysis/probes.json analysis/exposure.json analysis/telemetry.json analysis/incidence.json; do
            [ -f "$dir/$f" ] || continue
            echo "=== $run/$f" >>"$out"
            head -c 2000 "$dir/$f" >>"$out"
            printf '\n' >>"$out"
        done
    done
}
archive "$OUT/runs/pair" a="$work/run-baseline" b="$work/run-combo2"
archive "$OUT/runs/one" a="$work/run-combo2"

for f in sweeps/*.yaml; do cp "$f" "$OUT/sweep/"; done
printf -- '--tier\0test\0--arm\0combo2\0--seed\0003\0--data\0d\0--out\0o' >"$OUT/cli/train"
printf -- '--tier=124M\0--lr=6e-4\0--n_head\00012\0--out\0o\0--data\0d' >"$OUT/cli/equals"

head -n 300 "$vocab" >"$OUT/vocab/small.tiktoken"
for f in README.md docs/formats.md src/config.c; do head -c 3000 "$f" >"$OUT/tokenizer/${f//\//_}"; done
printf 'caf\xc3\xa9 \xff\xfe na\xcc\x88ive  \t\n\n\xe2\x80\x83x 123\xd9\xa3 \xf0\x9f\x98\x80!' >"$OUT/tokenizer/unicode"

printf '\001first line\r\nsecond line\n\nthird\n' >"$OUT/textsrc/lines"
printf '\002one\n\n\n\ntwo\nstill two\n\n' >"$OUT/textsrc/paras"
printf '\003\015<|endoftext|>a story <|endoftext|>  another\n<|endoftext|><|endoftext|>' >"$OUT/textsrc/sep"
printf '\004{"text": "a\\nb"}\n\n{"text": "\\u00e9\\ud83d\\ude00", "id": 3}\n' >"$OUT/textsrc/jsonl"
printf '\011line one\nline two\n' >"$OUT/textsrc/gzip-lines"
