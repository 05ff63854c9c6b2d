# cuvs-go: the main job is `make generate`, the tests are `make test`.

GO ?= go
STATICCHECK ?= $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2
BENCHSTAT ?= $(GO) run golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da
# Where the cuVS / DLPack headers are (optional; see README).
CUVS_INCLUDE_DIR ?=
DLPACK_INCLUDE_DIR ?=
export CUVS_INCLUDE_DIR DLPACK_INCLUDE_DIR

.PHONY: all generate check-generated test test-race test-cgocheck lint fmt bench gpu-interop fuzz clean

all: generate test

## generate: regenerate generated/ from the headers, or from generated/api.json when none are found
generate:
	$(GO) run ./gen

## check-generated: fail if generated/ is not what the generator produces
check-generated:
	$(GO) run ./gen -check

## test: lint, check generated/, then every test under -race and under cgocheck2
test: lint check-generated test-race test-cgocheck

test-race:
	$(GO) test -race -count=1 ./...

test-cgocheck:
	GOEXPERIMENT=cgocheck2 $(GO) test -count=1 ./...

## lint: gofmt, go vet, staticcheck
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(STATICCHECK) ./...

fmt:
	gofmt -w $$(git ls-files '*.go')

## bench: Go benchmarks with allocations
bench:
	$(GO) test -run '^$$' -bench . -benchmem -count 6 ./... | tee bench.out
	$(BENCHSTAT) bench.out

## gpu-interop: build, on this machine, what the GPU machine runs to check DLPack interop with PyTorch and CuPy
gpu-interop:
	sh dlpack/gpu/build.sh build/gpu-interop

## fuzz: run the fuzzers for a while (their corpora are kept under testdata/fuzz)
fuzz:
	$(GO) test -run '^$$' -fuzz FuzzFromRawParts -fuzztime 30s ./dlpack
	$(GO) test -run '^$$' -fuzz FuzzReadScalar -fuzztime 30s ./safe/internal/npy

clean:
	rm -rf build bench.out
