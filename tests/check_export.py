"""Checks an `sgtrain export` file against the safetensors format (as
PyTorch's `safetensors.torch.load_file` reads it) using only the standard
library: header length, JSON header, dtypes, contiguous in-order offsets that
cover the data exactly, and tensor names/shapes equal to `sgtrain info`'s.

usage: check_export.py FILE.safetensors INFO.json
"""
import json
import struct
import sys

path, info_path = sys.argv[1], sys.argv[2]
raw = open(path, "rb").read()
(n,) = struct.unpack("<Q", raw[:8])
header = json.loads(raw[8 : 8 + n].decode("utf-8"))
data = raw[8 + n :]
meta = header.pop("__metadata__")
assert meta["format"] == "sinkgate", meta
info = json.load(open(info_path))
want = {t["name"]: t["shape"] for t in info["tensors"]}
assert set(header) == set(want), (sorted(set(header) ^ set(want)))
end = 0
for name, t in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0]):
    assert t["dtype"] == "F32", (name, t["dtype"])
    assert t["shape"] == want[name], (name, t["shape"], want[name])
    b, e = t["data_offsets"]
    assert b == end, (name, b, end)
    count = 1
    for s in t["shape"]:
        count *= s
    assert e - b == 4 * count, name
    vals = struct.unpack("<%df" % count, data[b:e])
    assert all(v == v for v in vals), name + " has NaN"
    end = e
assert end == len(data), (end, len(data))
assert meta["arm"] == info["arm"], meta
print("export ok: %d tensors, %d bytes" % (len(header), len(data)))
