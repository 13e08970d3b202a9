#!/usr/bin/env bash
# The demo: the sweep of sweeps/demo.yaml on this machine's CPU, ending in
# its report.  Builds everything, fetches GPT-2's vocabulary and a real
# English corpus (`make data`: Python docs and the GCIDE dictionary from
# Debian's packages, tokenized into data/demo-gpt2), trains three arms with
# two seeds each on the cpu-tiny tier (sgsweep run --local: finished runs
# are skipped, interrupted ones resumed, so running it again is cheap), and
# prints the report's paired comparison (runs/demo-sweep/report/report.md).
set -eu
cd "$(dirname "$0")/.."
bash tools/install-deps.sh
make -j"$(nproc 2>/dev/null || echo 2)" all
make data
rc=0
./build/sgsweep run sweeps/demo.yaml --local || rc=$?
report=runs/demo-sweep/report/report.md
if [ -f "$report" ]; then
    echo
    echo "=== $report (Table 1; figures in runs/demo-sweep/report/figures) ==="
    sed -n '/^## Table 1/,/^## Table 2/p' "$report" | sed '$d'
fi
exit $rc
