#!/bin/sh
# Runs a packed gpu-test bundle (pack.sh) against real libcuvs_c builds, one
# after the other, on a GPU machine that has a copy of this repository (the
# device tool's run: no Go there):
#
#   real.sh BUNDLE.tar.xz RELEASE_DIR... [-- test flags...]
#
# RELEASE_DIR is a folder as ../shared/cuvs/<release> holds (part-* pieces of
# an xz'd tar whose lib/ has libcuvs_c.so), copied into the checkout first
# (their README: `cp -r ../shared/cuvs/26.08.01 .real/`). Each is unpacked
# under $REAL_ROOT (default /root/cuvs) once; the bundle too. Each release's
# run.sh output is printed, and its logs packed into
# $OUT/logs-<release>.tar.xz when $OUT is set. $GPU_TEST_TIMEOUT (default
# 5m) bounds each test binary: a hang is a failure, not a lost call.
# The exit status is the worst of the runs (0, 1 failures, 2 not there).
set -u
if [ $# -lt 2 ]; then
	echo "usage: $0 BUNDLE.tar.xz RELEASE_DIR... [-- test flags...]" >&2
	exit 2
fi
bundle=$1
shift
rels=""
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
	rels="$rels $1"
	shift
done
[ "${1:-}" = "--" ] && shift
root=${REAL_ROOT:-/root/cuvs}
mkdir -p "$root"
if [ ! -x "$root/gpu-test/run.sh" ] || [ "$bundle" -nt "$root/gpu-test/run.sh" ]; then
	rm -rf "$root/gpu-test"
	xz -d <"$bundle" | tar -x -C "$root" || exit 2
fi
cuda=$(ls -d /usr/local/cuda*/lib64 2>/dev/null | head -n 1)
worst=0
for rel in $rels; do
	name=$(basename "$rel")
	lib=$root/bundle-$name/lib
	if [ ! -f "$lib/libcuvs_c.so" ]; then
		cat "$rel"/part-* | xz -d | tar -x -C "$root" || exit 2
	fi
	echo "######## cuVS $name ($lib/libcuvs_c.so)"
	rm -rf "$root/gpu-test/logs"
	LD_LIBRARY_PATH=$lib${cuda:+:$cuda}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} \
		GPU_TEST_TIMEOUT=${GPU_TEST_TIMEOUT:-5m} "$root/gpu-test/run.sh" "$lib/libcuvs_c.so" "$@"
	rc=$?
	[ "$rc" -gt "$worst" ] && worst=$rc
	if [ -n "${OUT:-}" ]; then
		tar -C "$root/gpu-test" -cf - logs | xz -T0 >"$OUT/logs-$name.tar.xz"
	fi
done
exit "$worst"
