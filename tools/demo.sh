#!/usr/bin/env bash
# The demo: a paired comparison on the CPU.  Builds sgtrain and sgtok,
# fetches GPT-2's vocabulary and a real English corpus (`make data`: Python
# docs and the GCIDE dictionary from Debian's packages, tokenized into
# data/demo-gpt2), trains the baseline and combo2 arms on the cpu-tiny tier
# with the same seed, and prints both final validation losses and their
# paired difference.
#   DEMO_ITERS=300 DEMO_ARMS="baseline combo2" DEMO_SEED=0 bash tools/demo.sh
set -eu
cd "$(dirname "$0")/.."
bash tools/install-deps.sh
make -j"$(nproc 2>/dev/null || echo 2)" all
make data
iters=${DEMO_ITERS:-300}
arms=${DEMO_ARMS:-baseline combo2}
seed=${DEMO_SEED:-0}
data=data/demo-gpt2
out=runs/demo-gpt2
for arm in $arms; do
    ./build/sgtrain train --tier cpu-tiny --arm "$arm" --seed "$seed" --iters "$iters" \
        --data "$data" --out "$out/$arm-s$seed"
done
echo
echo "demo report (cpu-tiny, $iters steps, seed $seed, GPT-2 tokens of Python docs + GCIDE):"
base="" first=""
for arm in $arms; do
    loss=$(sed -nE 's/.*"final_val_loss": ([^,]*),/\1/p' "$out/$arm-s$seed/result.json")
    [ -z "$base" ] && { base=$loss; first=$arm; }
    awk -v a="$arm" -v l="$loss" -v b="$base" -v f="$first" \
        'BEGIN { printf "  %-10s final val loss %.4f   paired difference vs %s (same seed, same tokens): %+.4f\n", a, l, f, l - b }'
done
