#!/usr/bin/env bash
# `sgtrain import` of GPT-NeoX, the Pythia suite's architecture
# (docs/import.md), against what transformers itself computed
# (tests/fixtures/hf_neox, made by tests/import/make_neox_fixture.py):
#   - the Pythia repositories' layout (transformers 4's config keys, rotary
#     on a quarter of each head, attention and MLP in parallel, float16, the
#     old buffers beside the weights) and save_pretrained's today
#     (rope_parameters, every head dim rotated, base 500, the sequential
#     block, the tanh GELU, bfloat16), both with the untied head embed_out,
#     import with transformers' parameter count;
#   - the imported model's clean loss and every head's attention mass on the
#     first four positions equal transformers' float64 forward to float32's
#     rounding: the fused query_key_value's head-major rows, the rotation
#     and the parallel block are read as transformers computes them;
#   - every analysis of the imported model against the NumPy reference
#     (tests/analysis/ref_analysis.py, which rotates, runs the block in
#     parallel and reads the untied head);
#   - every bad input: exit 2 with a message, and nothing written.
set -u
B=${1:-build}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SG=$(cd "$B" && pwd)/sgtrain
PY=$ROOT/build/venv/bin/python
FX=$ROOT/tests/fixtures/hf_neox
W=$(mktemp -d)
trap '[ -n "${KEEP:-}" ] || rm -rf "$W"' EXIT
E2E_NAME=e2e_import_neox
source "$(dirname "$0")/lib.sh"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
json() { "$PY" -c "import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$@"; }
have_py=0
"$PY" -c 'import numpy' 2>/dev/null && have_py=1
check '[ $have_py = 1 ]' "NumPy in build/venv (tools/install-deps.sh installs it)"
A="--batches 1 --batch-size 2 --seq-len 24 --quiet"

# --- both layouts against transformers --------------------------------------
parts_hub="erf GELU, rotary positions on 2 of 8 head dims, attention and MLP in parallel, untied LM head"
parts_saved="tanh GELU, rotary positions on 8 of 8 head dims, untied LM head"
for v in hub saved; do
    m=$W/$v.safetensors
    n=$(json "$FX/$v/expected.json" "d['n_params']")
    parts=parts_$v
    expect 0 "$v -> .*: GPT-NeoX, 2 layers, 4 heads, width 32, context 24, vocabulary 97, $n parameters, ${!parts}" -- \
        "$SG" import "$FX/$v" --out "$m"
    "$SG" analyze "$m" --data "$FX/$v" --what incidence,injection --out "$W/an_$v" $A
    [ $have_py = 1 ] || continue
    out=$("$PY" "$ROOT/tests/import/compare_expected.py" "$FX/$v/expected.json" "$W/an_$v")
    check 'grep -q "^agree" <<<"$out"' "$v: loss and every head's sink mass equal transformers'"$'\n'"$out"
    meta=$("$PY" -c "
import json, struct, sys
raw = open(sys.argv[1], 'rb').read(); n = struct.unpack('<Q', raw[:8])[0]
h = json.loads(raw[8:8 + n]); c = h['__metadata__']['config']
print('lm_head.weight' in h, 'wpe' in h, [l.split(': ')[1] for l in c.splitlines()
      if l.split(':')[0] in ('rotary_dims', 'rotary_base', 'parallel_residual', 'tie_embeddings')])
" "$m")
    want=$([ $v = hub ] && echo "True False ['10000', '2', 'true', 'false']" || echo "True False ['500', '8', 'false', 'false']")
    check '[ "$meta" = "$want" ]' "$v: the file holds lm_head.weight and no wpe, and its config the rotary and block settings ($meta)"

    # every analysis against the NumPy reference
    d=$W/ref_$v
    mkdir -p "$d"
    cp "$m" "$d/model.safetensors"
    "$SG" analyze "$d/model.safetensors" --data "$FX/$v" --batches 2 --batch-size 2 --seq-len 20 --sink-positions 2 --quiet
    out=$("$PY" "$ROOT/tests/analysis/ref_analysis.py" "$d" "$d/model.safetensors" "$FX/$v" 2>&1)
    check 'grep -qE "ref_analysis: [0-9]+ passed, 0 failed" <<<"$out"' "$v: every analysis against the NumPy reference"$'\n'"$out"
done

# --- bad inputs: exit 2, a message, nothing written --------------------------
mutate() { "$PY" "$ROOT/tests/import/st_mutate.py" "$@"; }
# a copy of fixture BASE with config.json's keys changed (KEY=JSON, KEY=-)
nx() { # BASE NAME [KEY=VALUE...]
    local base=$1 dir=$W/nx_$2; shift 2
    mkdir -p "$dir" && cp "$FX/$base/model.safetensors" "$dir/"
    "$PY" "$ROOT/tests/import/edit_config.py" "$FX/$base/config.json" "$dir/config.json" "$@"
    echo "$dir"
}
if [ $have_py = 1 ]; then
    o=$W/b.safetensors
    expect 2 "no \"hidden_size\"" -- "$SG" import "$(nx hub nohidden hidden_size=-)" --out "$o"
    expect 2 "no \"max_position_embeddings\"" -- "$SG" import "$(nx hub nopos max_position_embeddings=-)" --out "$o"
    expect 2 "\"num_attention_heads\" is not an integer" -- "$SG" import "$(nx hub headstr num_attention_heads='"4"')" --out "$o"
    expect 2 "\"vocab_size\" is 70000, outside \[2, 65536\]" -- "$SG" import "$(nx hub bigv vocab_size=70000)" --out "$o"
    expect 2 "hidden_size 32 is not divisible by num_attention_heads 5" -- "$SG" import "$(nx hub div num_attention_heads=5)" --out "$o"
    expect 2 "head_dim 16 is not hidden_size / num_attention_heads = 8" -- "$SG" import "$(nx hub hd head_dim=16)" --out "$o"
    expect 2 "intermediate_size 100 is not 4 hidden_size = 128" -- "$SG" import "$(nx hub inner intermediate_size=100)" --out "$o"
    expect 2 "hidden_act \"relu\" is not supported" -- "$SG" import "$(nx hub relu hidden_act='"relu"')" --out "$o"
    expect 2 "layer_norm_eps 1e-06 is not supported" -- "$SG" import "$(nx hub eps layer_norm_eps=1e-6)" --out "$o"
    expect 2 "\"attention_bias\": false is not supported \(sinkgate's linear_bias gives every linear layer a bias\)" -- \
        "$SG" import "$(nx hub nobias attention_bias=false)" --out "$o"
    expect 2 "\"use_parallel_residual\" is not a boolean" -- "$SG" import "$(nx hub par use_parallel_residual=1)" --out "$o"
    expect 2 "rotary on 3 of 8 head dims: sinkgate rotates an even number" -- "$SG" import "$(nx hub odd rotary_pct=0.375)" --out "$o"
    expect 2 "the rotary fraction 0 is outside \(0, 1\]" -- "$SG" import "$(nx hub zero rotary_pct=0)" --out "$o"
    expect 2 "\"rotary_emb_base\" is not a number" -- "$SG" import "$(nx hub basestr rotary_emb_base='"ten"')" --out "$o"
    expect 2 "the rotary base 1 is not above 1" -- "$SG" import "$(nx hub base1 rotary_emb_base=1)" --out "$o"
    expect 2 "\"rope_scaling\" is not supported" -- "$SG" import "$(nx hub scaling rope_scaling='{"type": "linear", "factor": 2}')" --out "$o"
    expect 2 "rope_parameters.rope_type \"linear\" is not supported" -- \
        "$SG" import "$(nx saved ropetype rope_parameters='{"rope_type": "linear", "factor": 2.0}')" --out "$o"
    expect 2 "a top-level \"rope_theta\" of 500, which transformers does not read \(it reads 10000 from rope_parameters or rotary_emb_base\): ambiguous" -- \
        "$SG" import "$(nx hub toptheta rope_theta=500)" --out "$o"
    expect 2 "a top-level \"partial_rotary_factor\" of 1, which transformers does not read \(it reads 0.25" -- \
        "$SG" import "$(nx hub toppct partial_rotary_factor=1)" --out "$o"
    expect 0 "rotary positions on 2 of 8 head dims" -- "$SG" import "$(nx hub topsame rope_theta=10000 partial_rotary_factor=0.25)" --out "$W/topsame.safetensors"
    # rope_parameters without a fraction: rotary_pct's, as transformers 5 fills it in
    expect 0 "rotary positions on 4 of 8 head dims" -- \
        "$SG" import "$(nx saved nofrac rope_parameters='{"rope_type": "default", "rope_theta": 500.0}' rotary_pct=0.5)" --out "$W/nofrac.safetensors"
    expect 2 "\"rope_parameters\" is not an object" -- "$SG" import "$(nx saved ropearr rope_parameters='[1]')" --out "$o"
    expect 2 "rope_parameters: \"rope_theta\" is not a number" -- \
        "$SG" import "$(nx saved theta rope_parameters='{"rope_theta": "x"}')" --out "$o"
    # the weights
    d=$(nx hub noembed); mutate "$FX/hub/model.safetensors" "$d/model.safetensors" rename:gpt_neox.embed_in.weight=embed.weight
    expect 2 "no gpt_neox.embed_in.weight: not a GPT-NeoX model" -- "$SG" import "$d" --out "$o"
    d=$(nx hub extra); mutate "$FX/hub/model.safetensors" "$d/model.safetensors" add:gpt_neox.layers.0.mlp.gate
    expect 2 "tensor \"gpt_neox.layers.0.mlp.gate\" is not part of the GPT-NeoX model config.json describes" -- "$SG" import "$d" --out "$o"
    d=$(nx hub layer9); mutate "$FX/hub/model.safetensors" "$d/model.safetensors" copy:gpt_neox.layers.1.attention.dense.bias=gpt_neox.layers.9.attention.dense.bias
    expect 2 "tensor \"gpt_neox.layers.9.attention.dense.bias\" is not part of the GPT-NeoX model" -- "$SG" import "$d" --out "$o"
    d=$(nx hub nohead); mutate "$FX/hub/model.safetensors" "$d/model.safetensors" rename:embed_out.weight=gpt_neox.layers.0.attention.masked_bias
    expect 2 "no embed_out.weight \(nor lm_head.weight\), the LM head config.json unties from the embedding" -- "$SG" import "$d" --out "$o"
    d=$(nx hub bothheads); mutate "$FX/hub/model.safetensors" "$d/model.safetensors" copy:embed_out.weight=lm_head.weight
    expect 2 "both embed_out.weight and lm_head.weight: which is the LM head\?" -- "$SG" import "$d" --out "$o"
    d=$(nx hub lmhead); mutate "$FX/hub/model.safetensors" "$d/model.safetensors" rename:embed_out.weight=lm_head.weight
    expect 0 "" -- "$SG" import "$d" --out "$W/lmhead.safetensors" --quiet
    "$SG" analyze "$W/lmhead.safetensors" --data "$FX/hub" --what injection --out "$W/an_lmhead" $A
    check '[ "$(json "$W/an_lmhead/injection.json" "d[\"clean_val_loss\"]")" = "$(json "$W/an_hub/injection.json" "d[\"clean_val_loss\"]")" ]' \
        "the head under transformers 5's in-memory name lm_head.weight: the same model"
    d=$(nx hub tied tie_word_embeddings=true)
    expect 2 "embed_out.weight differs from gpt_neox.embed_in.weight, which config.json ties it to" -- "$SG" import "$d" --out "$o"
    d=$(nx hub tied2 tie_word_embeddings=true); mutate "$FX/hub/model.safetensors" "$d/model.safetensors" drop:embed_out.weight
    expect 0 "GPT-NeoX, .* parameters, erf GELU, rotary positions on 2 of 8 head dims, attention and MLP in parallel$" -- \
        "$SG" import "$d" --out "$W/tied.safetensors"
    d=$(nx hub qkvshape); mutate "$FX/hub/model.safetensors" "$d/model.safetensors" shape:gpt_neox.layers.1.attention.query_key_value.weight
    expect 2 "tensor \"gpt_neox.layers.1.attention.query_key_value.weight\" has shape \[97, 32\], expected \[96, 32\]" -- "$SG" import "$d" --out "$o"
    d=$(nx hub missing); mutate "$FX/hub/model.safetensors" "$d/model.safetensors" rename:gpt_neox.layers.1.mlp.dense_4h_to_h.bias=gpt_neox.layers.1.attention.masked_bias
    expect 2 "no tensor \"gpt_neox.layers.1.mlp.dense_4h_to_h.bias\"" -- "$SG" import "$d" --out "$o"
    d=$(nx hub nan); mutate "$FX/hub/model.safetensors" "$d/model.safetensors" nan:gpt_neox.layers.0.attention.dense.bias
    expect 2 "holds a value that is not finite" -- "$SG" import "$d" --out "$o"
    check '[ ! -e "$o" ]' "nothing written by any refused import"
fi

# --- the vocabulary the model's ids mean (config vocab_sha256) ----------------
# a tokenizer.json beside config.json gives the model its vocabulary's
# identity (tok_hf_vocab_sha256, as tools/hf_tokenize.py's); without one a
# GPT-NeoX import's is "unknown", and generate and zeroshot refuse it
cfgval() { # MODEL.safetensors KEY: the value in its saved config
    "$PY" -c "
import json, struct, sys
raw = open(sys.argv[1], 'rb').read(); n = struct.unpack('<Q', raw[:8])[0]
c = json.loads(raw[8:8 + n])['__metadata__']['config']
print([l.split(': ', 1)[1].strip('\"') for l in c.splitlines() if l.startswith(sys.argv[2] + ':')][0])" "$1" "$2"
}
if [ $have_py = 1 ]; then
    check '[ "$(cfgval "$W/hub.safetensors" vocab_sha256)" = unknown ]' "imported without tokenizer files: vocab_sha256 unknown"
    expect 2 "imported without its tokenizer \(tokenizer.json, or GPT-2's vocab.json and merges.txt" -- \
        "$SG" generate "$W/hub.safetensors" --vocab "$ROOT/data/vocab/gpt2.tiktoken" --prompt "a" --quiet
    # a small byte-level BPE tokenizer.json: 3 ordinary tokens, <|endoftext|> special, two spaces added
    d=$(nx hub tok)
    cat >"$d/tokenizer.json" <<'JSON'
{"version": "1.0", "added_tokens": [{"id": 3, "content": "<|endoftext|>", "special": true},
 {"id": 4, "content": "  ", "special": false}],
 "model": {"type": "BPE", "vocab": {"a": 0, "\u0120": 1, "\u0120a": 2, "<|endoftext|>": 3}, "merges": ["\u0120 a"]}}
JSON
    want=$("$PY" -c "
import base64, hashlib
lines = [(b'a', 0), (b' ', 1), (b' a', 2), (b'  ', 4)]
print(hashlib.sha256(b''.join(base64.b64encode(t) + b' %d\n' % i for t, i in lines)).hexdigest())")
    expect 0 "vocabulary: tokenizer.json's, SHA-256 ${want:0:16}" -- "$SG" import "$d" --out "$W/tok.safetensors"
    check '[ "$(cfgval "$W/tok.safetensors" vocab_sha256)" = "$want" ]' \
        "vocab_sha256: the tokenizer.json's ids in order, specials left out, bytes through GPT-2's map, an added token's UTF-8"
    expect 2 "gpt2.tiktoken is not the vocabulary the model's token ids mean \(SHA-256 306cd27f03c1a714..., the model says ${want:0:16}" -- \
        "$SG" generate "$W/tok.safetensors" --vocab "$ROOT/data/vocab/gpt2.tiktoken" --prompt "a" --quiet
    expect 2 "--vocab: .*/tokenizer.json is a Hugging Face tokenizer.json, which sinkgate's tokenizer does not read" -- \
        "$SG" generate "$W/tok.safetensors" --vocab "$W/nx_tok/tokenizer.json" --prompt "a" --quiet
    # shards cut with another vocabulary are refused by analyze (synthetic ones carry none)
    mkdir -p "$W/other"
    "$PY" -c "
import sys
b = bytearray(open(sys.argv[1], 'rb').read()); b[32:64] = bytes(range(1, 33)); open(sys.argv[2], 'wb').write(b)" \
        "$FX/hub/val.bin" "$W/other/val.bin"
    expect 2 "its tokens were cut with another vocabulary \(SHA-256 0102030405060708...\) than the one the model's ids mean \(${want:0:16}" -- \
        "$SG" analyze "$W/tok.safetensors" --data "$W/other" --what injection --out "$W/an_other" $A
    expect 0 "" -- "$SG" analyze "$W/hub.safetensors" --data "$W/other" --what injection --out "$W/an_other" $A
    # damaged tokenizer files: exit 2, nothing written
    d=$(nx hub tokbad); echo '{"model": {"type": "BPE"}}' >"$d/tokenizer.json"
    expect 2 "tokenizer.json: no \"model\" with a \"vocab\" object" -- "$SG" import "$d" --out "$o"
    d=$(nx hub tokwp); echo '{"model": {"type": "WordPiece", "vocab": {"a": 0}}}' >"$d/tokenizer.json"
    expect 2 "its model is not BPE" -- "$SG" import "$d" --out "$o"
    d=$(nx hub tokbig); echo '{"model": {"type": "BPE", "vocab": {"a": 0, "b": 97}}}' >"$d/tokenizer.json"
    expect 2 "token \"b\" has id 97, outside the model's 97" -- "$SG" import "$d" --out "$o"
    d=$(nx hub tokuni); echo '{"model": {"type": "BPE", "vocab": {"a": 0, "\u4e00": 1}}}' >"$d/tokenizer.json"
    expect 2 "token 1 .* is outside GPT-2's byte-to-unicode alphabet" -- "$SG" import "$d" --out "$o"
    check '[ ! -e "$o" ]' "nothing written by a refused tokenizer"
fi
finish
