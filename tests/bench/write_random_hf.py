"""A full-size model with random weights in the Hub's layout, for
tests/bench/bench_import.sh (the real checkpoints cannot be downloaded
here; the work it times does not depend on the values):

  gpt2     GPT-2 124M: Conv1D [in, out] matrices, no prefix;
  pythia   Pythia-160m (GPT-NeoX): nn.Linear [out, in], query_key_value
           head-major, embed_out untied, the Pythia repositories' keys.

Matrices of std 0.05 (attention far from uniform), LayerNorm terms and
biases near GPT-2's scale.  Writes OUT_DIR/model.safetensors and
config.json.

    python write_random_hf.py gpt2|pythia OUT_DIR
"""
import json
import struct
import sys

import numpy as np


def gpt2(rng):
    L, H, C, T, V = 12, 12, 768, 1024, 50257
    t = {"wte.weight": rng.normal(0, 0.05, (V, C)), "wpe.weight": rng.normal(0, 0.02, (T, C)),
         "ln_f.weight": 1 + rng.normal(0, 0.1, C), "ln_f.bias": rng.normal(0, 0.05, C)}
    for l in range(L):
        p = f"h.{l}."
        for n, shape in (("attn.c_attn", (C, 3 * C)), ("attn.c_proj", (C, C)), ("mlp.c_fc", (C, 4 * C)),
                         ("mlp.c_proj", (4 * C, C))):
            t[p + n + ".weight"] = rng.normal(0, 0.05, shape)
            t[p + n + ".bias"] = rng.normal(0, 0.05, shape[1])
        for n in ("ln_1", "ln_2"):
            t[p + n + ".weight"] = 1 + rng.normal(0, 0.1, C)
            t[p + n + ".bias"] = rng.normal(0, 0.05, C)
    cfg = {"model_type": "gpt2", "n_layer": L, "n_head": H, "n_embd": C, "n_positions": T, "n_ctx": T,
           "vocab_size": V, "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5,
           "architectures": ["GPT2LMHeadModel"]}
    return t, cfg


def pythia(rng):
    L, H, C, T, V = 12, 12, 768, 2048, 50304
    t = {"gpt_neox.embed_in.weight": rng.normal(0, 0.05, (V, C)), "embed_out.weight": rng.normal(0, 0.05, (V, C)),
         "gpt_neox.final_layer_norm.weight": 1 + rng.normal(0, 0.1, C),
         "gpt_neox.final_layer_norm.bias": rng.normal(0, 0.05, C)}
    for l in range(L):
        p = f"gpt_neox.layers.{l}."
        for n, shape in (("attention.query_key_value", (3 * C, C)), ("attention.dense", (C, C)),
                         ("mlp.dense_h_to_4h", (4 * C, C)), ("mlp.dense_4h_to_h", (C, 4 * C))):
            t[p + n + ".weight"] = rng.normal(0, 0.05, shape)
            t[p + n + ".bias"] = rng.normal(0, 0.05, shape[0])
        for n in ("input_layernorm", "post_attention_layernorm"):
            t[p + n + ".weight"] = 1 + rng.normal(0, 0.1, C)
            t[p + n + ".bias"] = rng.normal(0, 0.05, C)
    cfg = {"model_type": "gpt_neox", "architectures": ["GPTNeoXForCausalLM"], "num_hidden_layers": L,
           "num_attention_heads": H, "hidden_size": C, "intermediate_size": 4 * C, "max_position_embeddings": T,
           "vocab_size": V, "hidden_act": "gelu", "layer_norm_eps": 1e-5, "rotary_pct": 0.25,
           "rotary_emb_base": 10000, "use_parallel_residual": True, "tie_word_embeddings": False}
    return t, cfg


def main():
    family, out = sys.argv[1], sys.argv[2]
    t, cfg = {"gpt2": gpt2, "pythia": pythia}[family](np.random.default_rng(0 if family == "gpt2" else 1))
    head, off, blobs = {"__metadata__": {"format": "pt"}}, 0, []
    for k, v in t.items():
        b = v.astype("<f4").tobytes()
        head[k] = {"dtype": "F32", "shape": list(v.shape), "data_offsets": [off, off + len(b)]}
        off += len(b)
        blobs.append(b)
    h = json.dumps(head).encode()
    h += b" " * (-len(h) % 8)
    with open(out + "/model.safetensors", "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for b in blobs:
            f.write(b)
    json.dump(cfg, open(out + "/config.json", "w"))


if __name__ == "__main__":
    main()
