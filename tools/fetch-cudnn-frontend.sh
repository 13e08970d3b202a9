#!/usr/bin/env bash
# Fetches the cuDNN frontend (NVIDIA's header-only C++ API over cuDNN's graph
# API; Apache-2.0) from PyPI into build/deps/cudnn-frontend, for the CUDA
# build's SG_ATTN=cudnn attention (kernels/cuda/cudnn_sdpa.cpp).  Only its
# include/ is kept: nothing is installed and nothing of it enters git.  The
# wheel is pinned by version and by its sha256, so a build always compiles
# against the headers it was written for.  Idempotent.  Exits 0 with no
# headers when PyPI cannot be reached: `make cuda` then builds without cuDNN
# (CUDNN=auto) or stops (CUDNN=yes).
set -eu
cd "$(dirname "$0")/.."
VERSION=1.32.0
WHEEL=nvidia_cudnn_frontend-$VERSION-cp311-cp311-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl
SHA256=c6006556017a4d1c914c52a556c71b1267f2d6a0500f742e7b4edef539878df0
dest=${1:-build/deps/cudnn-frontend}
[ -f "$dest/.complete-$VERSION" ] && exit 0
command -v python3 >/dev/null || { echo "fetch-cudnn-frontend: python3 missing; building without cuDNN" >&2; exit 0; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if ! python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.11 \
        --platform manylinux_2_28_x86_64 -d "$tmp" "nvidia-cudnn-frontend==$VERSION" >&2 ||
    [ ! -f "$tmp/$WHEEL" ]; then
    echo "fetch-cudnn-frontend: could not download $WHEEL from PyPI; building without cuDNN" >&2
    exit 0
fi
got=$(sha256sum "$tmp/$WHEEL" | cut -d' ' -f1)
if [ "$got" != "$SHA256" ]; then
    echo "fetch-cudnn-frontend: $WHEEL has sha256 $got, not the pinned $SHA256; not using it" >&2
    exit 1
fi
python3 -c 'import sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
z.extractall(sys.argv[2], [n for n in z.namelist() if n.startswith("include/")])' "$tmp/$WHEEL" "$tmp/x"
rm -rf "$dest" && mkdir -p "$dest"
mv "$tmp/x/include" "$dest/include"
touch "$dest/.complete-$VERSION"
echo "fetch-cudnn-frontend: cuDNN frontend $VERSION headers in $dest/include" >&2
