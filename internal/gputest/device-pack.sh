#!/bin/sh
# device-pack.sh: the benchmarks the open issues measure on a GPU machine
# (which has no Go), built here into one folder to carry there beside one
# libcuvs_c build (the carry limit is 64 MiB with the tree: pack this, not
# the gpu-test bundle, in the same call):
#
#   internal/gputest/device-pack.sh [OUT]      (default build/device-pack)
#
#   serving, cbench   examples/serving (tenants.sh: issue 43's table)
#   bfbitmap          internal/bench/bfbitmap (issue 43: brute force's
#                     bitmap against grouping, the Batcher mixed and grouped)
#   tiered.test       safe/tiered's benchmarks (issue 44: the composed
#                     search against plain CAGRA, deletion sets)
#   hnswlib-bench/    internal/hnswlibbench/pack.sh (issue 44: hnsw beside
#                     hnswlib's own search)
#   memest, memest.sh internal/bench/memest (issue 45: estimates against
#                     measured peaks, the too-large build; and, as the part
#                     overcap, the builds over more host rows than the cap,
#                     docs/MEMORY.md)
#   device-run.sh     runs them: device-run.sh RELEASE... (see it)
#
# Binaries are stripped; the folder is packed into OUT.tar.xz as well.
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-build/device-pack}
cd "$root"
rm -rf "$out"
mkdir -p "$out"
go build -ldflags='-s -w' -o "$out/serving" ./examples/serving
${CC:-cc} -std=gnu11 -O2 -Wall -Wextra -Igenerated internal/cbench/csrc/cbench.c -o "$out/cbench" -pthread -ldl
cp examples/serving/tenants.sh examples/serving/gpu-table.sh "$out/"
go build -ldflags='-s -w' -o "$out/bfbitmap" ./internal/bench/bfbitmap
go test -c -ldflags='-s -w' -o "$out/tiered.test" ./safe/tiered
sh internal/hnswlibbench/pack.sh "$out/hnswlib-bench" >/dev/null
go build -ldflags='-s -w' -o "$out/memest" ./internal/bench/memest
cp internal/bench/memest/run.sh "$out/memest.sh"
cp internal/gputest/device-run.sh "$out/"
chmod +x "$out"/*.sh
tar -C "$(dirname "$out")" -cJf "$out.tar.xz" "$(basename "$out")"
du -sh "$out" "$out.tar.xz"
