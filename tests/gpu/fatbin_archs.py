#!/usr/bin/env python3
"""The GPU architectures a CUDA binary carries device code for (cuobjdump is
not part of every toolkit install).  Reads the fatbins nvcc embeds: each
starts with the magic 0xBA55ED50 and a header (u16 version, u16 header size,
u64 payload size); each entry has u16 kind (1 PTX, 2 ELF), u16, u32 header
size, u64 payload size, ... and the u32 arch (80 = sm_80) at offset 28.
Prints e.g. "elf sm_80 elf sm_90 ptx sm_120".  usage: fatbin_archs.py BINARY"""
import struct
import sys

b = open(sys.argv[1], "rb").read()
found, i = set(), 0
while (i := b.find(struct.pack("<I", 0xBA55ED50), i)) >= 0:
    _, hsz, fsz = struct.unpack_from("<HHQ", b, i + 4)
    j, end = i + hsz, i + hsz + fsz
    while j + 32 <= min(end, len(b)):
        kind, _, ehs, size = struct.unpack_from("<HHIQ", b, j)
        if kind in (1, 2):
            found.add(("ptx" if kind == 1 else "elf", struct.unpack_from("<I", b, j + 28)[0]))
        if not ehs:
            break
        j += ehs + size
    i += 4
print(" ".join(f"{k} sm_{a}" for k, a in sorted(found, key=lambda x: (x[1], x[0]))))
