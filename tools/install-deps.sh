#!/usr/bin/env bash
# Installs what building and testing sinkgate needs on Debian 12, and only
# what is missing (a second run costs nothing).  Run as root, or with sudo
# available.  Packages:
#   build-essential pkg-config   compiler and dependency probing
#   libopenblas-openmp-dev       the CPU BLAS (OpenMP build: one thread pool with ours)
#   libblis-openmp-dev           the alternative BLAS `make bench` measures against
#   libyaml-dev libjson-c-dev zlib1g-dev   config/sweep YAML, safetensors headers, checkpoint CRCs
#   libpcre2-dev libssl-dev      GPT-2's pre-tokenizer pattern (PCRE2), SHA-256 of vocabularies
#   python3 python3-pip python3-venv   test references: the export check, tiktoken in
#                                build/venv (the tokenizer's reference), tokenizers there
#                                (tools/hf_tokenize.py); fetching MKL and data
#   openmpi-bin libopenmpi-dev   data parallelism on the CPU (mpirun -n N sgtrain; make finds it)
#   gnuplot-nox                  the report's figures (sgreport: PNG via pngcairo, and SVG)
#   procps                       pgrep, which the tests use to see that no stopped task is left running
#   clang libclang-rt-14-dev libomp-dev   libFuzzer for `make fuzz` and its test (docs/fuzzing.md)
# and then, unless SG_NO_MKL=1, Intel oneMKL from PyPI into build/deps/mkl
# (tools/fetch-mkl.sh): `make` links whichever BLAS measures fastest.
set -eu
pkgs="build-essential pkg-config libopenblas-openmp-dev libblis-openmp-dev libyaml-dev libjson-c-dev zlib1g-dev libpcre2-dev libssl-dev python3 python3-pip python3-venv gnuplot-nox openmpi-bin libopenmpi-dev procps clang libclang-rt-14-dev libomp-dev"
missing=""
for p in $pkgs; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
# The test references in a venv (Debian's Python refuses system-wide pip
# installs): tiktoken, which the tokenizer tests compare against, NumPy,
# which the analyses' reference (tests/analysis/ref_analysis.py) computes with,
# and Hugging Face's tokenizers, which tools/hf_tokenize.py (data for imported
# Pythia models) encodes with and tests/e2e_hf_tokenize.sh checks against sgtok.
venv() {
    local v; v="$(dirname "$0")/../build/venv"
    "$v/bin/python" -c 'import tiktoken, numpy, tokenizers' 2>/dev/null && return 0
    echo "install-deps: tiktoken, numpy and tokenizers into build/venv" >&2
    python3 -m venv "$v" && "$v/bin/pip" install -q --disable-pip-version-check tiktoken==0.14.0 numpy==2.3.5 tokenizers==0.23.3
}
fetch_mkl() { bash "$(dirname "$0")/fetch-mkl.sh"; venv; }
[ -z "$missing" ] && { fetch_mkl; exit 0; }
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null; then SUDO=sudo; else
        echo "install-deps: missing packages:$missing; run this script as root" >&2
        exit 1
    fi
fi
echo "install-deps: installing$missing" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
fetch_mkl
