#!/bin/sh
# Runs the test binaries `make gpu-test` built (internal/gputest/build.sh)
# against a libcuvs_c, on a machine that needs no Go:
#
#   ./run.sh /path/to/libcuvs_c.so [test flags...]
#
# e.g. ./run.sh /opt/conda/lib/libcuvs_c.so -test.run 'Filter'
#
# Each binary runs from its package's folder in this bundle, with
# CUVS_TEST_LIBRARY set to the library (conformance mode: tests that need the
# ABI test double skip, saying why) and -test.v, its output kept in
# logs/<package>.<variant>.log. Then a table: per package and variant, the
# tests (and examples) that passed, failed and were skipped; then every skip
# with its reason and every failure. The exit status is 0 when nothing
# failed, 1 when something did, 2 when the library is not there.
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
logs=$here/logs
mkdir -p "$logs"
summary=$logs/summary.txt
: >"$summary"
status=0
while read -r dir variant path; do
	[ -n "$dir" ] || continue
	log=$logs/$dir.$variant.log
	echo "== $path ($variant)"
	(cd "$here/$dir" && CUVS_TEST_LIBRARY=$lib "./$variant.test" -test.v -test.count=1 "$@" </dev/null) >"$log" 2>&1
	rc=$?
	# Top-level results only ("--- PASS: Name"). With -test.v a test's
	# output comes before its result, after "=== RUN/CONT/NAME Name": a
	# skip's reason is the last line of output of the test skipped.
	awk -v pkg="$path" -v variant="$variant" -v rc="$rc" -v logf="$log" '
		/^=== (RUN|CONT|NAME) / { cur = $3; next }
		/^    [^ ]/ && cur != "" { msg = $0; sub(/^ +/, "", msg); sub(/^[^ ]+\.go:[0-9]+: /, "", msg); sub(/; CUVS_TEST_LIBRARY=.* is another library$/, "", msg); last[cur] = msg; next }
		/^--- PASS: / { pass++ }
		/^--- FAIL: / { fail++; fails = fails "  FAIL " pkg " (" variant "): " $3 "\n" }
		/^--- SKIP: / { skip++; skips = skips "  SKIP " pkg " " $3 ": " last[$3] "\n" }
		/^--- / { cur = "" }
		END {
			if (rc != 0 && fail == 0) {
				fail = 1
				fails = fails "  FAIL " pkg " (" variant "): exit status " rc " with no test failed: a crash or TestMain (" logf ")\n"
			}
			printf "ROW\t%s\t%s\t%d\t%d\t%d\n%s%s", pkg, variant, pass, fail, skip, skips, fails
		}' "$log" >>"$summary"
	[ "$rc" -eq 0 ] || status=1
	tail -n 1 "$log"
done <"$here/packages.txt"

echo
echo "libcuvs_c: $lib"
printf '%-45s %-10s %7s %7s %8s\n' package variant passed failed skipped
grep '^ROW' "$summary" | while IFS="$(printf '\t')" read -r _ pkg variant pass fail skip; do
	printf '%-45s %-10s %7s %7s %8s\n' "$pkg" "$variant" "$pass" "$fail" "$skip"
done
# A skip's reason is the same in every variant: list each once.
skips=$(grep '^  SKIP ' "$summary" | sort -u)
if [ -n "$skips" ]; then
	echo
	echo "skipped (needs the ABI test double, or says why):"
	echo "$skips"
fi
fails=$(grep '^  FAIL ' "$summary" || true)
if [ -n "$fails" ]; then
	echo
	echo "failed (logs in $logs):"
	echo "$fails"
fi
echo
if [ "$status" -eq 0 ]; then
	echo "PASS: every test passed or skipped"
else
	echo "FAIL: see the failures above"
fi
exit "$status"
