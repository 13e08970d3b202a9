#!/usr/bin/env bash
# Installs what building and testing sinkgate needs on Debian 12, and only
# what is missing (a second run costs nothing).  Run as root, or with sudo
# available.  Packages:
#   build-essential pkg-config   compiler and dependency probing
#   libopenblas-openmp-dev       the CPU BLAS (OpenMP build: one thread pool with ours)
#   libblis-openmp-dev           the alternative BLAS `make bench` measures against
#   libyaml-dev libjson-c-dev zlib1g-dev   config/sweep YAML, safetensors headers, checkpoint CRCs
#   python3                      the export check in the end-to-end tests
set -eu
pkgs="build-essential pkg-config libopenblas-openmp-dev libblis-openmp-dev libyaml-dev libjson-c-dev zlib1g-dev python3"
missing=""
for p in $pkgs; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
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
