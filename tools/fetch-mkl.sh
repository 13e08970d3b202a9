#!/usr/bin/env bash
# Fetches Intel oneMKL from PyPI (the `mkl` and `mkl-include` wheels) into
# build/deps/mkl, without installing anything system-wide: the wheels are
# zip files, unpacked here.  `make` then measures it against the other BLAS
# installed (tools/blas_probe) and links it if it is the fastest.  On this
# project's CPUs its sgemm runs at twice the rate of Debian's BLIS, and it is
# the BLAS PyTorch's CPU build uses, which makes the benchmark a fair match.
# Idempotent; SG_NO_MKL=1 skips it.
set -eu
cd "$(dirname "$0")/.."
dest=build/deps/mkl
[ -n "${SG_NO_MKL:-}" ] && exit 0
[ -f "$dest/.complete" ] && exit 0
command -v python3 >/dev/null || { echo "fetch-mkl: python3 missing; skipping MKL" >&2; exit 0; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if ! python3 -m pip download -q --no-deps -d "$tmp" mkl mkl-include >&2; then
    echo "fetch-mkl: could not download the mkl wheels; building without MKL" >&2
    exit 0
fi
rm -rf "$dest" && mkdir -p "$dest/lib" "$dest/include"
for w in "$tmp"/*.whl; do python3 -m zipfile -e "$w" "$tmp/x"; done
# Only what linking sgemm/dgemm needs: the LP64 interface, the GNU OpenMP
# threading layer (it shares libgomp's pool with our kernels), the core and
# its CPU-specific kernels.
cp "$tmp"/x/mkl-*.data/data/lib/libmkl_{intel_lp64,gnu_thread,core,def,mc3,avx2,avx512,avx10}.so.* "$dest/lib/" 2>/dev/null || true
cp "$tmp"/x/mkl_include-*.data/data/include/*.h "$dest/include/"
for f in "$dest"/lib/*.so.*; do ln -sf "$(basename "$f")" "${f%.so.*}.so"; done
touch "$dest/.complete"
echo "fetch-mkl: MKL in $dest" >&2
