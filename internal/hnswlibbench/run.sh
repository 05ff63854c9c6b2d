#!/bin/sh
# run.sh: safe/hnsw's BenchmarkServe and hnswlib's own search of the same
# file (hnswlib-serve), in one run on a GPU machine, per shape and thread
# count, against each libcuvs_c given (issue 44, "CPU serving beside
# hnswlib"). Built by pack.sh; no Go needed here:
#
#   build/hnswlib-bench/run.sh RELEASE...
#
# RELEASE is a libcuvs_c.so, or a folder as ../shared/cuvs/<release> holds
# (part-* pieces of an xz'd tar whose lib/ has libcuvs_c.so), unpacked
# under $REAL_ROOT (default /root/cuvs) once.
#
# For each release and shape: the Go benchmark builds the index on the GPU
# (hnsw.Build: ACE, CPU hierarchy, M 16, ef_construction 64), writes it
# (Serialize, hnswlib's format) with its 1,000 queries and the ids of its
# own search, and measures one-query searches (ef 64, k 10, NumThreads 1)
# from each goroutine count, through Index.Search (shared) and
# SearchSliceInto (slice); then hnswlib-serve and hnswlib-serve-avx2 load
# that file and search it from as many threads, one query per searchKnn,
# for SECONDS each, and report recall against the exact kNN (the Go ids'
# too) and how far their ids agree with Go's. Then a table per release:
# QPS of each, Go/hnswlib (the SSE build, as libcuvs's hnswlib is built),
# and the CPUs each kept busy.
#
# Environment (defaults in brackets):
#   SHAPES    ROWSxDIM of the indexes [10000x32 100000x128]
#   THREADS   goroutine and thread counts [1,8,16,32]
#   SECONDS   seconds per hnswlib row, and the Go benchtime [5]
#   OUT       where every output is kept [a temporary folder]
# The exit status is 1 when a program failed, else 0: the table is read,
# not asserted.
set -u
if [ $# -lt 1 ]; then
	echo "usage: $0 RELEASE..." >&2
	exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
SHAPES=${SHAPES:-10000x32 100000x128}
THREADS=${THREADS:-1,8,16,32}
SECS=${SECONDS:-5}
root=${REAL_ROOT:-/root/cuvs}
OUT=${OUT:-$(mktemp -d "${TMPDIR:-/tmp}/hnswlib-bench.XXXXXX")}
mkdir -p "$OUT" "$root"
cuda=$(ls -d /usr/local/cuda*/lib64 2>/dev/null | head -n 1)
status=0
echo "== $(nproc) CPUs: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'); outputs in $OUT"
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
	case $lib in /*) ;; *) lib=$(pwd)/$lib ;; esac
	for shape in $SHAPES; do
		dir=$OUT/$name/$shape
		mkdir -p "$dir"
		echo "== cuVS $name, $shape: BenchmarkServe (shared, slice), goroutines $THREADS" >&2
		if ! (cd "$dir" && LD_LIBRARY_PATH="$(dirname "$lib")${cuda:+:$cuda}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
			CUVS_TEST_LIBRARY="$lib" CUVS_HNSW_BENCH="$shape" CUVS_HNSW_BENCH_G="$THREADS" CUVS_HNSW_BENCH_DIR="$dir" \
			"$here/hnsw.test" -test.run '^$' -test.bench '^BenchmarkServe$/^(shared|slice)$/' -test.benchtime "${SECS}s" -test.v \
			-test.timeout 60m) >"$dir/go.txt" 2>&1; then
			echo "run.sh: the Go benchmark failed ($dir/go.txt):" >&2
			tail -n 20 "$dir/go.txt" >&2
			status=1
			continue
		fi
		for prog in hnswlib-serve hnswlib-serve-avx2; do
			echo "== cuVS $name, $shape: $prog, threads $THREADS" >&2
			if ! "$here/$prog" -index "$dir/index.hnsw" -queries "$dir/queries.fbin" -metric l2 -k 10 -ef 64 \
				-threads "$THREADS" -seconds "$SECS" -exact -compare "$dir/go.i64bin" >"$dir/$prog.txt" 2>&1; then
				echo "run.sh: $prog failed ($dir/$prog.txt):" >&2
				tail -n 5 "$dir/$prog.txt" >&2
				status=1
			fi
		done
		echo
		echo "## cuVS $name, $shape (ef 64, k 10, one query per search; QPS in thousands, CPUs busy in brackets)"
		grep -h "hnsw.Build of\|^hnswlib index=\|recall@\|agree@" "$dir/go.txt" "$dir/hnswlib-serve.txt" 2>/dev/null | sed 's/^ *serve_test.go:[0-9]*: /# /; s/^hnswlib /# hnswlib /'
		awk '
			function base(f) { n = split(f, p, "/"); return p[n] }
			# Go: BenchmarkServe/shared/g=8-16  N  ns/op  qps  cpus  inflight
			/^BenchmarkServe\// {
				split($1, part, "/"); mode = part[2]; g = part[3]; sub(/^g=/, "", g); sub(/-[0-9]+$/, "", g)
				for (i = 2; i < NF; i++) { if ($(i + 1) == "qps") q[mode, g] = $i; if ($(i + 1) == "cpus") c[mode, g] = $i }
				seen[g] = 1; order[++n] = g
			}
			/^hnswlib threads=/ {
				prog = base(FILENAME); sub(/\.txt$/, "", prog)
				for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
				q[prog, v["threads"]] = v["qps"]; c[prog, v["threads"]] = v["cpus"]
			}
			function cell(m, g) { return ((m, g) in q) ? sprintf("%.1fk (%.1f)", q[m, g] / 1000, c[m, g]) : "—" }
			function ratio(a, b, g) { return ((a, g) in q && (b, g) in q && q[b, g] > 0) ? sprintf("%.2f", q[a, g] / q[b, g]) : "—" }
			END {
				printf "| threads | Go Search | Go SearchSlice | hnswlib (SSE) | hnswlib (AVX2) | Go Search / hnswlib | Go SearchSlice / hnswlib |\n"
				printf "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n"
				for (i = 1; i <= n; i++) {
					g = order[i]; if (done[g]++) continue
					printf "| %s | %s | %s | %s | %s | %s | %s |\n", g, cell("shared", g), cell("slice", g), cell("hnswlib-serve", g), cell("hnswlib-serve-avx2", g), ratio("shared", "hnswlib-serve", g), ratio("slice", "hnswlib-serve", g)
				}
			}
		' "$dir/go.txt" "$dir/hnswlib-serve.txt" "$dir/hnswlib-serve-avx2.txt"
	done
done
exit $status
