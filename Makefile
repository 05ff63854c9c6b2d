# cuvs-go: the main job is `make generate`, the tests are `make test`.

GO ?= go
STATICCHECK ?= $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2
BENCHSTAT ?= $(GO) run golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da
# Where the cuVS / DLPack headers are (optional; see README and gen/README.md): CUVS_INCLUDE_DIR
# may list one tree per release, separated by ':', with CUVS_VERSION=v26.06.00,v26.08.01 in order.
CUVS_INCLUDE_DIR ?=
DLPACK_INCLUDE_DIR ?=
export CUVS_INCLUDE_DIR DLPACK_INCLUDE_DIR

.PHONY: stress all generate check-generated coverage test test-all test-slow test-race test-cgocheck test-conformance test-conformance-all double lint fmt bench gpu-interop gpu-test gpu-test-pack gpu-test-double fuzz clean

all: generate test

## generate: regenerate generated/ from the headers, or from the committed models generated/api/v*.json (one per release) when none are found
generate:
	$(GO) run ./gen

## check-generated: fail if generated/ is not what the generator produces
check-generated:
	$(GO) run ./gen -check

## coverage: every C function of each release and the Go API reaching it; fails on one not wrapped (multi-GPU ones are pending)
coverage:
	$(GO) run ./gen coverage

## test: lint, check generated/, the coverage report (every C function wrapped), then every test under -race against the 26.06 double and under cgocheck2 against the 26.08 double; CI adds test-conformance and gpu-test-double (conformance mode, each release once); test-all runs every pass against both releases
test: lint check-generated coverage test-race test-cgocheck

# Each go test step's own bound, well above its measured time on a loaded
# 2-core machine, so that the go command's default of 10 minutes per
# package never ends a slow but healthy run (README: "The two commands").
TEST_TIMEOUT ?= 40m
# The passes split the packages (measured on a 2-core machine, README):
# - the race pass runs everything but the double's own tests
#   (internal/cuvsdouble: its C code is not the race detector's to see, and
#   its Go harness took 270 s of the pass's 390 under -race, 16 s without);
# - the cgocheck2 pass checks cgo's pointer rules at run time: it leaves
#   out the generator (pure Go), runs the packages whose tests load
#   libcuvs_c (CONFORMANCE_PKGS) against the 26.08 double, and the rest
#   (the double's own tests, dlpack, the loader: written for the default
#   26.06 double) as they are; cbench, which speaks both releases, runs
#   against the 26.08 double here (the race pass runs it against 26.06).
ALL_PKGS = $(shell $(GO) list ./... | sed 's|^github.com/cuvs-go/cuvs|.|')
RACE_PKGS = $(filter-out ./internal/cuvsdouble,$(ALL_PKGS))
CGO_OTHER_PKGS = $(filter-out $(CONFORMANCE_PKGS) ./internal/cbench ./gen ./gen/%,$(ALL_PKGS))

test-race:
	CUVSDOUBLE_RELEASE=26.06 $(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) $(RACE_PKGS)

# The two halves run side by side (one go command each, both on every
# core): one after the other, the second waited for the first's slowest
# package. The double's fitted filter table (TestCagraFilterTable, 141 s of
# the double's 154) is left to test-slow, which CI runs.
test-cgocheck:
	@CUVSDOUBLE_RELEASE=26.08 GOEXPERIMENT=cgocheck2 $(GO) test -count=1 -timeout $(TEST_TIMEOUT) $(CONFORMANCE_PKGS) ./internal/cbench & a=$$!; \
	  GOEXPERIMENT=cgocheck2 $(GO) test -count=1 -timeout $(TEST_TIMEOUT) -skip '^TestCagraFilterTable$$' $(CGO_OTHER_PKGS) & b=$$!; \
	  wait $$a; ra=$$?; wait $$b; rb=$$?; \
	  if [ $$ra -ne 0 ] || [ $$rb -ne 0 ]; then echo "test-cgocheck: failed (26.08 packages: exit $$ra; the rest: exit $$rb)"; exit 1; fi

## test-slow: what make test leaves out for time, CI runs it: the double's filtered CAGRA recall against the real library's table (TestCagraFilterTable, about 2.5 minutes on 2 cores); tiered's Deletes under searches, Extends, Compacts and serializations for 2 minutes under -race (TestTieredDeletes, 1.5 s in make test)
test-slow:
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT) -run '^TestCagraFilterTable$$' ./internal/cuvsdouble
	CUVSDOUBLE_RELEASE=26.06 $(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) -run '^TestTieredDeletes$$' ./internal/stress -stress.deletes 2m

## test-all: the whole matrix, every pass against both releases of the double (what make test splits between them), plus make test's lint and checks
test-all: lint check-generated coverage
	$(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) ./...
	CUVSDOUBLE_RELEASE=26.08 $(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) $(CONFORMANCE_PKGS) ./internal/cbench
	GOEXPERIMENT=cgocheck2 $(GO) test -count=1 -timeout $(TEST_TIMEOUT) ./...
	CUVSDOUBLE_RELEASE=26.08 GOEXPERIMENT=cgocheck2 $(GO) test -count=1 -timeout $(TEST_TIMEOUT) $(CONFORMANCE_PKGS) ./internal/cbench
	$(MAKE) test-conformance-all

# The packages whose tests load libcuvs_c (those whose tests import internal/safetest).
CONFORMANCE_PKGS ?= $(shell $(GO) list -f '{{.ImportPath}} {{join .TestImports " "}} {{join .XTestImports " "}}' ./... | \
  awk '$$1 !~ /internal\/bench$$/ { for (i = 2; i <= NF; i++) if ($$i ~ /internal\/safetest$$/) { sub("^github.com/cuvs-go/cuvs", ".", $$1); print $$1; next } }')
# The double is built once per cuVS release of the window, each its own libcuvs_c
# (that release's functions, layouts, semantics and cuvsVersionGet). DOUBLE, the
# library serving-smoke and gpu-test-double run against, is the 26.06 one.
DOUBLE_2606 := $(CURDIR)/build/double/v26.06/libcuvs_c.so
DOUBLE_2608 := $(CURDIR)/build/double/v26.08/libcuvs_c.so
DOUBLE := $(DOUBLE_2606)

# The conformance pass against the 26.08 double can leave out packages or
# tests that still wait for a per-release path (none now). Each run prints
# what it leaves out.
CONFORMANCE_2608_WAIT_PKGS :=
CONFORMANCE_2608_SKIP :=
CONFORMANCE_2608_PKGS = $(filter-out $(CONFORMANCE_2608_WAIT_PKGS),$(CONFORMANCE_PKGS))

## double: build the ABI test double as a library of its own, per release: build/double/v26.06/libcuvs_c.so and build/double/v26.08/libcuvs_c.so
double:
	$(GO) run ./internal/cuvsdouble/cmd/cuvsdouble-build -release 26.06 -o $(DOUBLE_2606)
	$(GO) run ./internal/cuvsdouble/cmd/cuvsdouble-build -release 26.08 -o $(DOUBLE_2608)

## test-conformance: the tests of the packages that load libcuvs_c, against the freshly built 26.08 double loaded as any library would be (CUVS_TEST_LIBRARY: what needs the double's controls skips); .ci/run's gpu-test-double runs them against the 26.06 one, test-conformance-all against both here
test-conformance: double
	@echo "conformance against the 26.08 double: waiting for the safe layer, left out: packages $(CONFORMANCE_2608_WAIT_PKGS); tests $(CONFORMANCE_2608_SKIP)"
	CUVS_TEST_LIBRARY=$(DOUBLE_2608) $(GO) test -count=1 -timeout $(TEST_TIMEOUT) $(if $(CONFORMANCE_2608_SKIP),-skip '$(CONFORMANCE_2608_SKIP)') $(CONFORMANCE_2608_PKGS)

test-conformance-all: double
	CUVS_TEST_LIBRARY=$(DOUBLE_2606) $(GO) test -count=1 -timeout $(TEST_TIMEOUT) $(CONFORMANCE_PKGS)
	@echo "conformance against the 26.08 double: waiting for the safe layer, left out: packages $(CONFORMANCE_2608_WAIT_PKGS); tests $(CONFORMANCE_2608_SKIP)"
	CUVS_TEST_LIBRARY=$(DOUBLE_2608) $(GO) test -count=1 -timeout $(TEST_TIMEOUT) $(if $(CONFORMANCE_2608_SKIP),-skip '$(CONFORMANCE_2608_SKIP)') $(CONFORMANCE_2608_PKGS)

## gpu-test: build, here, test binaries (race and cgocheck2) of those packages, the programs their tests run (bin/: dtype probe, cbench, the README's program) and run.sh into build/gpu-test, for a GPU machine with libcuvs and no Go (nor this repository): build/gpu-test/run.sh /path/to/libcuvs_c.so
gpu-test:
	sh internal/gputest/build.sh build/gpu-test $(CONFORMANCE_PKGS)

## gpu-test-pack: the gpu-test bundle (cgocheck2 variant, stripped; GPU_TEST_VARIANTS picks) packed into build/gpu-test.tar.xz, at most 40 MiB, to carry to the GPU machine beside a libcuvs_c build; there, internal/gputest/real.sh build/gpu-test.tar.xz RELEASE_DIR... runs it against each (see internal/gputest/real.sh)
gpu-test-pack:
	sh internal/gputest/pack.sh build/gpu-test.tar.xz $(CONFORMANCE_PKGS)

## gpu-test-double: the whole gpu-test bundle, copied out of the repository (as to a GPU machine) and run there against the double; a wrong library path refused. On failure its logs land in build/gpu-test-logs
gpu-test-double: double gpu-test
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && cp -R build/gpu-test "$$tmp/" && cd "$$tmp" && \
	  if ! ./gpu-test/run.sh $(DOUBLE); then \
	    rm -rf $(CURDIR)/build/gpu-test-logs; cp -R gpu-test/logs $(CURDIR)/build/gpu-test-logs; exit 1; fi; \
	  if ./gpu-test/run.sh nowhere/libcuvs_c.so 2>missing.txt; then echo "run.sh accepted a missing library"; exit 1; fi; \
	  grep -qx "library not found: nowhere/libcuvs_c.so" missing.txt || { echo "run.sh, missing library:"; cat missing.txt; exit 1; }

## lint: gofmt, go vet, staticcheck
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(STATICCHECK) ./...

fmt:
	gofmt -w $$(git ls-files '*.go')

## bench: the cost of a call through the bindings against the floor, of building from a Go slice, of the generator (with CUVS_INCLUDE_DIR): one table (BENCHMARKS.md)
BENCH_PKGS ?= ./internal/bench ./dlpack ./gen
BENCH_COUNT ?= 6
BENCH_TIME ?= 0.5s
bench:
	$(GO) test -run '^$$' -bench . -benchmem -count $(BENCH_COUNT) -benchtime $(BENCH_TIME) $(BENCH_PKGS) 2>&1 | tee bench.out
	@! grep -Eq '^(FAIL|--- FAIL|panic:)' bench.out || { echo "make bench: a benchmark failed (bench.out)"; exit 1; }
	@echo; $(BENCHSTAT) -format csv bench.out 2>/dev/null | $(GO) run ./internal/bench/benchtable

## gpu-interop: build, on this machine, what the GPU machine runs to check DLPack interop with PyTorch and CuPy
gpu-interop:
	sh dlpack/gpu/build.sh build/gpu-interop

## stress: the mixed-load stress test (internal/stress) for STRESS_TIME (default 1m), under -race
STRESS_TIME ?= 1m
stress:
	$(GO) test -race -count=1 -run '^TestStress$$' -timeout 0 ./internal/stress -stress.time $(STRESS_TIME) -v

## fuzz: run the fuzzers for a while (their corpora are kept under testdata/fuzz)
fuzz:
	$(GO) test -run '^$$' -fuzz FuzzFromRawParts -fuzztime 30s ./dlpack
	$(GO) test -run '^$$' -fuzz FuzzReadScalar -fuzztime 30s ./safe/internal/npy
	$(GO) test -run '^$$' -fuzz FuzzWalk -fuzztime 30s ./safe/internal/npy
	$(GO) test -run '^$$' -fuzz FuzzPQLayout -fuzztime 30s ./safe/ivfpq
	$(GO) test -run '^$$' -fuzz FuzzAPI -fuzztime 30s ./gen/internal/emit
	$(GO) test -run '^$$' -fuzz FuzzSearchParams -fuzztime 30s ./safe/cagra
	$(GO) test -run '^$$' -fuzz FuzzParams -fuzztime 30s ./safe/ivfpq

clean:
	rm -rf build bench.out

## serving: build the Go serving benchmark (examples/serving) into build/serving, for a GPU machine with libcuvs
serving:
	$(GO) build -o build/serving ./examples/serving

## cbench: build the same workload in C (internal/cbench; it dlopens libcuvs_c at run time) into build/cbench
cbench:
	@mkdir -p build
	$(CC) -std=gnu11 -O2 -Wall -Wextra -Igenerated internal/cbench/csrc/cbench.c -o build/cbench -pthread -ldl

## serving-pack: serving and cbench into build/serving-pack, to carry to a GPU machine beside a libcuvs_c build; there, examples/serving/gpu-table.sh build/serving-pack RELEASE... prints the serving table (C and Go per-call on single-CTA, Go per-call on multi-CTA, Go batched; 1 to 1,024 callers)
serving-pack: serving cbench
	@mkdir -p build/serving-pack
	cp build/serving build/cbench build/serving-pack/

## device-pack: the open issues' GPU benchmarks (serving tenants, bfbitmap, tiered, hnswlib) into build/device-pack(.tar.xz), to carry to a GPU machine beside one libcuvs_c build; there, device-pack/device-run.sh RELEASE... runs them (internal/gputest/device-pack.sh)
device-pack:
	sh internal/gputest/device-pack.sh build/device-pack

.PHONY: device-pack

## serving-smoke: both programs side by side (compare.sh) against the ABI test double: the numbers mean nothing
serving-smoke: serving cbench double
	SERVING=$(CURDIR)/build/serving CBENCH=$(CURDIR)/build/cbench OUT=$(CURDIR)/build/serving-smoke \
	  sh examples/serving/compare.sh -lib $(DOUBLE) \
	  -n 2000 -dim 32 -k 10 -itopk 32 -graph-degree 16 -goroutines 1,2,4 -seconds 0.2

.PHONY: serving cbench serving-pack serving-smoke
