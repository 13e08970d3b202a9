"""What make_hf_fixture.py and make_neox_fixture.py share: parameters far
from the initialisation, the one-window token shard, and transformers'
float64 forward of it (expected.json)."""

import struct

import numpy as np
import torch

SINK = 4  # `sgtrain analyze --what incidence`'s default sink positions


def randomize(model, seed, is_norm_weight, is_embedding):
    """LayerNorm scales 1 + 0.2 N, other vectors 0.2 N, embeddings 0.5 N,
    matrices 0.25 N: attention far from uniform, every bias in play."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            n = torch.randn(p.shape, generator=g, dtype=torch.float64)
            if is_norm_weight(name):
                p.copy_(1 + 0.2 * n)
            elif p.dim() == 1:
                p.copy_(0.2 * n)
            elif is_embedding(name):
                p.copy_(0.5 * n)
            else:
                p.copy_(0.25 * n)


def write_shard(path, tokens, vocab):
    """A sinkgate validation shard (docs/formats.md) of these tokens."""
    head = bytearray(256)
    head[0:8] = b"SGTOKENS"
    struct.pack_into("<IIII", head, 8, 1, 256, 2, vocab)
    struct.pack_into("<Q", head, 24, len(tokens))
    struct.pack_into("<I", head, 64, 1)
    with open(path, "wb") as f:
        f.write(bytes(head))
        f.write(np.asarray(tokens, dtype="<u2").tobytes())


def expected(model, tokens, H):
    """transformers' float64 forward of the window: the mean cross-entropy,
    each layer's and head's attention mass on the first SINK positions
    averaged over the query rows, and the parameter count."""
    m = model.to(torch.float64).eval()
    x = torch.tensor(tokens[:-1])[None]
    y = torch.tensor(tokens[1:])[None]
    with torch.no_grad():
        out = m(x, output_attentions=True)
    loss = torch.nn.functional.cross_entropy(out.logits[0], y[0]).item()
    sink = [[a[0, h, :, :SINK].sum(-1).mean().item() for h in range(H)] for a in out.attentions]
    return {"loss": loss, "sink_mass": sink, "n_params": m.num_parameters(),
            "tokens": [int(t) for t in tokens]}
