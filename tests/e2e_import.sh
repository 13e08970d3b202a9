#!/usr/bin/env bash
# `sgtrain import`: Hugging Face GPT-2 checkpoints as sinkgate models
# (docs/import.md), against what transformers itself computed from them
# (tests/fixtures/hf_gpt2, made by tests/import/make_hf_fixture.py):
#   - both layouts (the Hub's: no prefix, float32, mask buffers, tanh GELU;
#     save_pretrained's: "transformer." prefix, bfloat16, erf GELU) import
#     with transformers' parameter count;
#   - the imported model's clean loss on the fixture's window, and every
#     head's attention mass on the first four positions (the incidence
#     survey's sink_mass), equal transformers' float64 forward to float32's
#     rounding;
#   - every analysis of the imported model against the NumPy reference
#     (tests/analysis/ref_analysis.py, biases and tanh GELU included);
#   - a sinkgate safetensors file is a model source for analyze, export and
#     generate, and what is not one is refused with the reason;
#   - every bad input: exit 2 with a message, and nothing written.
set -u
B=${1:-build}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SG=$(cd "$B" && pwd)/sgtrain
PY=$ROOT/build/venv/bin/python
FX=$ROOT/tests/fixtures/hf_gpt2
W=$(mktemp -d)
trap '[ -n "${KEEP:-}" ] || rm -rf "$W"' EXIT
E2E_NAME=e2e_import
source "$(dirname "$0")/lib.sh"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
json() { "$PY" -c "import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$@"; }
have_py=0
"$PY" -c 'import numpy' 2>/dev/null && have_py=1
check '[ $have_py = 1 ]' "NumPy in build/venv (tools/install-deps.sh installs it)"
A="--batches 1 --batch-size 2 --seq-len 24 --quiet"

# --- both layouts against transformers --------------------------------------
for v in hub saved; do
    m=$W/$v.safetensors
    n=$(json "$FX/$v/expected.json" "d['n_params']")
    expect 0 "$v -> .*: GPT-2, 2 layers, 4 heads, width 32, context 24, vocabulary 97, $n parameters" -- \
        "$SG" import "$FX/$v" --out "$m"
    "$SG" analyze "$m" --data "$FX/$v" --what incidence,injection --out "$W/an_$v" $A
    [ $have_py = 1 ] || continue
    out=$("$PY" "$ROOT/tests/import/compare_expected.py" "$FX/$v/expected.json" "$W/an_$v")
    check 'grep -q "^agree" <<<"$out"' "$v: loss and every head's sink mass equal transformers'"$'\n'"$out"
done
# the tensors of two safetensors files, names, shapes and bytes, are the same
same_tensors() {
    "$PY" -c "
import json, struct, sys
def t(p):
    raw = open(p, 'rb').read(); n = struct.unpack('<Q', raw[:8])[0]; h = json.loads(raw[8:8 + n]); h.pop('__metadata__', None)
    return {k: (v['dtype'], v['shape'], raw[8 + n + v['data_offsets'][0]:8 + n + v['data_offsets'][1]]) for k, v in h.items()}
sys.exit(0 if t(sys.argv[1]) == t(sys.argv[2]) else 1)" "$1" "$2"
}
"$SG" import "$FX/hub/model.safetensors" --out "$W/hub2.safetensors" --quiet
check 'same_tensors "$W/hub.safetensors" "$W/hub2.safetensors"' "the weights file named instead of its directory: the same tensors"
meta=$("$PY" -c "
import json, struct, sys
raw = open(sys.argv[1], 'rb').read(); n = struct.unpack('<Q', raw[:8])[0]
m = json.loads(raw[8:8 + n])['__metadata__']
print(m['format'], m['arm'], m['step'], m['source'], 'linear_bias: true' in m['config'], 'gelu_tanh: true' in m['config'])
" "$W/hub.safetensors")
check '[ "$meta" = "sinkgate baseline 0 $FX/hub True True" ]' "metadata: format, arm, step, source, linear_bias, gelu_tanh ($meta)"
meta=$("$PY" -c "
import json, struct, sys
raw = open(sys.argv[1], 'rb').read(); n = struct.unpack('<Q', raw[:8])[0]
print('gelu_tanh: false' in json.loads(raw[8:8 + n])['__metadata__']['config'])
" "$W/saved.safetensors")
check '[ "$meta" = True ]' "activation_function gelu: the erf GELU"

# --- every analysis against the NumPy reference -----------------------------
d=$W/ref
mkdir -p "$d"
cp "$W/hub.safetensors" "$d/model.safetensors"
"$SG" analyze "$d/model.safetensors" --data "$FX/hub" --batches 2 --batch-size 2 --seq-len 20 --sink-positions 2 --quiet
check '[ -s "$d/analysis/incidence.json" ] && [ -s "$d/analysis/injection.json" ] && [ -s "$d/analysis/telemetry.json" ]' \
    "analyze on a model file writes beside it (analysis/)"
if [ $have_py = 1 ]; then
    out=$("$PY" "$ROOT/tests/analysis/ref_analysis.py" "$d" "$d/model.safetensors" "$FX/hub" 2>&1)
    check 'grep -qE "ref_analysis: [0-9]+ passed, 0 failed" <<<"$out"' "imported model: every analysis against the NumPy reference"$'\n'"$out"
fi

# --- a sinkgate safetensors file as a model source ---------------------------
expect 0 "wrote" -- "$SG" export "$W/hub.safetensors" -o "$W/re.safetensors"
"$SG" analyze "$W/re.safetensors" --data "$FX/hub" --what injection --out "$W/an_re" $A
check '[ "$(json "$W/an_re/injection.json" "d[\"clean_val_loss\"]")" = "$(json "$W/an_hub/injection.json" "d[\"clean_val_loss\"]")" ]' \
    "export of an imported model: the same model (the same clean loss, exactly)"
expect 2 "without sinkgate's metadata.*sgtrain import" -- "$SG" analyze "$FX/hub/model.safetensors" --data "$FX/hub" $A
printf 'SGCKPX\0\0garbage that is not a header' >"$W/junk.bin"
expect 2 "not a sinkgate checkpoint \(no SGCKPT magic\) nor a safetensors file" -- "$SG" export "$W/junk.bin" -o "$W/x.safetensors"
check '[ ! -e "$W/x.safetensors" ]' "nothing written from a file that is neither"
if [ $have_py = 1 ]; then
    # rewrite a sinkgate file: drop a tensor, add one, damage the metadata
    mutate() { "$PY" "$ROOT/tests/import/st_mutate.py" "$@"; }
    mutate "$W/hub.safetensors" "$W/m1.safetensors" drop:h.1.mlp.c_fc.bias
    expect 2 "no tensor \"h.1.mlp.c_fc.bias\"" -- "$SG" analyze "$W/m1.safetensors" --data "$FX/hub" $A
    mutate "$W/hub.safetensors" "$W/m2.safetensors" add:h.0.attn.extra
    expect 2 "tensor 'h.0.attn.extra' is not part of the model its config describes" -- "$SG" analyze "$W/m2.safetensors" --data "$FX/hub" $A
    mutate "$W/hub.safetensors" "$W/m3.safetensors" meta:step=ten
    expect 2 "metadata step: expected an integer in \[0, [0-9]+\], got 'ten'" -- "$SG" export "$W/m3.safetensors" -o "$W/x.safetensors"
    mutate "$W/hub.safetensors" "$W/m4.safetensors" meta:config=-
    expect 2 "sinkgate metadata without its config" -- "$SG" export "$W/m4.safetensors" -o "$W/x.safetensors"
    mutate "$W/hub.safetensors" "$W/m5.safetensors" meta:arm=combo2
    expect 2 "the header says arm 'combo2', the saved config 'baseline'" -- "$SG" export "$W/m5.safetensors" -o "$W/x.safetensors"
    check '[ ! -e "$W/x.safetensors" ]' "nothing written from a damaged model file"
fi

# --- bad inputs: exit 2, a message, nothing written --------------------------
expect 2 "which model\?" -- "$SG" import
expect 2 "--out FILE.safetensors is required" -- "$SG" import "$FX/hub"
expect 2 "unknown flag '--bogus'" -- "$SG" import "$FX/hub" --out "$W/b.safetensors" --bogus
expect 2 "one source only" -- "$SG" import "$FX/hub" "$FX/saved" --out "$W/b.safetensors"
expect 2 "--out needs a file" -- "$SG" import "$FX/hub" --out
expect 2 "no such file or directory" -- "$SG" import "$W/nope" --out "$W/b.safetensors"
expect 2 "no such directory for --out" -- "$SG" import "$FX/hub" --out "$W/nodir/b.safetensors"
check '[ ! -e "$W/b.safetensors" ]' "nothing written by the refused imports above"
echo keep >"$W/exists.safetensors"
expect 2 "exists; --force replaces it" -- "$SG" import "$FX/hub" --out "$W/exists.safetensors"
check '[ "$(cat "$W/exists.safetensors")" = keep ]' "an existing file is left as it was"
expect 0 "" -- "$SG" import "$FX/hub" --out "$W/exists.safetensors" --force --quiet
check 'cmp -s "$W/exists.safetensors" "$W/hub.safetensors"' "--force replaces it with the import"
mkdir -p "$W/self"
cp "$FX/hub/config.json" "$FX/hub/model.safetensors" "$W/self/"
expect 2 "is the model being imported: write elsewhere" -- "$SG" import "$W/self" --out "$W/self/model.safetensors" --force
check 'cmp -s "$W/self/model.safetensors" "$FX/hub/model.safetensors"' "the source is never overwritten"

# a copy of the hub fixture with one thing changed: config.json by a Python
# edit (KEY=JSON, or KEY=- to remove it), or the weights by mutate above
hf() { # NAME [KEY=VALUE...]
    local dir=$W/hf_$1; shift
    mkdir -p "$dir" && cp "$FX/hub/model.safetensors" "$dir/"
    "$PY" "$ROOT/tests/import/edit_config.py" "$FX/hub/config.json" "$dir/config.json" "$@"
    echo "$dir"
}
if [ $have_py = 1 ]; then
    d=$(hf nocfg); rm "$d/config.json"
    expect 2 "no config.json beside the weights" -- "$SG" import "$d" --out "$W/b.safetensors"
    d=$(hf nost); rm "$d/model.safetensors"
    expect 2 "model.safetensors: no such file \(pytorch_model.bin checkpoints are not read" -- "$SG" import "$d" --out "$W/b.safetensors"
    d=$(hf notjson); echo '{"n_layer": 2,' >"$d/config.json"
    expect 2 "cannot read it as JSON" -- "$SG" import "$d" --out "$W/b.safetensors"
    d=$(hf array); echo '[1, 2]' >"$d/config.json"
    expect 2 "not a JSON object" -- "$SG" import "$d" --out "$W/b.safetensors"
    expect 2 "model_type \"llama\" is not imported \(gpt2: GPT-2; gpt_neox: GPT-NeoX, Pythia\)" -- "$SG" import "$(hf llama model_type='"llama"')" --out "$W/b.safetensors"
    expect 2 "no \"n_layer\"" -- "$SG" import "$(hf nolayer n_layer=-)" --out "$W/b.safetensors"
    expect 2 "\"n_head\" is not an integer" -- "$SG" import "$(hf headstr n_head='"4"')" --out "$W/b.safetensors"
    expect 2 "\"n_layer\" is 0, outside" -- "$SG" import "$(hf layer0 n_layer=0)" --out "$W/b.safetensors"
    expect 2 "\"vocab_size\" is 70000, outside \[2, 65536\]" -- "$SG" import "$(hf bigv vocab_size=70000)" --out "$W/b.safetensors"
    expect 2 "n_embd 32 is not divisible by n_head 5" -- "$SG" import "$(hf div n_head=5)" --out "$W/b.safetensors"
    expect 2 "n_inner 100 is not 4 n_embd = 128" -- "$SG" import "$(hf inner n_inner=100)" --out "$W/b.safetensors"
    expect 2 "activation_function \"relu\" is not supported" -- "$SG" import "$(hf relu activation_function='"relu"')" --out "$W/b.safetensors"
    expect 2 "layer_norm_epsilon 1e-06 is not supported" -- "$SG" import "$(hf eps layer_norm_epsilon=1e-6)" --out "$W/b.safetensors"
    expect 2 "\"scale_attn_by_inverse_layer_idx\": true is not supported" -- "$SG" import "$(hf inv scale_attn_by_inverse_layer_idx=true)" --out "$W/b.safetensors"
    expect 2 "\"scale_attn_weights\": false is not supported" -- "$SG" import "$(hf noscale scale_attn_weights=false)" --out "$W/b.safetensors"
    # an untied head (tie_word_embeddings false) is read from lm_head.weight
    expect 2 "holds 30498 values, fewer than the 32448 parameters" -- "$SG" import "$(hf untied tie_word_embeddings=false)" --out "$W/b.safetensors"
    d=$(hf untied2 tie_word_embeddings=false); mutate "$FX/hub/model.safetensors" "$d/model.safetensors" copy:wte.weight=lm_head.weight
    expect 0 "32448 parameters, tanh GELU, untied LM head" -- "$SG" import "$d" --out "$W/untied.safetensors"
    check '"$SG" analyze "$W/untied.safetensors" --data "$FX/hub" --what injection --out "$W/an_untied" $A &&
           [ "$(json "$W/an_untied/injection.json" "d['clean_val_loss']")" = "$(json "$W/an_hub/injection.json" "d['clean_val_loss']")" ]' \
          "an untied head equal to wte: the same loss as the tied model"
    expect 2 "\"add_cross_attention\": true is not supported" -- "$SG" import "$(hf cross add_cross_attention=true)" --out "$W/b.safetensors"
    expect 2 "tensor \"wpe.weight\" has shape \[24, 32\], expected \[30, 32\]" -- "$SG" import "$(hf ctx n_positions=30)" --out "$W/b.safetensors"
    # n_ctx when n_positions is absent (older configs)
    expect 0 "context 24" -- "$SG" import "$(hf ctxold n_positions=- n_ctx=24)" --out "$W/ctx.safetensors"
    # the weights
    d=$(hf drop); mutate "$FX/hub/model.safetensors" "$d/model.safetensors" drop:wte.weight
    # (the 29344 less wte's 3104, plus the mask buffers' 1154)
    expect 2 "holds 27394 values, fewer than the 29344 parameters of the model config.json describes" -- \
        "$SG" import "$d" --out "$W/b.safetensors"
    # (as many values, one tensor missing: under a mask buffer's name)
    d=$(hf missing); mutate "$FX/hub/model.safetensors" "$d/model.safetensors" rename:h.1.attn.c_proj.bias=h.1.attn.masked_bias
    expect 2 "no tensor \"h.1.attn.c_proj.bias\"" -- "$SG" import "$d" --out "$W/b.safetensors"
    d=$(hf extra); mutate "$FX/hub/model.safetensors" "$d/model.safetensors" add:h.0.mlp.gate
    expect 2 "tensor \"h.0.mlp.gate\" is not part of the GPT-2 model config.json describes" -- "$SG" import "$d" --out "$W/b.safetensors"
    d=$(hf nowte); mutate "$FX/hub/model.safetensors" "$d/model.safetensors" rename:wte.weight=embed.weight
    expect 2 "no wte.weight \(nor transformer.wte.weight\): not a GPT-2 model" -- "$SG" import "$d" --out "$W/b.safetensors"
    d=$(hf nan); mutate "$FX/hub/model.safetensors" "$d/model.safetensors" nan:h.0.ln_2.bias
    expect 2 "holds a value that is not finite" -- "$SG" import "$d" --out "$W/b.safetensors"
    d=$(hf i32); mutate "$FX/hub/model.safetensors" "$d/model.safetensors" i32:h.0.ln_1.weight
    expect 2 "tensor \"h.0.ln_1.weight\" is I32, expected F32, F64, F16 or BF16" -- "$SG" import "$d" --out "$W/b.safetensors"
    d=$(hf shape); mutate "$FX/hub/model.safetensors" "$d/model.safetensors" shape:h.0.attn.c_attn.weight
    expect 2 "tensor \"h.0.attn.c_attn.weight\" has shape \[33, 96\], expected \[32, 96\]" -- "$SG" import "$d" --out "$W/b.safetensors"
    d=$(hf headtied); mutate "$FX/hub/model.safetensors" "$d/model.safetensors" copy:wte.weight=lm_head.weight
    expect 0 "" -- "$SG" import "$d" --out "$W/tied.safetensors" --quiet
    check 'same_tensors "$W/tied.safetensors" "$W/hub.safetensors"' "a saved lm_head equal to wte: imported as tied"
    d=$(hf headuntied); mutate "$FX/hub/model.safetensors" "$d/model.safetensors" copy:wte.weight=lm_head.weight
    mutate "$d/model.safetensors" "$d/model.safetensors" nan:lm_head.weight
    expect 2 "lm_head.weight differs from wte.weight, which config.json ties it to \(tie_word_embeddings\)" -- "$SG" import "$d" --out "$W/b.safetensors"
    # GPT-2's vocab.json and merges.txt beside config.json give the model its
    # vocabulary (config vocab_sha256); they must fit its ids
    d=$(hf tokfiles); "$PY" "$ROOT/tests/tok/make_gpt2_files.py" "$ROOT/data/vocab/gpt2.tiktoken" "$W/g2" >/dev/null &&
        cp "$W/g2/encoder.json" "$d/vocab.json" && cp "$W/g2/vocab.bpe" "$d/merges.txt"
    expect 2 "vocab.json: 50257 tokens, more than the model's 97" -- "$SG" import "$d" --out "$W/b.safetensors"
    echo '#version: 0.2' >"$d/merges.txt"; echo 'x y z' >>"$d/merges.txt"
    expect 2 "merges.txt:2: expected a merge" -- "$SG" import "$d" --out "$W/b.safetensors"
    expect 0 "vocabulary: unknown \(no tokenizer files beside config.json\)" -- "$SG" import "$FX/hub" --out "$W/unk.safetensors"
    d=$(hf trunc); head -c 5000 "$FX/hub/model.safetensors" >"$d/model.safetensors"
    expect 2 "model.safetensors" -- "$SG" import "$d" --out "$W/b.safetensors"
    check '[ ! -e "$W/b.safetensors" ]' "nothing written by any refused import"
fi
finish
