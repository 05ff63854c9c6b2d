package multigpu_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/cagra"
	"github.com/cuvs-go/cuvs/safe/ivfpq"
	"github.com/cuvs-go/cuvs/safe/multigpu"
)

// injected checks that err is the *safe.Error of the fault armed on fn.
func injected(t *testing.T, fn string, err error) {
	t.Helper()
	var se *safe.Error
	if !errors.As(err, &se) || !strings.Contains(se.Text, "injected "+fn) {
		t.Fatalf("fault in %s: got %v", fn, err)
	}
}

// A failure of each C call is returned as a *safe.Error, frees what was made
// (the double's counters balance at the end) and leaves the index usable.
func TestFaults(t *testing.T) {
	ctl := safetest.Double(t, "fault injection")
	safetest.Check(t)
	res := mres(t, 2)
	data, qs := safetest.Random(20, rows, dim), safetest.Random(21, nq, dim)
	ip, sp := allProbes(4)
	path := filepath.Join(t.TempDir(), "mg.bin")
	single := filepath.Join(t.TempDir(), "single.bin")
	idx, err := multigpu.BuildIVFFlat(res, host(t, data, rows), &multigpu.IVFFlatIndexParams{Base: ip})
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, idx)
	if err := idx.Serialize(res, path); err != nil {
		t.Fatal(err)
	}
	writeSingleIVFFlat(t, data, single)
	search := func() error {
		_, err := idx.SearchK(res, &multigpu.IVFFlatSearchParams{Base: sp}, host(t, qs, nq), k)
		return err
	}
	build := func() error {
		i, err := multigpu.BuildIVFFlat(res, host(t, data, rows), &multigpu.IVFFlatIndexParams{Base: ip})
		if err == nil {
			_ = i.Close()
		}
		return err
	}
	load := func(f func(*multigpu.Resources, string, ...safe.DeserializeOption) (*multigpu.IVFFlatIndex, error), p string) func() error {
		return func() error {
			i, err := f(res, p)
			if err == nil {
				_ = i.Close()
			}
			return err
		}
	}
	for _, c := range []struct {
		fn string
		op func() error
	}{
		{"cuvsMultiGpuResourcesCreate", func() error { r, err := multigpu.NewResources(); closeIf(r); return err }},
		{"cuvsMultiGpuResourcesCreateWithDeviceIds", func() error { r, err := multigpu.NewResources(multigpu.WithDevices(1, 0)); closeIf(r); return err }},
		{"cuvsMultiGpuResourcesSetMemoryPool", func() error { r, err := multigpu.NewResources(multigpu.WithMemoryPool(50)); closeIf(r); return err }},
		{"cuvsMultiGpuIvfFlatIndexCreate", build},
		{"cuvsMultiGpuIvfFlatIndexParamsCreate", build},
		{"cuvsIvfFlatIndexParamsCreate", build}, // inside cuvsMultiGpuIvfFlatIndexParamsCreate
		{"cuvsMultiGpuIvfFlatBuild", build},
		{"cuvsMultiGpuIvfFlatSearchParamsCreate", search},
		{"cuvsMultiGpuIvfFlatSearch", search},
		{"cuvsMultiGpuIvfFlatExtend", func() error { return idx.Extend(res, host(t, qs[:2*dim], 2), nil) }},
		{"cuvsMultiGpuIvfFlatSerialize", func() error { return idx.Serialize(res, path) }},
		{"cuvsMultiGpuIvfFlatDeserialize", load(multigpu.DeserializeIVFFlat, path)},
		{"cuvsMultiGpuIvfFlatDistribute", load(multigpu.DistributeIVFFlat, single)},
	} {
		rowsBefore := idx.Rows()
		ctl.FailNext(c.fn, "injected "+c.fn)
		injected(t, c.fn, c.op())
		if ctl.PendingFaults() != 0 {
			t.Fatalf("%s: the fault was not reached", c.fn)
		}
		if idx.Rows() != rowsBefore {
			t.Fatalf("%s: a failed call changed Rows to %d", c.fn, idx.Rows())
		}
		if err := c.op(); err != nil {
			t.Fatalf("%s: after the fault: %v", c.fn, err)
		}
	}
	// Close: a failed destroy keeps the index; the next Close frees it.
	other, err := multigpu.BuildIVFFlat(res, host(t, data, rows), &multigpu.IVFFlatIndexParams{Base: ip})
	if err != nil {
		t.Fatal(err)
	}
	ctl.FailNext("cuvsMultiGpuIvfFlatIndexDestroy", "injected cuvsMultiGpuIvfFlatIndexDestroy")
	injected(t, "cuvsMultiGpuIvfFlatIndexDestroy", other.Close())
	if err := other.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := multigpu.NewResources()
	if err != nil {
		t.Fatal(err)
	}
	ctl.FailNext("cuvsMultiGpuResourcesDestroy", "injected cuvsMultiGpuResourcesDestroy")
	injected(t, "cuvsMultiGpuResourcesDestroy", r.Close())
	if err := r.Close(); err != nil {
		t.Fatalf("Close after a failed destroy: %v", err)
	}
}

// The CAGRA and IVF-PQ paths: each C call of build and search fails cleanly.
func TestFaultsCagraIVFPQ(t *testing.T) {
	ctl := safetest.Double(t, "fault injection")
	safetest.Check(t)
	res := mres(t, 2)
	data, qs := safetest.Random(22, rows, dim), safetest.Random(23, nq, dim)
	cp, err := cagra.DefaultIndexParams()
	if err != nil {
		t.Fatal(err)
	}
	cp.GraphDegree, cp.IntermediateGraphDegree = 8, 16
	pp, err := ivfpq.DefaultIndexParams()
	if err != nil {
		t.Fatal(err)
	}
	pp.NLists, pp.PQDim = 4, dim
	ops := map[string]func() error{
		"cagra": func() error {
			i, err := multigpu.BuildCagra(res, host(t, data, rows), &multigpu.CagraIndexParams{Base: &cp})
			if err != nil {
				return err
			}
			defer i.Close()
			_, err = i.SearchK(res, nil, host(t, qs, nq), k)
			if err != nil {
				return err
			}
			// no Extend: refused before C (TestCagraExtendAndRoundTrip)
			return i.Serialize(res, filepath.Join(t.TempDir(), "c.bin"))
		},
		"ivfpq": func() error {
			i, err := multigpu.BuildIVFPQ(res, host(t, data, rows), &multigpu.IVFPQIndexParams{Base: &pp})
			if err != nil {
				return err
			}
			defer i.Close()
			_, err = i.SearchK(res, nil, host(t, qs, nq), k)
			if err != nil {
				return err
			}
			if err := i.Extend(res, host(t, qs[:2*dim], 2), nil); err != nil {
				return err
			}
			return i.Serialize(res, filepath.Join(t.TempDir(), "p.bin"))
		},
	}
	for _, c := range []struct{ algo, fn string }{
		{"cagra", "cuvsMultiGpuCagraIndexCreate"},
		{"cagra", "cuvsMultiGpuCagraIndexParamsCreate"},
		{"cagra", "cuvsCagraIndexParamsCreate"},
		{"cagra", "cuvsMultiGpuCagraBuild"},
		{"cagra", "cuvsMultiGpuCagraSearchParamsCreate"},
		{"cagra", "cuvsMultiGpuCagraSearch"},
		{"cagra", "cuvsMultiGpuCagraSerialize"},
		{"ivfpq", "cuvsMultiGpuIvfPqIndexCreate"},
		{"ivfpq", "cuvsMultiGpuIvfPqIndexParamsCreate"},
		{"ivfpq", "cuvsIvfPqIndexParamsCreate"},
		{"ivfpq", "cuvsMultiGpuIvfPqBuild"},
		{"ivfpq", "cuvsMultiGpuIvfPqSearchParamsCreate"},
		{"ivfpq", "cuvsMultiGpuIvfPqSearch"},
		{"ivfpq", "cuvsMultiGpuIvfPqExtend"},
		{"ivfpq", "cuvsMultiGpuIvfPqSerialize"},
	} {
		ctl.FailNext(c.fn, "injected "+c.fn)
		injected(t, c.fn, ops[c.algo]())
		if ctl.PendingFaults() != 0 {
			t.Fatalf("%s: the fault was not reached", c.fn)
		}
		if err := ops[c.algo](); err != nil {
			t.Fatalf("%s: after the fault: %v", c.fn, err)
		}
	}
}

func closeIf(r *multigpu.Resources) {
	if r != nil {
		_ = r.Close()
	}
}

var _ = dlpack.Float32
