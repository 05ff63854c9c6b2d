package safe_test

import (
	"errors"
	"testing"
	"unsafe"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/bruteforce"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
)

// errorsFixture is a brute-force index and a search's device tensors.
type errorsFixture struct {
	res                         *safe.Resources
	dataset, queries, distances *safe.DeviceMatrix[float32]
	neighbors                   *safe.DeviceMatrix[int64]
	idx                         *bruteforce.Index
}

func newErrorsFixture(t *testing.T) *errorsFixture {
	t.Helper()
	const rows, dim, nq, k = 40, 4, 3, 2
	f := &errorsFixture{res: safetest.Resources(t)}
	var err error
	if f.dataset, err = safe.DeviceMatrixFrom(f.res, safetest.Random(1, rows, dim), rows, dim); err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, f.dataset)
	if f.queries, err = safe.DeviceMatrixFrom(f.res, safetest.Random(2, nq, dim), nq, dim); err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, f.queries)
	if f.neighbors, err = safe.NewDeviceMatrix[int64](f.res, nq, k); err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, f.neighbors)
	if f.distances, err = safe.NewDeviceMatrix[float32](f.res, nq, k); err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, f.distances)
	if f.idx, err = bruteforce.Build(f.res, f.dataset, nil); err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, f.idx)
	return f
}

// TestErrorChains proves each promise of safe's package doc about errors
// with errors.Is and errors.As, never by matching text.
func TestErrorChains(t *testing.T) {
	safetest.Check(t)
	f := newErrorsFixture(t)

	t.Run("closed query matrix: ErrExpired through the ArgError", func(t *testing.T) {
		q, err := safe.DeviceMatrixFrom(f.res, safetest.Random(3, 3, 4), 3, 4)
		if err != nil {
			t.Fatal(err)
		}
		if err := q.Close(); err != nil {
			t.Fatal(err)
		}
		err = f.idx.Search(f.res, q, f.neighbors, f.distances, nil)
		var ae *safe.ArgError
		if !errors.Is(err, dlpack.ErrExpired) || !errors.Is(err, safe.ErrInvalidArgument) || !errors.As(err, &ae) || ae.Arg != "queries" {
			t.Errorf("got %v (%T), want an *ArgError for queries wrapping dlpack.ErrExpired", err, err)
		}
	})

	t.Run("tensors held by a Prepared: ErrBorrowed and *BorrowedError", func(t *testing.T) {
		p, err := f.idx.Prepare(f.queries, f.neighbors, f.distances, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		err = f.idx.Search(f.res, f.queries, f.neighbors, f.distances, nil)
		var be *dlpack.BorrowedError
		if !errors.Is(err, dlpack.ErrBorrowed) || !errors.As(err, &be) || !errors.Is(err, safe.ErrInvalidArgument) {
			t.Errorf("got %v (%T), want an *ArgError wrapping a *dlpack.BorrowedError", err, err)
		}
	})

	t.Run("dataset retained by the index: Close refuses with *BorrowedError", func(t *testing.T) {
		err := f.dataset.Close()
		var be *dlpack.BorrowedError
		if !errors.Is(err, dlpack.ErrBorrowed) || !errors.As(err, &be) {
			t.Errorf("got %v (%T), want a *dlpack.BorrowedError", err, err)
		}
	})

	t.Run("closed resources: ErrClosed", func(t *testing.T) {
		res, err := safe.NewResources()
		if err != nil {
			t.Fatal(err)
		}
		if err := res.Close(); err != nil {
			t.Fatal(err)
		}
		if err := res.Sync(); !errors.Is(err, safe.ErrClosed) {
			t.Errorf("Sync on closed resources: %v, want ErrClosed", err)
		}
		if err := f.idx.Search(res, f.queries, f.neighbors, f.distances, nil); !errors.Is(err, safe.ErrClosed) {
			t.Errorf("Search on closed resources: %v, want ErrClosed", err)
		}
	})

	t.Run("dlpack's refusals: ErrInvalidArgument", func(t *testing.T) {
		buf := make([]float32, 8)
		_, neg := dlpack.NewHostMatrix(buf, -2, 4)
		_, rank := dlpack.FromRawParts(unsafe.Pointer(&buf[0]), dlpack.HostDevice, []int64{2, 4}, []int64{4}, dlpack.Float32)
		for _, err := range []error{neg, rank} {
			var de *dlpack.Error
			if !errors.Is(err, safe.ErrInvalidArgument) || !errors.As(err, &de) || errors.Is(err, safe.ErrCuvs) {
				t.Errorf("got %v (%T), want a *dlpack.Error that is safe.ErrInvalidArgument", err, err)
			}
		}
	})

	t.Run("bad argument: ErrInvalidArgument and *ArgError", func(t *testing.T) {
		_, err := safe.NewDeviceMatrix[float32](f.res, -1, 2)
		var ae *safe.ArgError
		if !errors.Is(err, safe.ErrInvalidArgument) || !errors.As(err, &ae) || ae.Arg != "rows" || errors.Is(err, safe.ErrCuvs) {
			t.Errorf("got %v (%T), want an *ArgError for rows", err, err)
		}
	})
}

// TestOutOfMemory: an allocation failure inside cuVS is an *Error that
// satisfies both ErrCuvs and ErrOutOfMemory; another failure only ErrCuvs.
func TestOutOfMemory(t *testing.T) {
	ctl := safetest.Double(t, "injecting allocation failures")
	safetest.Check(t)
	res := safetest.Resources(t)
	for _, text := range []string{
		"std::bad_alloc: out_of_memory: CUDA error at: /rmm/cuda_memory_resource.hpp:60: cudaErrorMemoryAllocation out of memory",
		"std::bad_alloc: out_of_memory: RMM failure at:/rmm/pool_memory_resource.hpp:250: Maximum pool size exceeded (failed to allocate 1024 bytes)",
	} {
		ctl.FailNext("cuvsRMMAlloc", text)
		_, err := safe.NewDeviceMatrix[float32](res, 4, 4)
		var ce *safe.Error
		if !errors.Is(err, safe.ErrOutOfMemory) || !errors.Is(err, safe.ErrCuvs) || !errors.As(err, &ce) || ce.Func != "cuvsRMMAlloc" {
			t.Errorf("%q: got %v (%T), want an *Error from cuvsRMMAlloc with ErrOutOfMemory", text, err, err)
		}
	}
	ctl.FailNext("cuvsRMMAlloc", "RAFT failure at file=/x.cpp line=1: something else")
	if _, err := safe.NewDeviceMatrix[float32](res, 4, 4); !errors.Is(err, safe.ErrCuvs) || errors.Is(err, safe.ErrOutOfMemory) {
		t.Errorf("another failure: %v, want ErrCuvs and not ErrOutOfMemory", err)
	}
}

// TestReasonFormats: both of RAFT's location prefixes are stripped.
func TestReasonFormats(t *testing.T) {
	for text, want := range map[string]string{
		"RAFT failure at file=/a/b.cpp line=12: queries should have device compatible memory\nObtained 3 stack frames": "queries should have device compatible memory",
		"exception occurred! file=/a/b.cuh line=7: Cannot search a CAGRA index that is stored on disk.\n#0 in x":       "Cannot search a CAGRA index that is stored on disk.",
		"CUDA error encountered at: file=/a/c.cu line=3: call='cudaMalloc', Reason=cudaErrorMemoryAllocation":          "call='cudaMalloc', Reason=cudaErrorMemoryAllocation",
		"plain text": "plain text",
	} {
		if got := kit.Reason(text); got != want {
			t.Errorf("Reason(%q) = %q, want %q", text, got, want)
		}
	}
}
