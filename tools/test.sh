#!/usr/bin/env bash
# The whole test suite from a fresh machine: dependencies, build, the data
# the tokenizer tests read (`make data`: GPT-2's vocabulary from PyPI, text
# from Debian's packages), `make test` (unit and reference tests in float and
# double, end-to-end CLI tests, and everything again under ASan/UBSan).
# Ends with "N passed, N failed".
set -eu
cd "$(dirname "$0")/.."
bash tools/install-deps.sh
jobs=$(nproc 2>/dev/null || echo 2)
make -j"$jobs" all
make data
make -j"$jobs" test
