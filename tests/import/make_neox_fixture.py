"""Writes tests/fixtures/hf_neox: two small GPT-NeoX models (the Pythia
suite's architecture) made and saved by Hugging Face transformers, with
what transformers computes from them, for tests/e2e_import.sh (`sgtrain
import`).  Needs torch and transformers, which CI does not install: the
files are committed, and this script is how they were made
(python tests/import/make_neox_fixture.py tests/fixtures/hf_neox).

  hub/    as the Pythia repositories on the Hub hold them: the config keys
          of transformers 4 (rotary_pct 0.25, rotary_emb_base), attention and
          MLP in parallel, float16, and the buffers older transformers saved
          beside the weights (layers.N.attention.bias, .masked_bias,
          .rotary_emb.inv_freq);
  saved/  as GPTNeoXForCausalLM.save_pretrained writes them today:
          rope_parameters (every head dim rotated, base 500), the sequential
          block (use_parallel_residual false), the tanh GELU, bfloat16.

Both untie the LM head (embed_out), as Pythia does.  Each directory holds
config.json, model.safetensors, val.bin (a sinkgate token shard of exactly
T + 1 tokens) and expected.json: transformers' float64 forward of that
window, from the model read back with from_pretrained (the mean
cross-entropy of its T predictions, and per layer and head the attention
mass on the first 4 positions averaged over the T query rows, as `sgtrain
analyze --what incidence` reports sink_mass), plus the parameter count.

The parameters are drawn far from the initialisation (matrices of std 0.25,
biases and LayerNorm terms of O(0.2)) so that attention is far from uniform
and every part of the layer matters to the loss.
"""

import json
import os
import sys

import numpy as np
import torch
from safetensors.torch import save_file
from transformers import GPTNeoXConfig, GPTNeoXForCausalLM

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fixture_common import expected, randomize, write_shard  # noqa: E402

T, V, C, L, H = 24, 97, 32, 2, 4


def make(out, seed, hub_layout, dtype):
    os.makedirs(out, exist_ok=True)
    common = dict(vocab_size=V, hidden_size=C, num_hidden_layers=L, num_attention_heads=H,
                  intermediate_size=4 * C, max_position_embeddings=T, layer_norm_eps=1e-5,
                  tie_word_embeddings=False, attention_dropout=0.0, hidden_dropout=0.0)
    if hub_layout:
        cfg = GPTNeoXConfig(hidden_act="gelu", use_parallel_residual=True,
                            rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                                             "partial_rotary_factor": 0.25}, **common)
    else:
        cfg = GPTNeoXConfig(hidden_act="gelu_pytorch_tanh", use_parallel_residual=False,
                            rope_parameters={"rope_type": "default", "rope_theta": 500.0,
                                             "partial_rotary_factor": 1.0}, **common)
    # eager attention: the one that returns its probabilities
    model = GPTNeoXForCausalLM._from_config(cfg, attn_implementation="eager")
    randomize(model, seed, lambda n: n.endswith(("layernorm.weight", "final_layer_norm.weight")), lambda n: "embed" in n)
    # the stored precision is the model: round first, then compute from it
    model = model.to(dtype).to(torch.float32)
    rng = np.random.default_rng(seed)
    tokens = rng.integers(0, V, T + 1).tolist()
    write_shard(os.path.join(out, "val.bin"), tokens, V)
    if hub_layout:
        # transformers 5 calls the head lm_head in memory; files name it embed_out
        sd = {k.replace("lm_head.", "embed_out."): v.to(dtype).contiguous() for k, v in model.state_dict().items()}
        d = C // H
        inv = 1.0 / (10000 ** (torch.arange(0, d // 4, 2).float() / (d // 4)))
        for l in range(L):
            a = f"gpt_neox.layers.{l}.attention."
            sd[a + "bias"] = torch.tril(torch.ones(T, T, dtype=torch.bool)).view(1, 1, T, T)
            sd[a + "masked_bias"] = torch.tensor(-1e9, dtype=torch.float32)
            sd[a + "rotary_emb.inv_freq"] = inv.clone()
        save_file(sd, os.path.join(out, "model.safetensors"), metadata={"format": "pt"})
        # the Pythia repositories' keys (transformers 4)
        c = {"architectures": ["GPTNeoXForCausalLM"], "model_type": "gpt_neox", "bos_token_id": 0,
             "eos_token_id": 0, "hidden_act": "gelu", "hidden_size": C, "initializer_range": 0.02,
             "intermediate_size": 4 * C, "layer_norm_eps": 1e-5, "max_position_embeddings": T,
             "num_attention_heads": H, "num_hidden_layers": L, "rotary_emb_base": 10000, "rotary_pct": 0.25,
             "tie_word_embeddings": False, "torch_dtype": "float16", "transformers_version": "4.24.0",
             "use_cache": True, "use_parallel_residual": True, "vocab_size": V}
        with open(os.path.join(out, "config.json"), "w") as f:
            json.dump(c, f, indent=2)
            f.write("\n")
    else:
        model.to(dtype).save_pretrained(out, safe_serialization=True)
    # what transformers computes from the files written, read back as a
    # user would read them (an in-memory model need not equal its save)
    model = GPTNeoXForCausalLM.from_pretrained(out, attn_implementation="eager", dtype=torch.float32)
    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump(expected(model, tokens, H), f, indent=1)
        f.write("\n")


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures/hf_neox"
    make(os.path.join(root, "hub"), 7, True, torch.float16)
    make(os.path.join(root, "saved"), 8, False, torch.bfloat16)


if __name__ == "__main__":
    main()
