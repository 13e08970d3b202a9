# Sourced by tests/gpu/device.sh and tests/gpu/probe.sh on the lent GPU
# machine, with B set: unpacks the carried programs, puts the carried
# libraries the machine lacks on the loader's path, finds cuDNN and the CUDA
# runtime for SG_ATTN=cudnn, and stops (exit 1) where a program would not load.
# The carried archive (--pack) first, unless programs newer than it are
# here already: Python's tarfile, since the machine need not have xz; the
# 'data' filter where this Python has it.  (B defaults to build/dev: run 5
# sourced this from a one-line command before setting B, and it unpacked
# nothing and linked no library.)
B=${B:-build/dev}
if [ -f "$B/carry.tar.xz" ] && { [ ! -e "$B/cuda/sgtrain" ] || [ "$B/carry.tar.xz" -nt "$B/cuda/sgtrain" ]; }; then
    python3 - "$B/carry.tar.xz" <<'EOF' || { echo "device.sh: could not unpack $B/carry.tar.xz"; exit 1; }
import sys, tarfile
with tarfile.open(sys.argv[1]) as t:
    if hasattr(tarfile, "data_filter"):
        t.extractall(filter="data")
    else:
        t.extractall()
EOF
fi
OUT=${OUT:-/tmp/device-out}
mkdir -p "$OUT" /tmp/sglib
for f in "$B"/lib/*; do
    name=$(basename "$f")
    ldconfig -p | grep -q "^[[:space:]]*$name " || ln -sf "$(cd "$(dirname "$f")" && pwd)/$name" /tmp/sglib/
done
export LD_LIBRARY_PATH=/tmp/sglib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
echo "carried libraries used: $(ls /tmp/sglib | tr '\n' ' ')"
# SG_ATTN=cudnn opens libcudnn.so.9 at run time, and the cuDNN frontend
# libcudart.so.13 (kernels/cuda/cudnn_sdpa.cpp).  Where the loader knows
# neither, PyTorch's wheels of them (nvidia-cudnn-cu13, the CUDA runtime)
# are used: their directories join the loader's path, since cuDNN opens
# its own sublibraries beside it.
for lib in libcudnn.so.9 libcudart.so.13; do
    ldconfig -p | grep -q "^[[:space:]]*$lib " && continue
    f=$(find /usr/local/cuda/lib64 /opt /usr/local/lib /usr/lib -name "$lib" 2>/dev/null | head -n 1)
    [ -n "$f" ] && export LD_LIBRARY_PATH=$(dirname "$f"):$LD_LIBRARY_PATH
    echo "$lib: ${f:-not found (SG_ATTN=cudnn will say so and run the mma tiles)}"
done
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv | tee "$OUT/nvidia-smi.txt"
missing=$(for b in "$B/sgtrain" "$B/cuda/sgtrain" "$B/cuda/test_gpu_ops" "$B/cuda/bench_gpu"; do ldd "$b" | grep "not found"; done)
[ -z "$missing" ] || { echo "missing libraries: $missing"; exit 1; }
