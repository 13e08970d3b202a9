#!/usr/bin/env python3
"""Static instruction mix of CUDA kernels, from their SASS, without a GPU.

    python3 tests/gpu/sass_mix.py [--arch 90] [--filter STR] FILE.cu ...

Compiles each file (nvcc, the Makefile's flags, one architecture) and
disassembles it with cuobjdump, then prints for every kernel whose mangled
name contains STR: its instructions, tensor-core products (HMMA),
special-function ops (MUFU: the exponentials), and the other instruction
classes the attention loops spend issue slots on.  It is a static count, of
the code, not of what runs: a loop body counts once, and a kernel's masked
and unmasked variants both count.  docs/cuda.md ("Fewer instructions around
each exponential") gives the counts it measured and how a loop's path was
read off the listing.

The CUDA toolkit on the build machines has no cuobjdump or nvdisasm, so the
script takes them from PyPI (nvidia-cuda-cuobjdump, nvidia-cuda-nvdisasm)
into build/sass-tools the first time, unless they are on PATH.
"""
import argparse
import collections
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOLS = os.path.join(ROOT, "build", "sass-tools")
CLASSES = ["HMMA", "HGMMA", "MUFU", "FFMA", "FADD", "FMUL", "FMNMX", "FSETP", "LDS", "LDSM", "LDGSTS", "F2FP", "SHFL",
           "CLOCK"]
# CLOCK is no opcode: the reads of the cycle counter or the global timer
# (CS2R, S2R or S2UR of SR_CLOCKLO, SR_GLOBALTIMERLO ...), which only the
# traced attention kernels have (kernels/cuda/attention_trace.h).
# LEAD, the last column, is no opcode either: the HMMA products laid out
# before the kernel's first exponential (MUFU.EX2), the score products
# issued before any softmax work: one strip's in the mma backward kernels,
# two strips' when their strips are pipelined (SG_ATTN_BWD_PIPE=1)
# GWAIT, the column before it, counts the waits for global loads as the
# code is laid out: in address order, an instruction that reads a register
# some LDG wrote since the last such read waits for that load, and each wait
# counts once however many loads it covers.  Loads issued together and
# used after cost one wait; a load used at once, before the next is issued,
# one each (the value gates' epilogue in the dK/dV kernels before
# attn_gate_load, kernels/cuda/attention_bwd_mma.cu).  Every path through a
# branch counts, so it is a static count, for comparing a kernel with its
# twin.
# RUN, the column before GWAIT, is the longest straight run of products
# (hmma_run): in the mma attention kernels, a tile's score products when
# the tiles off the diagonal run without per-strip branches (docs/cuda.md,
# "Issue cycles from the control codes").
CLOCK = re.compile(r"\bSR_(?:CLOCK|GLOBALTIMER)")
INS = re.compile(r"\s+/\*[0-9a-f]+\*/\s+(?:@!?U?P[T0-9]\s+)?([A-Z][A-Z0-9_.]*)\s*(.*?)\s*;")


def fail(msg):
    print(f"sass_mix: {msg}", file=sys.stderr)
    sys.exit(1)


def tool_dirs():
    """Directories holding cuobjdump and nvdisasm, fetched if need be."""
    if shutil.which("cuobjdump") and shutil.which("nvdisasm"):
        return []
    dirs = []
    for pkg, exe in (("nvidia-cuda-cuobjdump", "cuobjdump"), ("nvidia-cuda-nvdisasm", "nvdisasm")):
        dest = os.path.join(TOOLS, pkg)
        found = [os.path.join(d, exe) for d, _, fs in os.walk(dest) if exe in fs]
        if not found:
            os.makedirs(dest, exist_ok=True)
            r = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", dest, pkg],
                               capture_output=True, text=True)
            wheels = [f for f in os.listdir(dest) if f.endswith(".whl")]
            if r.returncode != 0 or not wheels:
                fail(f"{exe} is not on PATH and `pip download {pkg}` failed:\n{r.stderr.strip()}")
            with zipfile.ZipFile(os.path.join(dest, wheels[0])) as z:
                z.extractall(dest)
            found = [os.path.join(d, exe) for d, _, fs in os.walk(dest) if exe in fs]
            if not found:
                fail(f"the wheel of {pkg} holds no {exe}")
        os.chmod(found[0], 0o755)
        dirs.append(os.path.dirname(found[0]))
    return dirs


def tool_env():
    """The environment with cuobjdump and nvdisasm on PATH."""
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join(tool_dirs() + [env.get("PATH", "")])
    return env


def compile_listing(f, arch, env, tmp):
    """f compiled as the Makefile compiles it, for one architecture, in tmp:
    its SASS listing and ptxas's report."""
    inc = [f"-I{os.path.join(ROOT, d)}" for d in ("kernels", "kernels/cuda", "src")]
    obj = os.path.join(tmp, os.path.basename(f) + ".o")
    r = subprocess.run(["nvcc", "-std=c++17", "-O3", *inc, "-gencode", f"arch=compute_{arch},code=sm_{arch}",
                        "-Xptxas", "-v", "-c", f, "-o", obj], capture_output=True, text=True)
    if r.returncode != 0:
        fail(f"nvcc {f} failed:\n{r.stderr.strip()}")
    return sass(obj, env), r.stdout + r.stderr


def sass(obj, env):
    r = subprocess.run(["cuobjdump", "-sass", obj], capture_output=True, text=True, env=env)
    if r.returncode != 0:
        fail(f"cuobjdump -sass {obj} failed:\n{r.stderr.strip()}")
    return r.stdout


def written(ins):
    """The registers an instruction writes: its first operand, and the ones
    after it for a load of several (LDSM .x2/.x4, LDS/LDG .64/.128)."""
    m = re.match(r"(?:@!?U?P[T0-9]\s+)?([A-Z][A-Z0-9_.]*)\s+R(\d+)", ins)
    if not m:
        return []
    op, r = m.group(1), int(m.group(2))
    n = 1
    if op.startswith("LDSM"):
        n = int(op.rsplit(".", 1)[1]) if op.rsplit(".", 1)[1] in ("1", "2", "4") else 1
    elif op.startswith(("LDS", "LDG", "LD.")) or op == "LD":
        n = 4 if ".128" in op else 2 if ".64" in op else 1
    return [f"R{r + k}" for k in range(n)]


def stale_a(text):
    """{kernel: [HGMMA lines]} for every register-A warpgroup product
    (HGMMA R<d>, R<a>, ...) inside a loop that reads A registers the loop
    does not write before it (in address order from the loop's head),
    unless they are the loop's carried operand: written in the loop, and
    only after every product in it that reads them (the pipelined forward's
    P, formed at the end of a pass for the next one's P V).  Flagged, then:
    a loop-invariant A operand, which ptxas 13.0 was seen to hand to other
    values after the product (kernels/cuda/wgmma_ptx.h, wg_fresh), and A
    registers the loop writes between two products that read them."""
    out = {}
    for part in re.split(r"\n\s+Function : ", text)[1:]:
        name = part.split("\n", 1)[0].strip()
        code = []
        for line in part.splitlines():
            m = re.match(r"\s+/\*([0-9a-f]+)\*/\s+(.*?)\s*;", line)
            if m:
                code.append((int(m.group(1), 16), m.group(2)))
        loops = []
        for a, ins in code:
            m = re.search(r"BRA (?:\S+, )?0x([0-9a-f]+)", ins)
            if m and int(m.group(1), 16) < a:
                loops.append((int(m.group(1), 16), a))
        bad = []
        for lo, hi in loops:
            writes, reads = {}, {}  # register: addresses in the loop
            for a, ins in code:
                if lo <= a <= hi and not ins.startswith(("HGMMA", "ST")):
                    for x in written(ins):
                        writes.setdefault(x, []).append(a)
                m = re.match(r"HGMMA\S*\s+R\d+, R(\d+),", ins)
                if m and lo <= a <= hi:
                    for k in range(4):
                        reads.setdefault(f"R{int(m.group(1)) + k}", []).append(a)
            for a, ins in code:
                m = re.match(r"HGMMA\S*\s+R\d+, R(\d+),", ins)
                if not m or not lo <= a <= hi:
                    continue
                for x in (f"R{int(m.group(1)) + k}" for k in range(4)):
                    w = writes.get(x, [])
                    fresh = any(b < a for b in w)
                    carried = w and min(w) > max(reads[x])
                    if not fresh and not carried:
                        bad.append(f"{a:04x}: {ins}")
                        break
        if bad:
            out[name] = bad
    return out


def read_regs(op, operands):
    """The registers an instruction reads: every operand of a store, all
    but the first (the destination) of anything else."""
    args = [x.strip() for x in operands.split(",")] if operands else []
    if not op.startswith(("ST", "RED", "BAR", "BRA", "EXIT", "BSYNC", "BSSY")):
        args = args[1:]
    return set(re.findall(r"\bR(\d+)\b", " ".join(args)))


def hmma_run(code):
    """The longest run of unpredicated HMMA products, in address order, with
    no branch, branch target, barrier, convergence point or WARPSYNC among
    them: how many products ptxas may schedule as one block.  nvcc guards a
    mma.sync under a branch it cannot prove warp-uniform with a WARPSYNC and
    predicates it, which cuts the runs short."""
    targets = {int(t, 16) for _, ins in code for t in re.findall(r"\bBRA\b.*?0x([0-9a-f]+)", ins)}
    best = cur = 0
    for a, ins in code:
        op = re.sub(r"^@!?U?P[T0-9]\s+", "", ins).split()[0]
        if a in targets or op.startswith(("WARPSYNC", "BRA", "EXIT", "BAR", "BSSY", "BSYNC")):
            cur = 0
        if op.startswith("HMMA"):
            cur = 0 if ins.startswith("@") else cur + 1
            best = max(best, cur)
    return best


def mix(text):
    kernels, name, pending, code = {}, None, set(), {}
    for line in text.splitlines():
        m = re.search(r"Function : (\S+)", line)
        if m:
            name, pending = m.group(1), set()
            kernels[name] = collections.Counter()
            code[name] = []
            continue
        m = re.match(r"\s+/\*([0-9a-f]+)\*/\s+(.*?)\s*;", line)
        if m and name:
            code[name].append((int(m.group(1), 16), m.group(2)))
        m = INS.match(line)
        if m and name:
            op = m.group(1)
            if pending & read_regs(op, m.group(2)):
                kernels[name]["GWAIT"] += 1
                pending = set()
            if op.startswith("LDG") and not op.startswith("LDGSTS"):
                pending |= {x[1:] for x in written(m.group(0).split("*/", 1)[1].strip())}
        m = re.match(r"\s+/\*[0-9a-f]+\*/\s+(?:@!?U?P[T0-9]\s+)?([A-Z][A-Z0-9_]*)", line)
        if m and name:
            c = kernels[name]
            c[m.group(1)] += 1
            c["ALL"] += 1
            if CLOCK.search(line):
                c["CLOCK"] += 1
            if "MUFU.EX2" in line:
                c["EX2SEEN"] = 1
            elif m.group(1) == "HMMA" and not c["EX2SEEN"]:
                c["LEAD"] += 1
    for name, c in kernels.items():
        c["RUN"] = hmma_run(code[name])
    return kernels


def report(text, a, stale):
    """Prints the mix of a listing's kernels that a.filter selects and,
    under --fresh-a, their stale A operands (appended to stale)."""
    for k, c in sorted(mix(text).items()):
        if a.filter in k:
            print(f"{k[:72]:72s} ALL {c['ALL']:5d} " + " ".join(f"{n} {c[n]}" for n in CLASSES) + f" RUN {c['RUN']} GWAIT {c['GWAIT']} LEAD {c['LEAD']}")
    if a.fresh_a:
        for k, lines in sorted(stale_a(text).items()):
            if a.filter in k:
                stale.append(k)
                print(f"stale A operand in {k}: " + "; ".join(lines[:3]))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--arch", default="90", help="compute capability, e.g. 80, 90, 120 (default 90)")
    ap.add_argument("--filter", default="", help="only kernels whose mangled name contains this")
    ap.add_argument("--fresh-a", action="store_true",
                    help="also fail (exit 1) where a register-A warpgroup product in a loop reads A registers "
                         "not written in the loop before it (wgmma_ptx.h, wg_fresh)")
    ap.add_argument("--no-serial", action="store_true",
                    help="also fail (exit 1) where ptxas serialises a kernel's warpgroup products (its C75xx "
                         "\"wgmma.mma_async instructions are serialized\": no product then overlaps anything)")
    ap.add_argument("--sass", action="store_true",
                    help="the files are SASS listings (cuobjdump -sass), not .cu files to compile")
    ap.add_argument("files", nargs="+", help=".cu files (kernels/cuda/...)")
    a = ap.parse_args()
    if a.sass:
        stale = []
        for f in a.files:
            try:
                with open(f) as fh:
                    text = fh.read()
            except OSError as e:
                fail(f"{f}: {e.strerror}")
            report(text, a, stale)
        sys.exit(1 if stale else 0)
    if not re.fullmatch(r"[0-9]{2,3}a?", a.arch):
        fail(f"--arch {a.arch!r}: expected a compute capability such as 80, 90 or 120")
    for f in a.files:
        if not (f.endswith(".cu") and os.path.isfile(f)):
            fail(f"{f}: not a .cu file")
    if not shutil.which("nvcc"):
        fail("nvcc not found on PATH")
    env = tool_env()
    stale = []
    with tempfile.TemporaryDirectory() as tmp:
        for f in a.files:
            listing, log = compile_listing(f, a.arch, env, tmp)
            if a.no_serial:
                for line in log.splitlines():
                    m = re.search(r"\((C75\d\d)\).*wgmma.mma_async instructions are serialized(.*?) in the function '(\S+)'", line)
                    if m and a.filter in m.group(3):
                        stale.append(m.group(3))
                        print(f"serialised products in {m.group(3)}: {m.group(1)}{m.group(2)}")
            report(listing, a, stale)


    if stale:
        sys.exit(1)


if __name__ == "__main__":
    main()
