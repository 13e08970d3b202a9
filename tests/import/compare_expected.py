"""An imported fixture model's analysis against what transformers computed
(expected.json, made by make_hf_fixture.py or make_neox_fixture.py): the
clean loss and every head's attention mass on the first four positions, to
float32's rounding of a float64 forward (2e-6; measured: a few 1e-7).
Prints "agree: ..." or one line per disagreement.

    python compare_expected.py EXPECTED.json ANALYSIS_DIR
"""
import json
import sys

e = json.load(open(sys.argv[1]))
inj = json.load(open(sys.argv[2] + "/injection.json"))
inc = json.load(open(sys.argv[2] + "/incidence.json"))
bad = []
if abs(inj["clean_val_loss"] - e["loss"]) > 2e-6:
    bad.append(f"loss {inj['clean_val_loss']} vs transformers {e['loss']}")
for l, layer in enumerate(inc["layers"]):
    for h, head in enumerate(layer["heads"]):
        if abs(head["sink_mass"] - e["sink_mass"][l][h]) > 2e-6:
            bad.append(f"layer {l} head {h} sink mass {head['sink_mass']} vs {e['sink_mass'][l][h]}")
print("\n".join(bad) or f"agree: loss {inj['clean_val_loss']:.9f} vs {e['loss']:.9f}")
