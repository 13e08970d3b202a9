"""Appendix F's incidence survey the way a researcher would run it without
sinkgate: Hugging Face transformers' GPT-2 or GPT-NeoX (eager attention,
which returns its probabilities), the values taken from the QKV
projection's output by a forward hook (GPT-NeoX's rows are head-major,
[q_h | k_h | v_h] per head), and the statistics in torch, as
docs/analysis.md ("Incidence") defines them.  For tests/bench/bench_import.sh, which times it against
`sgtrain analyze --what incidence` on the same windows.

    python hf_incidence.py HF_DIR DATA_DIR --batches N --batch-size B --seq-len T
        --val-seed S --threads K --json OUT.json

Writes the per-head values (sink_mass, blind_mass_ratio and content_share
at 10, 20, 30 and 50, r0_ratio) and the seconds of the measurement (the
windows' forward passes and the statistics, after loading).
"""

import argparse
import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_analysis import read_val, val_batch  # noqa: E402  (the sinkgate windows)

SINK, PCT = 4, (10.0, 20.0, 30.0, 50.0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("hf_dir")
    ap.add_argument("data_dir")
    ap.add_argument("--batches", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--seq-len", type=int, default=1024)
    ap.add_argument("--val-seed", type=int, default=1337)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", required=True)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    from transformers import AutoModelForCausalLM
    m = AutoModelForCausalLM.from_pretrained(a.hf_dir, attn_implementation="eager").float().eval()
    c = m.config
    vals = {}
    if c.model_type == "gpt_neox":
        L, H, C = c.num_hidden_layers, c.num_attention_heads, c.hidden_size
        d = C // H
        for l, blk in enumerate(m.gpt_neox.layers):
            blk.attention.query_key_value.register_forward_hook(
                lambda mod, inp, out, l=l: vals.__setitem__(
                    l, out.view(*out.shape[:-1], H, 3 * d)[..., 2 * d:].reshape(*out.shape[:-1], C)))
    else:
        L, H, C = c.n_layer, c.n_head, c.n_embd
        d = C // H
        for l, blk in enumerate(m.transformer.h):
            blk.attn.c_attn.register_forward_hook(lambda mod, inp, out, l=l: vals.__setitem__(l, out[..., 2 * C:]))
    val = read_val(a.data_dir)
    z = lambda: torch.zeros(L, H, dtype=torch.float64)
    rows, sink = z(), z()
    mq, m_all = torch.zeros(len(PCT), L, H, dtype=torch.float64), z()
    kq, k_all = torch.zeros(len(PCT), L, H, dtype=torch.float64), z()
    r0, rmed = z(), z()
    t0 = time.perf_counter()
    with torch.no_grad():
        for n in range(a.batches):
            x, _ = val_batch(val, a.val_seed, n, a.batch_size, a.seq_len)
            out = m(x, output_attentions=True)
            for l, P in enumerate(out.attentions):                      # [B, H, T, T]
                B, T = P.shape[0], P.shape[-1]
                r = vals[l].reshape(B, T, H, d).transpose(1, 2).norm(dim=-1)  # [B, H, T]
                rows[l] += B * T
                sink[l] += P[..., :SINK].sum((-1, -2)).sum(0).double()
                Pr, rr = P[..., SINK:], r[..., SINK:]                   # reads past the sink
                m_all[l] += Pr.sum((-1, -2)).sum(0).double()
                k_all[l] += (Pr * rr[:, :, None, :]).sum((-1, -2)).sum(0).double()
                for p, q in enumerate(PCT):
                    cut = torch.quantile(rr.double(), q / 100, dim=-1, keepdim=True)  # linear interpolation
                    quiet = (rr.double() < cut).to(P.dtype)[:, :, None, :]
                    mq[p, l] += (Pr * quiet).sum((-1, -2)).sum(0).double()
                    kq[p, l] += (Pr * quiet * rr[:, :, None, :]).sum((-1, -2)).sum(0).double()
                r0[l] += r[..., 0].sum(0).double()
                rmed[l] += r[..., 1:].double().quantile(0.5, dim=-1).sum(0)
    secs = time.perf_counter() - t0
    heads = [[{"sink_mass": (sink[l, h] / rows[l, h]).item(),
               "blind_mass_ratio": [((mq[p, l, h] / m_all[l, h]) / (q / 100)).item() for p, q in enumerate(PCT)],
               "content_share": [(kq[p, l, h] / k_all[l, h]).item() for p in range(len(PCT))],
               "r0_ratio": (r0[l, h] / rmed[l, h]).item()} for h in range(H)] for l in range(L)]
    json.dump({"seconds": secs, "torch": torch.__version__, "threads": a.threads, "heads": heads},
              open(a.json, "w"))


if __name__ == "__main__":
    main()
