#!/usr/bin/env bash
# The emulated CUDA ops of tests/e2e_cuda_emu.sh under AddressSanitizer and
# UBSan: a kernel that reads or writes outside a buffer the emulator
# allocated, or does undefined arithmetic (an overflowing shift, a
# misaligned access), stops its run.  One scheduler seed, about 6 minutes
# on two cores.
EMU_SANITIZE=1 exec bash "$(dirname "$0")/e2e_cuda_emu.sh" "$@"
