#!/bin/sh
# device-run.sh: on a GPU machine, the benchmarks device-pack.sh packed,
# against each libcuvs_c given, one after the other; every program's output
# is printed whole and kept under $OUT (if set).
#
#   device-run.sh RELEASE...
#
# RELEASE is a libcuvs_c.so, or a folder as ../shared/cuvs/<release> holds
# (part-* pieces of an xz'd tar), unpacked under $REAL_ROOT (default
# /root/cuvs) once. For 26.08's multi-GPU build, put NCCL on
# LD_LIBRARY_PATH first (../shared/cuvs/README).
#
# Environment: PARTS, the parts to run [tenants bfbitmap tiered hnswlib
# memest overcap] (memest.sh's own variables pass through: ROWS, MODES,
# ...; memest runs its table and toolarge modes unless MODES says
# otherwise, overcap its overcap mode: builds over twice the cap in host
# rows, OVERCAP_ALGOS [ivfpq ivfsq ivfflat cagra hnsw-ace] one process
# each, CAP, HOSTROWS, CAPBY; give one or two algorithms a call to stay
# inside 10 minutes); SECONDS per row [3]; TIERED_BENCHTIME [2s].
set -u
here=$(cd "$(dirname "$0")" && pwd)
parts=${PARTS:-tenants bfbitmap tiered hnswlib memest overcap}
root=${REAL_ROOT:-/root/cuvs}
out=${OUT:-$(mktemp -d)}
mkdir -p "$root" "$out"
cuda=$(ls -d /usr/local/cuda*/lib64 2>/dev/null | head -n 1)
status=0
for rel in "$@"; do
	if [ -f "$rel" ]; then
		lib=$rel
	else
		lib=$root/bundle-$(basename "$rel")/lib/libcuvs_c.so
		[ -f "$lib" ] || { cat "$rel"/part-* | xz -d | tar -x -C "$root" || exit 2; }
	fi
	name=$(basename "$rel")
	export LD_LIBRARY_PATH="$(dirname "$lib")${cuda:+:$cuda}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
	for p in $parts; do
		echo "=== $name: $p"
		case $p in
		tenants) REAL_ROOT=$root sh "$here/tenants.sh" "$here" "$lib" ;;
		bfbitmap) "$here/bfbitmap" -lib "$lib" -seconds "${SECONDS:-3}" ;;
		tiered) CUVS_TEST_LIBRARY=$lib "$here/tiered.test" -test.run '^$' \
			-test.bench 'BenchmarkTieredSearch|BenchmarkTieredDeletes' -test.benchtime "${TIERED_BENCHTIME:-2s}" ;;
		hnswlib) OUT=$out/hnswlib-$name sh "$here/hnswlib-bench/run.sh" "$lib" ;;
		memest) OUT=$out/memest-$name MODES=${MODES:-table toolarge} sh "$here/memest.sh" "$here/memest" "$lib" ;;
		overcap) OUT=$out/overcap-$name MODES=overcap sh "$here/memest.sh" "$here/memest" "$lib" ;;
		*) echo "unknown part $p" >&2; false ;;
		esac >"$out/$name-$p.txt" 2>&1 || status=1
		cat "$out/$name-$p.txt"
	done
done
exit $status
