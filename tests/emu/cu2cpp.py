#!/usr/bin/env python3
"""Rewrites a CUDA source (kernels/cuda/*.cu) into C++ that the host
emulator (tests/emu) compiles: the three constructs of CUDA C++ that are not
C++ are replaced, everything else is left to the stub headers.

  kernel<<<grid, block, smem, stream>>>(args)
      -> emu::launch(grid, block, smem, stream, [&]() { kernel(args); })
  extern __shared__ [__align__(n)] T name[];
      -> T *const name = reinterpret_cast<T *>(emu::dyn_smem());
  __shared__ T name[dims];
      -> EMU_SHARED(T, name, [dims]);   (one storage for all threads of a block)
  __shared__ T a[n], b[m];
      -> EMU_SHARED(T, a, [n]); EMU_SHARED(T, b, [m]);   (one per declarator)

Line numbers are kept (a #line directive names the original file), so
compiler messages point into the .cu file.  Anything of CUDA's syntax left
over is an error here rather than a puzzling one from the compiler.

usage: cu2cpp.py IN.cu OUT.cpp"""
import re
import sys


def launches(src):
    pat = re.compile(r'([A-Za-z_][\w:]*(?:<[^<>;]*>)?)\s*<<<(.*?)>>>\s*\(', re.S)
    out, pos = [], 0
    while True:
        m = pat.search(src, pos)
        if not m:
            out.append(src[pos:])
            return ''.join(out)
        out.append(src[pos:m.start()])
        i, depth = m.end(), 1  # the argument list's closing parenthesis
        while depth:
            if i >= len(src):
                sys.exit('cu2cpp: unbalanced kernel launch at offset %d' % m.start())
            depth += {'(': 1, ')': -1}.get(src[i], 0)
            i += 1
        out.append('emu::launch(%s, [&]() { %s(%s); })' % (m.group(2), m.group(1), src[m.end():i - 1]))
        pos = i


def shared(m):
    """__shared__ T d1, d2, ...; -> one EMU_SHARED per declarator (plain
    names with array dimensions; a pointer or initialiser is not matched and
    is left for the check below)"""
    out = []
    for decl in m.group(2).split(','):
        d = re.fullmatch(r'\s*(\w+)\s*((?:\[[^\]]+\]\s*)*)', decl)
        if not d:  # a comma inside a dimension
            sys.exit('cu2cpp: cannot split the declaration "%s" that the emulator cannot take' % m.group(0))
        out.append('EMU_SHARED(%s, %s, %s);' % (m.group(1), d.group(1), d.group(2).strip()))
    return ' '.join(out)


def main():
    path, dst = sys.argv[1], sys.argv[2]
    src = open(path).read()
    src = re.sub(r'extern\s+__shared__\s+(?:__align__\(\s*\d+\s*\)\s+)?([\w\s]*?\w)\s+(\w+)\s*\[\s*\]\s*;',
                 r'\1 *const \2 = reinterpret_cast<\1 *>(emu::dyn_smem());', src)
    src = re.sub(r'__shared__\s+(?:__align__\(\s*\d+\s*\)\s+)?([\w\s]*?\w)\s+(\w+\s*(?:\[[^\]]+\]\s*)*'
                 r'(?:,\s*\w+\s*(?:\[[^\]]+\]\s*)*)*);', shared, src)
    src = launches(src)
    for bad in ('__shared__', '<<<', '>>>'):
        if bad in src:
            line = src[:src.index(bad)].count('\n') + 1
            sys.exit('cu2cpp: %s:%d: "%s" left that the emulator cannot take' % (path, line, bad))
    with open(dst, 'w') as f:
        f.write('#line 1 "%s"\n' % path)
        f.write(src)


if __name__ == '__main__':
    main()
