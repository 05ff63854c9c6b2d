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
#   bin/dtypeprobe            which element types the library builds indexes
#                             of (internal/gputest/dtypeprobe): run.sh runs it
#                             first, to tell "library lacks dtype X" from a
#                             real failure
#   bin/cbench                examples/serving's C twin (make cbench), for
#                             its TestGoAndCAgree ($CUVS_GO_CBENCH)
#   bin/readme-program        the README's quick-start program, for
#                             examples/quickstart's TestReadmeProgram
#                             ($CUVS_GO_README_PROGRAM)
#
# The bundle needs nothing of the module's sources: it runs from any folder
# on the GPU machine.
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
# Symbol table and DWARF left out by default (stack traces keep their file
# and line: those come from pclntab): the binaries are what travels to the
# GPU machine, and -s -w halves them. GPU_TEST_LDFLAGS= keeps them whole.
ldflags=${GPU_TEST_LDFLAGS--s -w}
cd "$root"
module=$(go list -m)
rm -rf "$out"
mkdir -p "$out"
: >"$out/packages.txt"
for pkg in $pkgs; do
	path=$(go list "$pkg")
	# A package with no test files has nothing to run (go test -c writes
	# no binary for it): leave it out, saying so.
	if [ "$(go list -f '{{len .TestGoFiles}}{{len .XTestGoFiles}}' "$pkg")" = 00 ]; then
		echo "build.sh: $path has no test files: left out" >&2
		continue
	fi
	dir=$(echo "${path#"$module"/}" | tr / _)
	src=$(go list -f '{{.Dir}}' "$pkg")
	mkdir -p "$out/$dir"
	if [ -d "$src/testdata" ]; then
		cp -R "$src/testdata" "$out/$dir/testdata"
	fi
	# A package whose tests read the module's sources (the doc tables of
	# safe/internal/doctables) lists them in gputest-sources, one glob
	# relative to the module's root a line (test files left out): they go to
	# testdata/module/.
	if [ -f "$src/gputest-sources" ]; then
		(cd "$root" && for glob in $(cat "$src/gputest-sources"); do
			for f in $glob; do
				[ -f "$f" ] || continue
				case $f in *_test.go) continue ;; esac
				mkdir -p "$out/$dir/testdata/module/$(dirname "$f")"
				cp "$f" "$out/$dir/testdata/module/$f"
			done
		done)
	fi
	for v in $variants; do
		case $v in
		race) go test -c -race -ldflags="$ldflags" -o "$out/$dir/race.test" "$pkg" ;;
		cgocheck2) GOEXPERIMENT=cgocheck2 go test -c -ldflags="$ldflags" -o "$out/$dir/cgocheck2.test" "$pkg" ;;
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
if [ ! -s "$out/packages.txt" ]; then
	echo "build.sh: no package with tests among: $pkgs" >&2
	exit 1
fi
# What the tests need besides their binaries (above), for a machine without
# Go, a C compiler or the module's sources.
mkdir -p "$out/bin" build
go build -o "$out/bin/dtypeprobe" ./internal/gputest/dtypeprobe
${CC:-cc} -std=gnu11 -O2 -Wall -Wextra -Igenerated internal/cbench/csrc/cbench.c -o "$out/bin/cbench" -pthread -ldl
# The README's first ```go block that starts with "package main", built in a
# folder of this module so that its imports resolve here.
readme=$(mktemp -d "$root/build/gputest-readme.XXXXXX")
trap 'rm -rf "$readme"' EXIT
awk 'p && /^```$/ { exit } p { print } /^```go$/ { getline; if ($0 == "package main") { p = 1; print } }' README.md >"$readme/main.go"
if ! grep -q '^package main$' "$readme/main.go"; then
	echo "build.sh: README.md: no \`\`\`go block with package main" >&2
	exit 1
fi
go build -o "$out/bin/readme-program" "./build/$(basename "$readme")"
cp internal/gputest/run.sh "$out/run.sh"
chmod +x "$out/run.sh"
echo "built $out: copy it to the GPU machine and run '$out/run.sh /path/to/libcuvs_c.so' there"
