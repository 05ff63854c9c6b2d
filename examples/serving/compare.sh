#!/bin/sh
# compare.sh: run the C program (internal/cbench) and the Go program
# (examples/serving) one after the other on this machine with the same flags,
# then print the Go/C ratios of QPS and p99 at each goroutine count and the
# verdict on the targets (at 32 goroutines: Go QPS >= 0.90 x C, Go p99 <=
# 1.2 x C).
#
#   examples/serving/compare.sh -n 100000 -dim 128 -goroutines 1,8,32 -seconds 5
#
# Every argument goes to both programs. Environment:
#   SERVING, CBENCH  the programs (default build/serving and build/cbench,
#                    made with `make serving cbench` when absent)
#   ORDER            c-first (default) or go-first
#   OUT              folder for the two outputs (default: a new temporary one)
#   STRICT=1         exit with status 3 when a target is missed
set -eu

root=$(cd "$(dirname "$0")/../.." && pwd)
SERVING=${SERVING:-$root/build/serving}
CBENCH=${CBENCH:-$root/build/cbench}
ORDER=${ORDER:-c-first}
if [ ! -x "$SERVING" ] || [ ! -x "$CBENCH" ]; then
	make -C "$root" serving cbench >&2
fi
OUT=${OUT:-$(mktemp -d "${TMPDIR:-/tmp}/compare.XXXXXX")}
mkdir -p "$OUT"

# run NAME PROGRAM ARGS...: the output is kept in $OUT/NAME.txt; a failure
# stops the script (sh has no pipefail: the status goes through a file).
run() {
	name=$1
	shift
	echo "== $name: $*"
	{ "$@"; echo $? >"$OUT/$name.rc"; } | tee "$OUT/$name.txt"
	rc=$(cat "$OUT/$name.rc")
	if [ "$rc" != 0 ]; then
		echo "compare.sh: $1 failed (exit status $rc)" >&2
		exit 1
	fi
}
run_c() { run c "$CBENCH" "$@"; }
run_go() { run go "$SERVING" "$@"; }
case $ORDER in
c-first) run_c "$@"; run_go "$@" ;;
go-first) run_go "$@"; run_c "$@" ;;
*) echo "compare.sh: ORDER=$ORDER, want c-first or go-first" >&2; exit 2 ;;
esac

echo "== Go/C (outputs in $OUT)"
awk -v strict="${STRICT:-0}" '
	# table rows: six fields, the first a goroutine count
	NF == 6 && $1 ~ /^[0-9]+$/ {
		if (FILENAME == ARGV[1]) { cq[$1] = $2; c99[$1] = $4 }
		else { gq[$1] = $2; g99[$1] = $4; order[++n] = $1 }
	}
	END {
		printf "%10s %12s %12s %8s %10s %10s %8s\n", "goroutines", "C_QPS", "Go_QPS", "Go/C", "C_p99_us", "Go_p99_us", "Go/C"
		at = ""
		for (i = 1; i <= n; i++) {
			g = order[i]
			if (!(g in cq)) continue
			qr = cq[g] > 0 ? gq[g] / cq[g] : 0
			pr = c99[g] > 0 ? g99[g] / c99[g] : 0
			printf "%10d %12.1f %12.1f %8.3f %10.1f %10.1f %8.3f\n", g, cq[g], gq[g], qr, c99[g], g99[g], pr
			if (g == 32 || (at != 32 && g + 0 > at + 0)) { at = g; aq = qr; ap = pr }
		}
		if (at == "") { print "no goroutine count in common"; exit 1 }
		note = at == 32 ? "" : " (no 32-goroutine step: the largest count instead)"
		okq = aq >= 0.90; okp = ap <= 1.20
		printf "targets at %d goroutines%s: Go QPS >= 0.90 x C: %s (%.3f); Go p99 <= 1.20 x C: %s (%.3f)\n",
			at, note, okq ? "met" : "MISSED", aq, okp ? "met" : "MISSED", ap
		if (strict == 1 && !(okq && okp)) exit 3
	}
' "$OUT/c.txt" "$OUT/go.txt"
