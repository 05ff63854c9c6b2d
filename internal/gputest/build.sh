#!/bin/sh
# Builds, on a machine with Go and gcc (no GPU needed), the tests of every
# package that loads libcuvs_c, as test binaries, plus run.sh, into one folder
# to copy to a GPU machine that has libcuvs but no Go (`make gpu-test`):
#
#   build.sh [OUT] [PACKAGE...]
#
#   OUT        default build/gpu-test, relative to the repository root
#   PACKAGE    default: $GPU_TEST_PKGS, or the packages whose tests load
#              libcuvs_c through internal/safetest (below)
#
# $GPU_TEST_VARIANTS (default "race cgocheck2") picks the builds of each
# package: race (`go test -c -race`) and cgocheck2 (`GOEXPERIMENT=cgocheck2
# go test -c`). OUT then holds
#
#   run.sh                    runs them all against a library and sums up
#   packages.txt              one line per binary: dir variant import-path
#   <dir>/<variant>.test      a test binary; <dir> is the import path below
#                             the module with / turned into _ (safe_bruteforce)
#   <dir>/testdata/           the package's testdata, when it has one: the
#                             binaries run from <dir>, as go test runs them
#                             from the package's folder
#
# On the GPU machine: ./run.sh /path/to/libcuvs_c.so (README, "Checking your
# libcuvs"). The binaries are linked against this machine's C library
# (glibc): build on a system no newer than the GPU machine's.
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-build/gpu-test}
[ $# -gt 0 ] && shift
# Packages left out: gen/..., generated, dlpack, internal/loadertest,
# internal/cbench, internal/cuvsdouble (their tests never load libcuvs_c, or
# load only the double or a library of their own, which they build with
# gcc), internal/bench (benchmarks only, which need the double).
pkgs=${GPU_TEST_PKGS:-./safe ./safe/bruteforce ./safe/cagra ./examples/serving}
[ $# -gt 0 ] && pkgs="$*"
variants=${GPU_TEST_VARIANTS:-race cgocheck2}
cd "$root"
module=$(go list -m)
rm -rf "$out"
mkdir -p "$out"
: >"$out/packages.txt"
for pkg in $pkgs; do
	path=$(go list "$pkg")
	dir=$(echo "${path#"$module"/}" | tr / _)
	src=$(go list -f '{{.Dir}}' "$pkg")
	mkdir -p "$out/$dir"
	if [ -d "$src/testdata" ]; then
		cp -R "$src/testdata" "$out/$dir/testdata"
	fi
	for v in $variants; do
		case $v in
		race) go test -c -race -o "$out/$dir/race.test" "$pkg" ;;
		cgocheck2) GOEXPERIMENT=cgocheck2 go test -c -o "$out/$dir/cgocheck2.test" "$pkg" ;;
		*)
			echo "build.sh: unknown variant $v (race, cgocheck2)" >&2
			exit 2
			;;
		esac
		if [ ! -f "$out/$dir/$v.test" ]; then
			echo "build.sh: $pkg has no tests" >&2
			exit 1
		fi
		echo "$dir $v $path" >>"$out/packages.txt"
	done
done
cp internal/gputest/run.sh "$out/run.sh"
chmod +x "$out/run.sh"
echo "built $out: copy it to the GPU machine and run '$out/run.sh /path/to/libcuvs_c.so' there"
