#!/usr/bin/env bash
# `make bench`: the CPU benchmarks behind docs/performance.md, in one run so
# that ratios are comparable.
#  1. bench_train with every BLAS found (OpenBLAS, BLIS, MKL): sgemm peak, tokens/s
#     of a full training step per arm on the cpu-tiny and 10M shapes, time
#     split by op category.  The BLAS the Makefile picks by default is the
#     one that wins here.
#  2. PyTorch (if importable) on the same shapes and arms: what a user would
#     run instead (tests/bench/torch_step.py).
# Figures go to $OUT (default build/bench-results) as text and JSON.
set -u
B=${1:-build}
OUT=${OUT:-$B/bench-results}
mkdir -p "$OUT"
SHAPE=${BENCH_SHAPE:-all}
blis_dir=$(ls -d /usr/include/*/blis-openmp 2>/dev/null | head -n 1)
for blas in ${BENCH_BLAS:-openblas blis mkl}; do
    [ "$blas" = blis ] && [ -z "$blis_dir" ] && { echo "(BLIS not installed: skipped)"; continue; }
    [ "$blas" = mkl ] && [ ! -f build/deps/mkl/include/mkl_cblas.h ] && { echo "(MKL not fetched: skipped; bash tools/fetch-mkl.sh)"; continue; }
    bdir=$B/blas-$blas
    make -s BLAS=$blas B="$bdir" "$bdir/bench/bench_train" >/dev/null || exit 1
    echo "=== $blas ==="
    "$bdir/bench/bench_train" --shape "$SHAPE" --json "$OUT/train-$blas.json" | tee "$OUT/train-$blas.txt"
done
if python3 -c 'import torch' 2>/dev/null; then
    echo "=== PyTorch $(python3 -c 'import torch; print(torch.__version__)') on the same shapes ==="
    for shape in cpu-tiny 10M; do
        [ "$SHAPE" != all ] && [ "$SHAPE" != "$shape" ] && continue
        mb=8; steps=5; [ "$shape" = 10M ] && { mb=4; steps=3; }
        python3 tests/bench/torch_step.py --arms baseline,sinklogit,normgate,combo2 --shape "$shape" \
            --micro-batch $mb --steps $steps --warmup-steps 2 --threads "$(nproc)" \
            --json "$OUT/torch-$shape.json" | tee "$OUT/torch-$shape.txt"
    done
else
    echo "(PyTorch not importable: the comparison with PyTorch is skipped; pip install torch to run it)"
fi
echo "results in $OUT"
