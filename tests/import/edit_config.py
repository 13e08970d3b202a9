"""Copies a config.json with keys changed, for the import tests' bad
inputs: python edit_config.py SRC DST KEY=JSON... (KEY=- removes KEY)."""
import json, sys
c = json.load(open(sys.argv[1]))
for kv in sys.argv[3:]:
    k, v = kv.split("=", 1)
    if v == "-": c.pop(k, None)
    else: c[k] = json.loads(v)
json.dump(c, open(sys.argv[2], "w"))
