#!/usr/bin/env python3
"""Issue cycles of a path through a CUDA kernel, from the control codes
ptxas wrote into its SASS, without a GPU.

    python3 tests/gpu/sass_issue.py [--arch 90a] --kernel STR FILE.cu --branches
    python3 tests/gpu/sass_issue.py [--arch 90a] --kernel STR FILE.cu \\
        --path START:STOP [--take ADDR=T|N|COUNT,...] [--warps 1,2,3]

Every Volta-and-later instruction carries, in bits 105-125 of its 128-bit
word (bits 41-61 of the second 64-bit word cuobjdump prints), the schedule
ptxas chose: a stall count (cycles before the warp's next instruction may
issue; how ptxas covers fixed-latency results), a yield hint, a write and a
read scoreboard the instruction sets (variable-latency results: shared and
global memory, the special-function unit, shuffles), and a mask of the
scoreboards it waits on.  --branches lists a kernel's branches, barriers
and convergence points with their addresses; --path walks the instructions
from START up to STOP (hexadecimal addresses), taking a conditional branch
as --take says (T taken, N not taken, COUNT taken that many times, then not;
an unconditional one is always taken, a BRA.DIV never), and models their
issue:

  - an instruction issues once its warp's previous one has stalled its
    count, the scoreboards it waits on are released and its pipe is free,
    and a sub-partition issues one instruction a cycle;
  - a write scoreboard is released an assumed latency after issue (LAT,
    below: shared-memory and matrix loads 30-33 cycles, MUFU 18, SHFL 28),
    a read scoreboard after 6;
  - pipes are shared by the sub-partition's warps, each instruction holding
    its pipe for PIPE cycles (Hopper: an HMMA.16816 6 cycles, the tensor
    core's measured mma.sync rate; MUFU 8, 4 lanes; fp32 1; integer and
    the rest 2);
  - the path is repeated by each of W warps (--warps), as W resident warps
    of one sub-partition run the same tile loop.

It prints the instructions, products (HMMA), the sum of the stall counts,
the stall cycles by opcode, and the modelled cycles a pass for 1, 2 and 3
warps, a product and a sub-partition.  What it leaves out: waits on memory
(cp.async groups, global loads: their scoreboards are released at LAT),
barriers' waits for other warps, bank conflicts, the instruction cache, and
the clock rates of the pipes beyond the table.  It compares two codes for
the same work (docs/cuda.md, "Issue cycles from the control codes"); it
does not predict a kernel's time.
"""
import argparse
import collections
import os
import re
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sass_mix  # noqa: E402

LAT = {"LDSM": 33, "LDS": 30, "LDL": 30, "MUFU": 18, "SHFL": 28, "S2R": 20, "CS2R": 20, "S2UR": 20, "LDC": 20,
       "LDG": 500, "VOTE": 10}
PIPE = {"HMMA": ("tensor", 6), "MUFU": ("sfu", 8), "FFMA": ("fp32", 1), "FADD": ("fp32", 1), "FMUL": ("fp32", 1),
        "LDSM": ("mio", 4), "LDGSTS": ("mio", 4), "LDS": ("mio", 1), "STS": ("mio", 1), "SHFL": ("mio", 2)}
PRED = re.compile(r"^@!?U?P[T0-9]\s+")
LINE = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;\s*/\* (0x[0-9a-f]+) \*/")
HIGH = re.compile(r"^\s*/\* (0x[0-9a-f]+) \*/\s*$")
BRANCH = re.compile(r"^(@!?U?P[T0-9]\s+)?BRA(\.\w+)?\s+(?:(!?U?P[T0-9]),\s*)?(?:UR\d+,\s*)?0x([0-9a-f]+)")


def fail(msg):
    print(f"sass_issue: {msg}", file=sys.stderr)
    sys.exit(1)


def kernels(listing):
    """{name: [instruction]} with each instruction's address, text and
    decoded control code"""
    out, name, first = {}, None, None
    for line in listing.splitlines():
        if "Function : " in line:
            name = line.split("Function : ", 1)[1].strip()
            out[name] = []
            continue
        m = LINE.search(line)
        if m and name:
            first = (int(m.group(1), 16), m.group(2))
            continue
        m = HIGH.match(line)
        if m and name and first:
            c = int(m.group(1), 16) >> 41
            out[name].append({"addr": first[0], "text": first[1], "stall": c & 15, "wbar": c >> 5 & 7,
                              "rbar": c >> 8 & 7, "wait": c >> 11 & 63})
            first = None
    return out


def opcode(text):
    return PRED.sub("", text).split()[0].split(".")[0]


def walk(code, start, stop, take):
    """the instructions executed from start to stop, branches taken as take says"""
    at = {x["addr"]: i for i, x in enumerate(code)}
    for a in (start, stop):
        if a not in at:
            fail(f"no instruction at 0x{a:x}")
    i, out, seen = at[start], [], collections.Counter()
    while code[i]["addr"] != stop:
        x = code[i]
        out.append(x)
        if len(out) > 200000:
            fail("the path does not reach STOP (a loop without a count in --take?)")
        m = BRANCH.match(x["text"])
        if m and m.group(2) != ".DIV":
            conditional = m.group(1) is not None or m.group(3) is not None
            if conditional:
                rule = take.get(x["addr"])
                if rule is None:
                    fail(f"--take says nothing of the branch at 0x{x['addr']:x}: {x['text']}")
                seen[x["addr"]] += 1
                taken = rule == "T" or (rule != "N" and seen[x["addr"]] <= int(rule))
            else:
                taken = True
            if taken:
                target = int(m.group(4), 16)
                if target not in at:
                    fail(f"the branch at 0x{x['addr']:x} leaves the kernel")
                i = at[target]
                continue
        i += 1
        if i == len(code):
            fail("the path runs off the kernel's end before STOP")
    return out


def model(path, warps, passes=4):
    """cycles a pass when `warps` warps of one sub-partition each run the path `passes` times"""
    free = {}
    state = [{"i": 0, "n": 0, "t": 0, "ready": [0] * 6} for _ in range(warps)]
    cycle = done = 0
    while done < warps:
        for w in sorted(state, key=lambda s: (s["n"], s["i"])):  # the oldest ready warp issues
            if w["n"] == passes or w["t"] > cycle:
                continue
            x = path[w["i"]]
            op = opcode(x["text"])
            if any(x["wait"] >> b & 1 and w["ready"][b] > cycle for b in range(6)):
                continue
            pipe, hold = PIPE.get(op, ("int", 2))
            if free.get(pipe, 0) > cycle:
                continue
            free[pipe] = cycle + hold
            if x["wbar"] < 6:
                w["ready"][x["wbar"]] = cycle + LAT.get(op, 20)
            if x["rbar"] < 6:
                w["ready"][x["rbar"]] = cycle + 6
            w["t"] = cycle + max(1, x["stall"])
            w["i"] += 1
            if w["i"] == len(path):
                w["i"], w["n"] = 0, w["n"] + 1
                done += w["n"] == passes
            break
        cycle += 1
    return cycle / passes


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--arch", default="90a", help="compute capability (default 90a)")
    ap.add_argument("--kernel", required=True, help="the kernel whose mangled name contains this (one)")
    ap.add_argument("--sass", action="store_true", help="FILE is a SASS listing (cuobjdump -sass), not a .cu file")
    ap.add_argument("--branches", action="store_true", help="list the kernel's branches and barriers")
    ap.add_argument("--path", help="START:STOP, hexadecimal addresses")
    ap.add_argument("--take", default="", help="ADDR=T|N|COUNT,... for the conditional branches on the path")
    ap.add_argument("--warps", default="1,2,3", help="warps a sub-partition, a comma-separated list (default 1,2,3)")
    ap.add_argument("file")
    a = ap.parse_args()
    if not a.branches and not a.path:
        fail("--branches or --path START:STOP")
    if a.sass:
        try:
            with open(a.file) as f:
                listing = f.read()
        except OSError as e:
            fail(f"{a.file}: {e.strerror}")
    else:
        if not (a.file.endswith(".cu") and os.path.isfile(a.file)):
            fail(f"{a.file}: not a .cu file")
        if not re.fullmatch(r"[0-9]{2,3}a?", a.arch):
            fail(f"--arch {a.arch!r}: expected a compute capability such as 80, 90a or 120")
        if not shutil.which("nvcc"):
            fail("nvcc not found on PATH")
        with tempfile.TemporaryDirectory() as tmp:
            listing, _ = sass_mix.compile_listing(a.file, a.arch, sass_mix.tool_env(), tmp)
    found = [k for k in kernels(listing).items() if a.kernel in k[0]]
    if len(found) != 1:
        fail(f"--kernel {a.kernel!r} matches {len(found)} kernels: " + " ".join(k for k, _ in found[:6]))
    name, code = found[0]
    print(name)
    if a.branches:
        for x in code:
            if re.match(r"(BRA|BAR|BSSY|BSYNC|EXIT|WARPSYNC|DEPBAR|VOTE)", opcode(x["text"])):
                print(f"  {x['addr']:05x}  {x['text']}")
        return
    try:
        start, stop = (int(v, 16) for v in a.path.split(":"))
        take = {int(k, 16): v for k, v in (t.split("=") for t in a.take.split(",") if t)}
        warps = [int(w) for w in a.warps.split(",")]
    except ValueError:
        fail("--path START:STOP and --take ADDR=T|N|COUNT take hexadecimal addresses, --warps integers")
    if any(v not in ("T", "N") and not v.isdigit() for v in take.values()) or not all(1 <= w <= 16 for w in warps):
        fail("--take rules are T, N or a count; --warps 1 to 16")
    path = walk(code, start, stop, take)
    products = sum(opcode(x["text"]) == "HMMA" for x in path)
    stalls = collections.Counter()
    count = collections.Counter()
    for x in path:
        stalls[opcode(x["text"])] += max(1, x["stall"])
        count[opcode(x["text"])] += 1
    total = sum(stalls.values())
    print(f"instructions {len(path)}  HMMA {products}  stall cycles {total}")
    print("  stall cycles by opcode: " + "  ".join(f"{o} {v} ({count[o]})" for o, v in stalls.most_common(12)))
    for w in warps:
        c = model(path, w)
        per = f", {c / (w * products):.1f} a product" if products else ""
        print(f"  {w} warp{'s' if w > 1 else ''} a sub-partition: {c:.0f} cycles a pass{per}")


if __name__ == "__main__":
    main()
