#!/bin/sh
# gpu-table.sh: the serving table of the batcher issue, in one run on a GPU
# machine: C per-call (internal/cbench) and Go per-call (serving -mode
# direct) on the single-CTA kernel (cuVS's C default), Go per-call on the
# multi-CTA kernel (what cuVS's AUTO runs for one query), and Go batched
# (serving -mode batch, AutoAlgo: the Batcher picks the kernel by load) over
# 1..1,024 callers, against each real libcuvs_c given, RUNS times each, and
# one table per release with the ratios (batched / Go per-call, batched /
# the faster Go per-call kernel, Go per-call / C). BENCHMARKS.md quotes its
# output. With DTYPES, the same rows for each element type in one call
# (serving and cbench -dtype; a run does every type before the next run),
# one table per release and type.
#
#   gpu-table.sh BIN RELEASE... [-- more serving/cbench flags]
#
# BIN is a folder with `serving` and `cbench` (make serving-pack: build/
# serving-pack, carried to the GPU machine). RELEASE is a libcuvs_c.so, or
# a folder as ../shared/cuvs/<release> holds (part-* pieces of an xz'd tar
# whose lib/ has libcuvs_c.so), unpacked under $REAL_ROOT (default
# /root/cuvs) once.
#
# Environment (defaults in brackets):
#   CALLERS   callers for the batched runs [1,8,32,64,128,256,512,1024]
#   DIRECT    callers for the per-call runs, C and Go [1,8,32,256]
#   SECONDS   seconds per row [2]
#   RUNS      runs of every program [2]
#   WORKLOAD  the index and search [-n 100000 -dim 128 -k 10 -itopk 64 -graph-degree 32 -batch 1]
#   BATCHFLAGS more flags for the batched runs only (-max-batch, -slots) []
#   DTYPES    element types, each a table: float32, int8, uint8 [float32]
#   OUT       where each program's output is kept [a temporary folder]
# The exit status is 1 when a program failed, else 0: the table is read, not
# asserted.
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
CALLERS=${CALLERS:-1,8,32,64,128,256,512,1024}
DIRECT=${DIRECT:-1,8,32,256}
SECONDS_=${SECONDS:-2}
RUNS=${RUNS:-2}
WORKLOAD=${WORKLOAD:--n 100000 -dim 128 -k 10 -itopk 64 -graph-degree 32 -batch 1}
BATCHFLAGS=${BATCHFLAGS:-}
DTYPES=${DTYPES:-float32}
for dt in $DTYPES; do
	case $dt in
	float32 | int8 | uint8) ;;
	*)
		echo "gpu-table.sh: DTYPES: $dt, want float32, int8 or uint8" >&2
		exit 2
		;;
	esac
done
root=${REAL_ROOT:-/root/cuvs}
OUT=${OUT:-$(mktemp -d "${TMPDIR:-/tmp}/gpu-table.XXXXXX")}
mkdir -p "$OUT" "$root"
cuda=$(ls -d /usr/local/cuda*/lib64 2>/dev/null | head -n 1)
status=0

# prog NAME OUTFILE ARGS...: run one program, its output kept; a failure is
# reported and counted, and the table goes on without it.
# (sh has no local variables: these are prog's own names.)
prog() {
	prog_what=$1 prog_file=$2
	shift 2
	echo "== $prog_what: $*" >&2
	if ! "$@" >"$prog_file" 2>"$prog_file.err"; then
		echo "gpu-table.sh: $prog_what failed:" >&2
		tail -n 5 "$prog_file.err" >&2
		status=1
	fi
}

for rel in $rels; do
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
	for run in $(seq 1 "$RUNS"); do
		for dt in $DTYPES; do
			# Files: $OUT/TAG.KIND.RUN, TAG the release's name, with
			# -int8 or -uint8 after it for those types.
			tag=$name
			[ "$dt" = float32 ] || tag=$name-$dt
			# shellcheck disable=SC2086 # the flag lists are meant to split
			prog "C per-call $dt, run $run" "$OUT/$tag.c.$run" "$bin/cbench" -lib "$lib" -dtype "$dt" $WORKLOAD -algo single -goroutines "$DIRECT" -seconds "$SECONDS_" "$@"
			# shellcheck disable=SC2086
			prog "Go per-call $dt, run $run" "$OUT/$tag.go.$run" "$bin/serving" -lib "$lib" -dtype "$dt" $WORKLOAD -algo single -goroutines "$DIRECT" -seconds "$SECONDS_" "$@"
			# shellcheck disable=SC2086
			prog "Go per-call multi-CTA $dt, run $run" "$OUT/$tag.gomulti.$run" "$bin/serving" -lib "$lib" -dtype "$dt" $WORKLOAD -algo multi -goroutines "$DIRECT" -seconds "$SECONDS_" "$@"
			# shellcheck disable=SC2086
			prog "Go batched $dt, run $run" "$OUT/$tag.batch.$run" "$bin/serving" -lib "$lib" -dtype "$dt" -mode batch $WORKLOAD $BATCHFLAGS -goroutines "$CALLERS" -seconds "$SECONDS_" "$@"
		done
	done
	for dt in $DTYPES; do
		tag=$name
		[ "$dt" = float32 ] || tag=$name-$dt
		echo
		echo "## cuVS $name ($lib), $dt: $WORKLOAD $BATCHFLAGS, $SECONDS_ s per row, $RUNS runs (QPS in thousands, p99 in µs)"
		head -n 1 "$OUT/$tag.c.1" 2>/dev/null
		grep -h "^# serving\\|^# index" "$OUT/$tag.batch.1" 2>/dev/null
		# Rows: six fields, the first a caller count. Batch lines: "# batches at N goroutines: ...".
		awk -v runs="$RUNS" -v name="$name" '
			function base(f) { n = split(f, p, "/"); return p[n] }
			NF == 6 && $1 ~ /^[0-9]+$/ {
				f = base(FILENAME); split(f, part, "."); kind = part[length(part) - 1]; run = part[length(part)]
				q[kind, $1, run] = $2; p99[kind, $1, run] = $4; seen[$1] = 1
				next
			}
			/^# batches at / {
				f = base(FILENAME); split(f, part, "."); run = part[length(part)]
				line = $0; sub(/^# batches at [0-9]+ goroutines: /, "", line)
				st[$4, run] = line
			}
			/^# cpu at / {
				f = base(FILENAME); split(f, part, "."); kind = part[length(part) - 1]; run = part[length(part)]
				if (kind == "batch") cpu[$4, run] = $6
			}
			function cell(kind, c, r) {
				if (!((kind, c, r) in q)) return "—"
				return sprintf("%.1fk (%d)", q[kind, c, r] / 1000, p99[kind, c, r] + 0.5)
			}
			function ratio(a, b, c, r) {
				if (!((a, c, r) in q) || !((b, c, r) in q) || q[b, c, r] == 0) return "—"
				return sprintf("%.2f", q[a, c, r] / q[b, c, r])
			}
			# best: the faster Go per-call kernel of the row.
			function best(c, r) {
				if (!(("go", c, r) in q) || !(("gomulti", c, r) in q)) return "—"
				b = q["go", c, r] > q["gomulti", c, r] ? "go" : "gomulti"
				return ratio("batch", b, c, r)
			}
			END {
				n = 0
				for (c in seen) list[++n] = c + 0
				for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (list[j] < list[i]) { t = list[i]; list[i] = list[j]; list[j] = t }
				print "| callers | run | C per-call | Go per-call | Go per-call multi-CTA | Go batched | batched / Go per-call | batched / best Go per-call | Go / C per-call |"
				print "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
				for (i = 1; i <= n; i++) for (r = 1; r <= runs; r++) {
					c = list[i]
					printf "| %d | %d | %s | %s | %s | %s | %s | %s | %s |\n", c, r, cell("c", c, r), cell("go", c, r), cell("gomulti", c, r), cell("batch", c, r), ratio("batch", "go", c, r), best(c, r), ratio("go", "c", c, r)
				}
				print ""
				print "batcher Stats per row (run: mean batch, p99, queue per request; per batch: handoff, stage, search, deliver; the cores the process kept busy):"
				for (i = 1; i <= n; i++) for (r = 1; r <= runs; r++) if ((list[i], r) in st) printf "  %4d callers, run %d: %s; %s cores busy\n", list[i], r, st[list[i], r], (list[i], r) in cpu ? cpu[list[i], r] : "?"
			}' "$OUT/$tag".*.[0-9]
	done
done
echo
echo "outputs: $OUT"
exit "$status"
