#!/bin/sh
# Runs the test binaries `make gpu-test` built (internal/gputest/build.sh)
# against a libcuvs_c, on a machine that needs no Go:
#
#   ./run.sh /path/to/libcuvs_c.so [test flags...]
#
# e.g. ./run.sh /opt/conda/lib/libcuvs_c.so -test.run 'Filter'
#
# First bin/dtypeprobe asks the library, once per element type (float32,
# float16, int8, uint8), whether it builds an index of it: cuVS can be built
# for fewer types, and a trimmed build refuses the others with
# "Unsupported ... dtype: <code> and bits: <bits>" (logs/dtypes.txt).
#
# Then each binary runs from its package's folder in this bundle, with
# CUVS_TEST_LIBRARY set to the library (conformance mode: tests that need the
# ABI test double skip, saying why), CUVS_GO_CBENCH and
# CUVS_GO_README_PROGRAM set to the programs in bin/, and -test.v, its output
# kept in logs/<package>.<variant>.log. Then a table: per package and
# variant, the tests (and examples) that passed, failed, failed only because
# the library lacks a type, and were skipped, and how many of those that
# passed ran on int8/uint8 data (by name: the test's or a subtest's says
# int8 or uint8, as TestUint8 or TestRecall/int8); then every skip with its
# reason, every test of a type the library lacks, and every failure.
#
# A failed test counts as "library lacks dtype X" when the probe found X
# refused and every failed leaf of it (the test itself, or those of its
# subtests that failed and have no failed subtest) printed that refusal of
# X; anything else is a failure, as is a binary that crashed (an exit status
# other than 0 or 1). The exit status is 0 when nothing failed (tests of
# a type the library lacks aside), 1 when something did, 2 when the library
# or the bundle is not there. A failure whose text says the build left that
# code out (the test builds in ../shared/cuvs: "not compiled in this
# float32-only cuVS build" for 26.06.00, "not compiled in this cuVS build
# (float32, int8 and uint8 only)" for 26.08.01) counts as the library's
# lack too, as "not-compiled-in-this-build". $GPU_TEST_TIMEOUT (default 10m) is each
# binary's -test.timeout.
set -u
if [ $# -lt 1 ]; then
	echo "usage: $0 /path/to/libcuvs_c.so [test flags...]" >&2
	exit 2
fi
lib=$1
shift
if [ ! -f "$lib" ]; then
	echo "library not found: $lib" >&2
	exit 2
fi
case $lib in
/*) ;;
*) lib=$(cd "$(dirname "$lib")" && pwd)/$(basename "$lib") ;;
esac
here=$(cd "$(dirname "$0")" && pwd)
if [ ! -f "$here/packages.txt" ]; then
	echo "$here/packages.txt not found: build this folder with 'make gpu-test'" >&2
	exit 2
fi
# Each binary's -test.timeout: a hang fails its package (with every
# goroutine's stack in the log) instead of the whole run.
timeout=${GPU_TEST_TIMEOUT:-10m}
logs=$here/logs
mkdir -p "$logs"
summary=$logs/summary.txt
: >"$summary"
tab=$(printf '\t')

# The element types the library lacks, as name:code:bits words.
dtypes=$logs/dtypes.txt
lacking=""
if [ -x "$here/bin/dtypeprobe" ]; then
	"$here/bin/dtypeprobe" "$lib" >"$dtypes" 2>&1 </dev/null
	rc=$?
	lacking=$(awk -F "$tab" '$2 == "lacks" { printf "%s%s:%s:%s", sep, $1, $3, $4; sep = " " }' "$dtypes")
	echo "== element types (bin/dtypeprobe):" "$(awk -F "$tab" 'NF >= 4 { printf "%s%s %s", sep, $1, $2; sep = ", " }' "$dtypes")"
	if [ "$rc" -ne 0 ] || grep -q "${tab}error${tab}" "$dtypes"; then
		echo "   the probe could not tell every type (exit status $rc; $dtypes):"
		sed 's/^/   /' "$dtypes"
	fi
else
	echo "== no bin/dtypeprobe: every failure counts as one"
fi
export CUVS_GO_CBENCH="$here/bin/cbench" CUVS_GO_README_PROGRAM="$here/bin/readme-program"
[ -x "$CUVS_GO_CBENCH" ] || unset CUVS_GO_CBENCH
[ -x "$CUVS_GO_README_PROGRAM" ] || unset CUVS_GO_README_PROGRAM

while read -r dir variant path; do
	[ -n "$dir" ] || continue
	log=$logs/$dir.$variant.log
	echo "== $path ($variant)"
	(cd "$here/$dir" && CUVS_TEST_LIBRARY=$lib "./$variant.test" -test.v -test.count=1 -test.timeout="$timeout" "$@" </dev/null) >"$log" 2>&1
	rc=$?
	# With -test.v a test's output comes after "=== RUN/CONT/NAME Name"
	# and before its result line ("--- PASS: Name", indented for a
	# subtest). Counted are top-level tests; a skip's reason is the last
	# line of output of the test skipped.
	awk -v pkg="$path" -v variant="$variant" -v rc="$rc" -v logf="$log" -v lacking="$lacking" '
		BEGIN {
			nl = split(lacking, L, " ")
			for (i = 1; i <= nl; i++) {
				split(L[i], f, ":")
				lname[i] = f[1]
				lfrag1[i] = "dtype: " f[2] " and bits: " f[3]
				lfrag2[i] = "code=" f[2] ", bits=" f[3]
			}
		}
		# The type of the library lacks that text refuses, or "".
		function lacks(text, lines, n, j, i) {
			n = split(text, lines, "\n")
			for (j = 1; j <= n; j++) {
				# A build of cuVS trimmed to fewer types or algorithms
				# (../shared/cuvs: float32 only) refuses the rest so.
				if (index(lines[j], "not compiled in this float32-only cuVS build") || index(lines[j], "not compiled in this cuVS build (")) return "not-compiled-in-this-build"
				if (index(lines[j], "Unsupported") == 0) continue
				for (i = 1; i <= nl; i++)
					if (index(lines[j], lfrag1[i]) || index(lines[j], lfrag2[i])) return lname[i]
			}
			return ""
		}
		/^=== (RUN|CONT|NAME|PAUSE) / {
			cur = $3
			# A test ran on int8/uint8 data when its name, or the
			# name of a subtest of it, says so (TestUint8, TestX/int8).
			if ($2 == "RUN" && tolower(cur) ~ /int8/) { t = cur; sub(/\/.*/, "", t); int8[t] = 1 }
			next
		}
		/^ *--- (PASS|FAIL|SKIP): / {
			top = ($0 ~ /^---/)
			if ($2 == "FAIL:") { nfailed++; fname[nfailed] = $3 }
			if (top && $2 == "PASS:") { pass++; if ($3 in int8) i8++ }
			if (top && $2 == "SKIP:") { skip++; skips = skips "  SKIP " pkg " " $3 ": " last[$3] "\n" }
			if (top && $2 == "FAIL:") { ntop++; topname[ntop] = $3 }
			cur = ""
			next
		}
		cur != "" {
			out[cur] = out[cur] "\n" $0
			if ($0 ~ /^    [^ ]/) { msg = $0; sub(/^ +/, "", msg); sub(/^[^ ]+\.go:[0-9]+: /, "", msg); sub(/; CUVS_TEST_LIBRARY=.* is another library$/, "", msg); last[cur] = msg }
		}
		END {
			for (t = 1; t <= ntop; t++) {
				T = topname[t]
				why = ""; real = (rc != 0 && rc != 1)
				for (i = 1; i <= nfailed; i++) {
					N = fname[i]
					if (N != T && index(N, T "/") != 1) continue
					leaf = 1
					for (j = 1; j <= nfailed; j++) if (index(fname[j], N "/") == 1) leaf = 0
					if (!leaf) continue
					d = lacks(out[N])
					if (d == "") real = 1
					else if (index(" " why " ", " " d " ") == 0) why = why (why == "" ? "" : " ") d
				}
				if (real || why == "") { fail++; fails = fails "  FAIL " pkg " (" variant "): " T "\n" }
				else { lack++; lacks_ = lacks_ "  LACKS " why ": " pkg " (" variant "): " T "\n" }
			}
			if (rc != 0 && fail == 0 && (lack == 0 || rc != 1)) {
				fail++
				fails = fails "  FAIL " pkg " (" variant "): exit status " rc ", no test failed but for a type the library lacks: a crash or TestMain (" logf ")\n"
			}
			printf "ROW\t%s\t%s\t%d\t%d\t%d\t%d\t%d\n%s%s%s", pkg, variant, pass, fail, lack, skip, i8, skips, lacks_, fails
		}' "$log" >>"$summary"
	tail -n 1 "$log"
done <"$here/packages.txt"

echo
echo "libcuvs_c: $lib"
printf '%-45s %-10s %7s %7s %12s %8s %11s\n' package variant passed failed lacks-dtype skipped int8/uint8
status=0
lackn=0
while IFS="$tab" read -r _ pkg variant pass fail lack skip i8; do
	[ -n "$pkg" ] || continue
	printf '%-45s %-10s %7s %7s %12s %8s %11s\n' "$pkg" "$variant" "$pass" "$fail" "$lack" "$skip" "$i8"
done <<EOF
$(grep '^ROW' "$summary")
EOF
# A skip's reason is the same in every variant: list each once.
skips=$(grep '^  SKIP ' "$summary" | sort -u)
if [ -n "$skips" ]; then
	echo
	echo "skipped (needs the ABI test double, or says why):"
	echo "$skips"
fi
lacks=$(grep '^  LACKS ' "$summary" || true)
if [ -n "$lacks" ]; then
	lackn=$(echo "$lacks" | wc -l)
	echo
	echo "library lacks dtype (failed on a type bin/dtypeprobe found refused; not counted as failures):"
	echo "$lacks"
fi
fails=$(grep '^  FAIL ' "$summary" || true)
if [ -n "$fails" ]; then
	status=1
	echo
	echo "failed (logs in $logs):"
	echo "$fails"
fi
echo
if [ "$status" -eq 0 ] && [ "$lackn" -eq 0 ]; then
	echo "PASS: every test passed or skipped"
elif [ "$status" -eq 0 ]; then
	echo "PASS: every test passed or skipped, but for $lackn that failed only because the library lacks it:" $(grep '^  LACKS ' "$summary" | sed 's/^  LACKS \([^:]*\):.*/\1/' | tr ' ' '\n' | sort -u)
else
	echo "FAIL: see the failures above"
fi
exit "$status"
