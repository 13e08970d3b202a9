#!/bin/sh
# Picks the BLAS for `make` (BLAS=auto) by measurement: builds probe.c
# against each installed candidate, runs it, and prints the fastest one's
# name.  The figures are kept in $1/blas-probe.txt and the choice in
# $1/blas.choice, so the probe runs once per build directory.  The
# environment counts (OPENBLAS_CORETYPE, OMP_NUM_THREADS), as it will when
# training.
B=$1; CC=${CC:-cc}; PKG=${PKG_CONFIG:-pkg-config}
mkdir -p "$B"
dir=$(cd "$(dirname "$0")" && pwd)
best=""; bestv=0
: >"$B/blas-probe.txt"
try() { # name, flags...
    name=$1; shift
    "$CC" -O2 -fopenmp "$dir/probe.c" "$@" -o "$B/blas-probe-$name" 2>/dev/null || return
    v=$("$B/blas-probe-$name" 2>/dev/null) || return
    echo "$name $v GFLOP/s" >>"$B/blas-probe.txt"
    if awk -v a="$v" -v b="$bestv" 'BEGIN { exit !(a > b) }'; then best=$name; bestv=$v; fi
}
if $PKG --exists openblas 2>/dev/null; then
    try openblas $($PKG --cflags --libs openblas)
fi
blis=$(ls -d /usr/include/*/blis-openmp /usr/include/blis 2>/dev/null | head -n 1)
if [ -n "$blis" ]; then
    lib=$(echo "$blis" | sed 's/include/lib/')
    try blis -DSG_BLAS_BLIS -isystem "$blis" -L"$lib" -Wl,-rpath,"$lib" -lblis
fi
mkl=${MKL_DIR:-build/deps/mkl}
if [ -f "$mkl/include/mkl_cblas.h" ]; then
    lib=$(cd "$mkl/lib" && pwd)
    try mkl -DSG_BLAS_MKL -isystem "$mkl/include" -L"$lib" -Wl,-rpath,"$lib" -lmkl_intel_lp64 -lmkl_gnu_thread -lmkl_core -lm -ldl -lpthread
fi
# With nothing measurable installed yet, fall back to the reference CBLAS
# without remembering it, so the probe runs again once a BLAS is installed.
if [ -z "$best" ]; then echo cblas; exit 0; fi
echo "$best" >"$B/blas.choice"
echo "$best"
