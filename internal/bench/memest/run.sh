#!/bin/sh
# run.sh: issue 45's measurements on a GPU machine (no Go there), against
# each real libcuvs_c given: the table of estimates against measured peaks
# (float32, and int8 on every release that has it), the too-large build
# today and after, and the builds over host rows larger than a cap
# (docs/MEMORY.md: one memest process per algorithm, each well inside 10
# minutes on an H200 at the defaults).
#
#   run.sh MEMEST RELEASE...
#
# MEMEST is the binary (go build -o build/memest ./internal/bench/memest,
# here). RELEASE is a libcuvs_c.so, or a folder as ../shared/cuvs/<release>
# holds (part-* pieces of an xz'd tar whose lib/ has libcuvs_c.so),
# unpacked under $REAL_ROOT (default /root/cuvs) once.
#
# Environment (defaults in brackets):
#   ROWS     the table's sizes [100000,1000000,5000000]
#   ALGOS    the table's algorithms [ivfflat,ivfpq,bruteforce,cagra-ivfpq,cagra-nnd,tiered-cagra,tiered-ivfflat,tiered-ivfpq,cagra-ace,hnsw-ace]
#   DTYPES   the table's element types [float32 int8]
#   MODES    which parts run [table toolarge overcap]
#   CAP      the cap for toolarge and overcap, bytes [4294967296]
#   TOOLARGE_ROWS toolarge's rows of 128 float32 in host memory, CAGRA by
#            IVF-PQ [8000000: its padded copy alone, 4.1 GB, is over 4 GiB]
#   OVERCAP_ALGOS overcap's algorithms, one process each
#            [ivfpq ivfsq ivfflat cagra hnsw-ace]
#   HOSTROWS overcap's rows of 128 float32 in host memory [twice the cap:
#            16777216, 8 GiB, at 4 GiB]
#   CAPBY    overcap's cap: pool (safe.WithMemoryLimit; on 26.08 the peak is
#            tracked) or device (no pool, a filler: the peak is sampled,
#            for 26.06) [pool]
#   OUT      where each run's output is kept [a temporary folder]
# Each part prints as it goes; the exit status is 1 when one failed.
set -u
if [ $# -lt 2 ]; then
	echo "usage: $0 MEMEST RELEASE..." >&2
	exit 2
fi
bin=$1
shift
ROWS=${ROWS:-100000,1000000,5000000}
ALGOS=${ALGOS:-ivfflat,ivfpq,bruteforce,cagra-ivfpq,cagra-nnd,tiered-cagra,tiered-ivfflat,tiered-ivfpq,cagra-ace,hnsw-ace}
DTYPES=${DTYPES:-float32 int8}
MODES=${MODES:-table toolarge overcap}
CAP=${CAP:-4294967296}
HOSTROWS=${HOSTROWS:-0}
OVERCAP_ALGOS=${OVERCAP_ALGOS:-ivfpq ivfsq ivfflat cagra hnsw-ace}
CAPBY=${CAPBY:-pool}
TOOLARGE_ROWS=${TOOLARGE_ROWS:-8000000}
root=${REAL_ROOT:-/root/cuvs}
OUT=${OUT:-$(mktemp -d "${TMPDIR:-/tmp}/memest.XXXXXX")}
mkdir -p "$OUT" "$root"
cuda=$(ls -d /usr/local/cuda*/lib64 2>/dev/null | head -n 1)
status=0
# each FILE CMD...: runs CMD, printing its output as it goes and keeping it
# in FILE; a failure sets status (a pipe into tee would hide it)
each() {
	f=$1
	shift
	rm -f "$f.failed"
	{ "$@" 2>&1 || echo "exit status $?" >"$f.failed"; } | tee "$f"
	if [ -f "$f.failed" ]; then
		cat "$f.failed"
		status=1
	fi
}
for rel in "$@"; do
	if [ -f "$rel" ]; then
		lib=$rel
		name=$(basename "$(dirname "$(dirname "$rel")")")
	else
		name=$(basename "$rel")
		lib=$root/bundle-$name/lib/libcuvs_c.so
		if [ ! -f "$lib" ]; then
			cat "$rel"/part-* | xz -d | tar -x -C "$root" || exit 2
		fi
	fi
	export LD_LIBRARY_PATH="$(dirname "$lib")${cuda:+:$cuda}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
	for mode in $MODES; do
		case $mode in
		table)
			for dt in $DTYPES; do
				echo "## $name: estimates against measured peaks, $dt"
				each "$OUT/$name.table.$dt" "$bin" -lib "$lib" -mode table -dtype "$dt" -rows "$ROWS" -algos "$ALGOS"
			done
			;;
		toolarge)
			echo "## $name: a CAGRA build over the cap ($TOOLARGE_ROWS rows), today and after"
			each "$OUT/$name.toolarge" "$bin" -lib "$lib" -mode toolarge -algo cagra-ivfpq -rows "$TOOLARGE_ROWS" -cap "$CAP"
			;;
		overcap)
			for a in $OVERCAP_ALGOS; do
				echo "## $name: $a from host rows over the cap ($CAPBY)"
				each "$OUT/$name.overcap.$a.$CAPBY" "$bin" -lib "$lib" -mode overcap -algo "$a" -hostrows "$HOSTROWS" -cap "$CAP" -capby "$CAPBY" -out "$OUT/$name.track"
			done
			;;
		esac
	done
done
echo "outputs in $OUT"
exit $status
