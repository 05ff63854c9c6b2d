#!/bin/sh
# Builds, on a CPU machine with Go and gcc, everything the GPU machine needs for
# the DLPack interop check with PyTorch and CuPy (issue 3), into one folder
# (default build/gpu-interop, relative to the repository root):
#
#   libdlpacktest.so  internal/dlpacktest/cshared, -buildmode=c-shared; it
#                     dlopens libcudart.so.13 at run time (no CUDA headers or
#                     libraries needed here)
#   interop.py        dlpack/testdata/interop.py
#
# On the GPU machine (python3 with torch and cupy, CUDA 13, no Go), from the
# repository root:
#
#   python3 build/gpu-interop/interop.py gpu
#
# It prints "OK: gpu: ..." and exits 0 when every check passed.
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-build/gpu-interop}
cd "$root"
mkdir -p "$out"
go build -buildmode=c-shared -o "$out/libdlpacktest.so" ./internal/dlpacktest/cshared
rm -f "$out/libdlpacktest.h"
cp dlpack/testdata/interop.py "$out/interop.py"
echo "built $out: run 'python3 $out/interop.py gpu' on the GPU machine"
