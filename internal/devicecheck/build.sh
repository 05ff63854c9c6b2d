#!/bin/sh
# Builds, on a CPU machine with Go and gcc, the device-selection check for a
# GPU machine that has a CUDA runtime (libcudart.so.13 or .12) but no Go and
# no libcuvs: the test binary of safe/internal/cudart, which dlopens the CUDA
# runtime at run time (no CUDA headers or libraries needed here).
#
#   internal/devicecheck/build.sh [outdir]     (default build/devicecheck)
#
# On the GPU machine (best with two or more GPUs), from anywhere:
#
#   build/devicecheck/cudart.test -test.v -test.run GPU -test.bench GPU -test.benchtime 100000x
#
# It checks that Enter/Leave (what safe.Resources.Lock/Unlock do for a
# Resources made with safe.OnDevice) make each device current on the calling
# thread and restore the previous one, that memory allocated meanwhile lands
# on that device (cudaPointerGetAttributes), from many goroutines on all
# devices at once, and that no thread is left on another device; the
# benchmarks give the cost of cudaGetDevice and of a bound Lock/Unlock's
# device handling, with the device already current and with a switch.
# $CUVS_CUDART_LIBRARY names another runtime library to open. PASS with
# "--- PASS: TestGPU..." lines means the checks held; SKIP means no runtime
# or no device was found.
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-build/devicecheck}
cd "$root"
mkdir -p "$out"
go test -c -o "$out/cudart.test" ./safe/internal/cudart
echo "built $out/cudart.test: run '$out/cudart.test -test.v -test.run GPU -test.bench GPU -test.benchtime 100000x' on the GPU machine"
