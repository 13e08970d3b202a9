"""Rewrites a safetensors file with one change, for the import tests'
bad inputs: python st_mutate.py SRC DST WHAT, where WHAT is
  drop:NAME          the tensor removed
  add:NAME           a one-value F32 tensor added
  meta:KEY=VALUE     a metadata entry set (VALUE "-" removes it)
  nan:NAME           the tensor's first value made NaN (F32)
  i32:NAME           the tensor's dtype declared I32
  rename:A=B         tensor A renamed B
  copy:A=B           tensor A copied as B
  shape:NAME         one more row (the first row's bytes repeated)
SRC and DST may be the same file."""
import json, struct, sys
src, dst, what = sys.argv[1:4]
raw = open(src, "rb").read(); n = struct.unpack("<Q", raw[:8])[0]
h = json.loads(raw[8:8 + n]); data = raw[8 + n:]
meta = h.pop("__metadata__", None)
tensors = {k: data[v["data_offsets"][0]:v["data_offsets"][1]] for k, v in h.items()}
info = {k: (v["dtype"], v["shape"]) for k, v in h.items()}
if what.startswith("drop:"):
    del tensors[what[5:]]
elif what.startswith("add:"):
    tensors[what[4:]] = struct.pack("<f", 1.0); info[what[4:]] = ("F32", [1])
elif what.startswith("meta:"):
    k, v = what[5:].split("=", 1)
    if v == "-": meta.pop(k)
    else: meta[k] = v
elif what.startswith("nan:"):
    b = bytearray(tensors[what[4:]]); b[0:4] = struct.pack("<f", float("nan")); tensors[what[4:]] = bytes(b)
elif what.startswith("i32:"):
    info[what[4:]] = ("I32", info[what[4:]][1])
elif what.startswith("rename:"):
    a, b = what[7:].split("=", 1)
    tensors[b] = tensors.pop(a); info[b] = info.pop(a)
elif what.startswith("copy:"):
    a, b = what[5:].split("=", 1)
    tensors[b] = tensors[a]; info[b] = info[a]
elif what.startswith("shape:"):
    k = what[6:]; size = {"F16": 2, "BF16": 2, "F32": 4, "F64": 8}[info[k][0]]
    tensors[k] = tensors[k] + tensors[k][:size * info[k][1][-1]]
    info[k] = (info[k][0], [info[k][1][0] + 1] + info[k][1][1:])
out, off = {}, 0
if meta is not None: out["__metadata__"] = meta
for k, t in tensors.items():
    out[k] = {"dtype": info[k][0], "shape": info[k][1], "data_offsets": [off, off + len(t)]}; off += len(t)
hdr = json.dumps(out).encode(); hdr += b" " * (-len(hdr) % 8)
open(dst, "wb").write(struct.pack("<Q", len(hdr)) + hdr + b"".join(tensors.values()))
