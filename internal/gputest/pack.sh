#!/bin/sh
# Packs the gpu-test bundle (build.sh) into one file small enough to travel
# to a GPU machine beside a libcuvs_c build (`make gpu-test-pack`):
#
#   pack.sh [OUT.tar.xz] [PACKAGE...]
#
#   OUT.tar.xz  default build/gpu-test.tar.xz (unpacks to gpu-test/)
#   PACKAGE     as for build.sh
#
# $GPU_TEST_VARIANTS picks the variants as for build.sh; the default here is
# cgocheck2 alone (both variants are about 2 × 21 MB packed, too much beside
# a library in one 64 MiB carry). The binaries are stripped (build.sh's
# default). $GPU_TEST_PACK_MAX (MiB, default 40) is the most the file may
# hold: over it the pack fails, saying by how much.
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-build/gpu-test.tar.xz}
[ $# -gt 0 ] && shift
max=${GPU_TEST_PACK_MAX:-40}
cd "$root"
dir=$(mktemp -d "${TMPDIR:-/tmp}/gpu-test-pack.XXXXXX")
trap 'rm -rf "$dir"' EXIT
GPU_TEST_VARIANTS=${GPU_TEST_VARIANTS:-cgocheck2} sh internal/gputest/build.sh "$dir/gpu-test" "$@"
mkdir -p "$(dirname "$out")"
tar -C "$dir" -cf - gpu-test | xz -T0 -6 >"$out.tmp"
mv "$out.tmp" "$out"
size=$(wc -c <"$out")
mib=$(( (size + 1048575) / 1048576 ))
if [ "$mib" -gt "$max" ]; then
	echo "pack.sh: $out is $mib MiB, over the $max MiB limit (GPU_TEST_PACK_MAX)" >&2
	exit 1
fi
echo "packed $out: $size bytes ($mib MiB); on the GPU machine: internal/gputest/real.sh $out LIBDIR..."
