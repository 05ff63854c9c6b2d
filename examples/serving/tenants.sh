#!/bin/sh
# tenants.sh: the tenants rows of BENCHMARKS.md in one run on a GPU machine,
# against each real libcuvs_c given: the Batcher unfiltered, with 1 filter
# shared by every request, with 16 filters, and with one filter per caller
# (256), beside direct filtered per-call searches (single- and multi-CTA)
# of the same 256 filters; every filter lets TENANT_ALLOW of the rows
# through. Each program's output is printed whole (the rows, and the
# tenant lines that count the ids outside their request's filter).
#
#   tenants.sh BIN RELEASE... [-- more serving flags]
#
# BIN holds `serving` (make serving-pack); RELEASE as for gpu-table.sh (a
# libcuvs_c.so, or a folder of ../shared/cuvs, unpacked under $REAL_ROOT).
# Environment: SECONDS per row [3], WORKLOAD [-n 100000 -dim 128 -k 10
# -itopk 64 -graph-degree 32 -batch 1], TENANT_ALLOW [0.5].
set -u
if [ $# -lt 2 ]; then
	echo "usage: $0 BIN RELEASE... [-- flags]" >&2
	exit 2
fi
bin=$1
shift
rels=""
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
	rels="$rels $1"
	shift
done
[ "${1:-}" = "--" ] && shift
SECONDS_=${SECONDS:-3}
WORKLOAD=${WORKLOAD:--n 100000 -dim 128 -k 10 -itopk 64 -graph-degree 32 -batch 1}
ALLOW=${TENANT_ALLOW:-0.5}
root=${REAL_ROOT:-/root/cuvs}
mkdir -p "$root"
cuda=$(ls -d /usr/local/cuda*/lib64 2>/dev/null | head -n 1)
status=0
for rel in $rels; do
	if [ -f "$rel" ]; then
		lib=$rel
	else
		lib=$root/bundle-$(basename "$rel")/lib/libcuvs_c.so
		[ -f "$lib" ] || { cat "$rel"/part-* | xz -d | tar -x -C "$root" || exit 2; }
	fi
	export LD_LIBRARY_PATH="$(dirname "$lib")${cuda:+:$cuda}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
	# run WHAT ARGS...: one serving run, its output printed after a header.
	run() {
		what=$1
		shift
		echo "== $rel: $what"
		# shellcheck disable=SC2086 # the flag lists are meant to split
		"$bin/serving" -lib "$lib" $WORKLOAD -seconds "$SECONDS_" -tenant-allow "$ALLOW" "$@" || status=1
	}
	run "batched, unfiltered" -mode batch -goroutines 256,1024 "$@"
	run "batched, 1 filter" -mode batch -tenants 1 -goroutines 256,1024 "$@"
	run "batched, 16 filters" -mode batch -tenants 16 -goroutines 256,1024 "$@"
	run "batched, a filter per caller" -mode batch -tenants 256 -goroutines 256 "$@"
	run "direct single-CTA, a filter per caller" -mode direct -algo single -tenants 256 -goroutines 256 "$@"
	run "direct multi-CTA, a filter per caller" -mode direct -algo multi -tenants 256 -goroutines 256 "$@"
done
exit $status
