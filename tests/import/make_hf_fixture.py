"""Writes tests/fixtures/hf_gpt2: two small GPT-2 models made and saved by
Hugging Face transformers, with what transformers computes from them, for
tests/e2e_import.sh (`sgtrain import`).  Needs torch and transformers, which
CI does not install: the files are committed, and this script is how they
were made (python tests/import/make_hf_fixture.py tests/fixtures/hf_gpt2).

  hub/    as the gpt2 repositories on the Hub hold them: tensor names without
          the "transformer." prefix, float32, the causal-mask buffers
          h.N.attn.bias and h.N.attn.masked_bias beside the weights, and
          activation_function "gelu_new" (the tanh GELU);
  saved/  as GPT2LMHeadModel.save_pretrained writes them today: the
          "transformer." prefix, no lm_head (tied), bfloat16, and
          activation_function "gelu" (the erf form).

Each directory holds config.json, model.safetensors, val.bin (a sinkgate
token shard of exactly T + 1 tokens, so that the analysis's one window of T
tokens is the whole shard) and expected.json: transformers' float64 forward
of that window, from the model read back with from_pretrained: the mean cross-entropy of its T predictions, and per layer
and head the attention mass on the first 4 positions averaged over the T
query rows (`sgtrain analyze --what incidence`'s sink_mass), plus the
parameter count transformers reports.

The parameters are drawn far from GPT-2's initialisation (matrices of std
0.25, biases and LayerNorm terms of O(0.2)) so that attention is far from
uniform and every bias matters to the loss.
"""

import json
import os
import sys

import numpy as np
import torch
from safetensors.torch import save_file
from transformers import GPT2Config, GPT2LMHeadModel

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fixture_common import expected, randomize, write_shard  # noqa: E402

T, V, C, L, H = 24, 97, 32, 2, 4


def make(out, activation, seed, hub_layout, dtype):
    os.makedirs(out, exist_ok=True)
    cfg = GPT2Config(n_layer=L, n_head=H, n_embd=C, n_positions=T, vocab_size=V, activation_function=activation,
                     layer_norm_epsilon=1e-5, resid_pdrop=0, embd_pdrop=0, attn_pdrop=0)
    # eager attention: the one that returns its probabilities
    model = GPT2LMHeadModel._from_config(cfg, attn_implementation="eager")
    randomize(model, seed, lambda n: n.endswith(("ln_1.weight", "ln_2.weight", "ln_f.weight")), lambda n: "wte" in n or "wpe" in n)
    # the stored precision is the model: round first, then compute from it
    model = model.to(dtype).to(torch.float32)
    rng = np.random.default_rng(seed)
    tokens = rng.integers(0, V, T + 1).tolist()
    write_shard(os.path.join(out, "val.bin"), tokens, V)
    if hub_layout:
        sd = {k[len("transformer."):]: v.to(dtype).contiguous() for k, v in model.state_dict().items()
              if k.startswith("transformer.")}
        for l in range(L):
            sd[f"h.{l}.attn.bias"] = torch.tril(torch.ones(T, T, dtype=torch.uint8)).view(1, 1, T, T)
            sd[f"h.{l}.attn.masked_bias"] = torch.tensor(-1e4, dtype=dtype)
        save_file(sd, os.path.join(out, "model.safetensors"), metadata={"format": "pt"})
        cfg.to_json_file(os.path.join(out, "config.json"))
    else:
        model.to(dtype).save_pretrained(out, safe_serialization=True)
    # what transformers computes from the files written, read back as a
    # user would read them (an in-memory model need not equal its save)
    model = GPT2LMHeadModel.from_pretrained(out, attn_implementation="eager", dtype=torch.float32)
    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump(expected(model, tokens, H), f, indent=1)
        f.write("\n")


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures/hf_gpt2"
    make(os.path.join(root, "hub"), "gelu_new", 5, True, torch.float32)
    make(os.path.join(root, "saved"), "gelu", 6, False, torch.bfloat16)


if __name__ == "__main__":
    main()
