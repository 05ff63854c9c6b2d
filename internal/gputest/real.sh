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
# With $REAL_STRESS set (a duration, e.g. 5m) the bundle's tests are not run:
# internal/stress's TestStress runs that long instead against each release
# (mixed build/search/extend/close/filter load, tiered and HNSW included),
# its operations per kind printed, and the process's RSS and the GPU's used
# memory sampled every 10 s from 10 s on (first, last, largest):
#
#   REAL_STRESS=5m real.sh BUNDLE.tar.xz RELEASE_DIR...
#
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

# stress LIBDIR NAME: TestStress for $REAL_STRESS against LIBDIR's
# libcuvs_c, with the memory samples; its log kept in $OUT when set.
stress() {
	dir=$root/gpu-test/internal_stress
	log=${OUT:-/tmp}/stress-$2.log
	samples=${OUT:-/tmp}/stress-$2.mem
	: >"$samples"
	(cd "$dir" && LD_LIBRARY_PATH=$1${cuda:+:$cuda}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} CUVS_TEST_LIBRARY=$1/libcuvs_c.so \
		exec ./cgocheck2.test -test.run '^TestStress$' -test.v -test.count=1 -test.timeout=30m -stress.time="$REAL_STRESS") >"$log" 2>&1 &
	pid=$!
	while sleep 10 && kill -0 "$pid" 2>/dev/null; do
		rss=$(awk '/^VmRSS/ { print $2 }' /proc/"$pid"/status 2>/dev/null)
		gpu=$(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits 2>/dev/null | head -n 1)
		echo "$(date +%s) ${rss:-0} ${gpu:-0}" >>"$samples"
	done
	wait "$pid"
	src=$?
	grep -oE 'stress(: | latencies| first).*' "$log" || tail -n 20 "$log"
	awk 'NF == 3 && $2 > 0 { n++; if (n == 1) { r0 = $2; g0 = $3 } r = $2; g = $3; if ($2 > rm) rm = $2; if ($3 > gm) gm = $3 }
		END { printf "memory (%d samples, 10 s apart): RSS %d -> %d MiB (largest %d); GPU used %d -> %d MiB (largest %d)\n", n, r0 / 1024, r / 1024, rm / 1024, g0, g, gm }' "$samples"
	if [ "$src" -eq 0 ]; then
		echo "stress PASS ($2)"
		return 0
	fi
	echo "stress FAIL ($2): exit status $src ($log)"
	return 1
}
for rel in $rels; do
	name=$(basename "$rel")
	lib=$root/bundle-$name/lib
	if [ ! -f "$lib/libcuvs_c.so" ]; then
		cat "$rel"/part-* | xz -d | tar -x -C "$root" || exit 2
	fi
	echo "######## cuVS $name ($lib/libcuvs_c.so)"
	if [ -n "${REAL_STRESS:-}" ]; then
		stress "$lib" "$name"
		rc=$?
		[ "$rc" -gt "$worst" ] && worst=$rc
		continue
	fi
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
