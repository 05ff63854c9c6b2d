#!/bin/sh
# pack.sh: builds, on a machine with Go, g++ and libhnswlib-dev (no GPU
# needed), what run.sh runs on a GPU machine that has no Go (issue 44, "CPU
# serving beside hnswlib"), into one folder to carry there:
#
#   internal/hnswlibbench/pack.sh [OUT]      (default build/hnswlib-bench)
#
#   hnsw.test            safe/hnsw's tests (no race detector, no cgocheck:
#                        it is measured), whose BenchmarkServe builds the
#                        index on the GPU and writes the files for hnswlib
#   hnswlib-serve        csrc/serve.cpp, -O3 with the compiler's default
#                        x86-64 flags (SSE2: hnswlib's SSE kernels), as
#                        cuVS's Release build compiles the hnswlib that
#                        libcuvs serves with (no -march)
#   hnswlib-serve-avx2   the same with -march=x86-64-v3 (AVX2, FMA:
#                        hnswlib's AVX kernels), what a user building
#                        hnswlib for a modern server gets
#   run.sh               runs them
#
# The C++ programs are linked statically (glibc, libstdc++): they run on
# any x86-64 Linux; hnsw.test is linked against this machine's glibc, as
# the gpu-test bundle's binaries are (build on a system no newer than the
# GPU machine's).
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-build/hnswlib-bench}
cd "$root"
rm -rf "$out"
mkdir -p "$out"
go test -c -ldflags='-s -w' -o "$out/hnsw.test" ./safe/hnsw
src=internal/hnswlibbench/csrc/serve.cpp
CXX=${CXX:-g++}
"$CXX" -std=c++17 -O3 -Wall -Wextra -static -pthread "$src" -o "$out/hnswlib-serve"
"$CXX" -std=c++17 -O3 -march=x86-64-v3 -Wall -Wextra -static -pthread "$src" -o "$out/hnswlib-serve-avx2"
cp internal/hnswlibbench/run.sh "$out/run.sh"
chmod +x "$out/run.sh"
ls -l "$out"
