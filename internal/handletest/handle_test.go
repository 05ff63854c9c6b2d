package handletest

import (
	"bytes"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/bruteforce"
	"github.com/cuvs-go/cuvs/safe/cagra"
	"github.com/cuvs-go/cuvs/safe/hnsw"
	"github.com/cuvs-go/cuvs/safe/ivfflat"
	"github.com/cuvs-go/cuvs/safe/ivfpq"
	"github.com/cuvs-go/cuvs/safe/ivfsq"
	"github.com/cuvs-go/cuvs/safe/kmeans"
	"github.com/cuvs-go/cuvs/safe/multigpu"
	"github.com/cuvs-go/cuvs/safe/nndescent"
	"github.com/cuvs-go/cuvs/safe/pca"
	"github.com/cuvs-go/cuvs/safe/quantize"
	"github.com/cuvs-go/cuvs/safe/tiered"
	"github.com/cuvs-go/cuvs/safe/vamana"
)

const rows, dim, nq, k = 500, 16, 4, 5

// closer closes what a case built: the object checked and whatever else
// frees the handles it reaches (a Prepared's index).
type closer func() error

// build is a case's constructor: it returns the object checked and its
// closer; everything it made besides is closed at the end of t.
type build func(t *testing.T, res *safe.Resources) (any, closer)

// TestNoFreedHandleAfterClose builds one object of every safe type that
// holds a cuVS handle, records the handles it reaches, closes it, and
// fails if a field the GC scans still holds one of them.
//
// Left out, holding no handle in any field (TestNoHandleHeld checks it):
// kmeans.Model (Go slices and *kmeans.Params, a Go struct), pca.Model (Go
// slices), quantize.Scalar (two floats); kmeans.Params and pca.Params are
// Go values too (their C params live for one call). multigpu.Resources
// holds a CuvsResources_t, which HandleWords does not count (resources are
// safe's, checked by safe's own tests).
func TestNoFreedHandleAfterClose(t *testing.T) {
	cases := []struct {
		name  string
		build build
	}{
		{"bruteforce.Index", func(t *testing.T, res *safe.Resources) (any, closer) {
			idx := bfIndex(t, res)
			return idx, idx.Close
		}},
		{"bruteforce.Prepared", func(t *testing.T, res *safe.Resources) (any, closer) {
			idx := bfIndex(t, res)
			q, n, d := searchBuffers(t, res)
			p, err := idx.Prepare(q, n, d, nil)
			must(t, err)
			return p, both(p.Close, idx.Close)
		}},
		{"cagra.Index", func(t *testing.T, res *safe.Resources) (any, closer) {
			idx := cagraIndex(t, res)
			return idx, idx.Close
		}},
		{"cagra.Index (exact path)", func(t *testing.T, res *safe.Resources) (any, closer) {
			// A filtered search on the exact path keeps a brute-force
			// index of the dataset with the CAGRA index until Close.
			idx := cagraIndex(t, res)
			f := filter(t, res, rows/2)
			_, err := cagra.SearchSlice(res, idx, &cagra.SearchParams{FilterPath: safe.FilterExact}, safetest.Random(2, nq, dim), k, f)
			must(t, err)
			return idx, idx.Close
		}},
		{"cagra.Index (Merge)", func(t *testing.T, res *safe.Resources) (any, closer) {
			a, b := cagraIndex(t, res), cagraIndex(t, res)
			idx, err := cagra.Merge(res, cagraParams(t), []*cagra.Index{a, b}, nil)
			must(t, err)
			safetest.Close(t, idx)
			return idx, idx.Close
		}},
		{"cagra.Index (DeserializeFrom)", func(t *testing.T, res *safe.Resources) (any, closer) {
			var buf bytes.Buffer
			_, err := cagraIndex(t, res).SerializeTo(res, &buf)
			must(t, err)
			idx, err := cagra.DeserializeFrom(res, &buf)
			must(t, err)
			safetest.Close(t, idx)
			return idx, idx.Close
		}},
		{"cagra.Prepared", func(t *testing.T, res *safe.Resources) (any, closer) {
			idx := cagraIndex(t, res)
			q, n, d := searchBuffers(t, res)
			p, err := idx.Prepare(nil, q, n, d, nil)
			must(t, err)
			return p, both(p.Close, idx.Close)
		}},
		{"ivfflat.Index", func(t *testing.T, res *safe.Resources) (any, closer) {
			idx := ivfflatIndex(t, res)
			return idx, idx.Close
		}},
		{"ivfflat.Prepared", func(t *testing.T, res *safe.Resources) (any, closer) {
			idx := ivfflatIndex(t, res)
			q, n, d := searchBuffers(t, res)
			p, err := idx.Prepare(&ivfflat.SearchParams{NProbes: 4}, q, n, d, nil)
			must(t, err)
			return p, both(p.Close, idx.Close)
		}},
		{"ivfpq.Index", func(t *testing.T, res *safe.Resources) (any, closer) {
			idx := ivfpqIndex(t, res)
			return idx, idx.Close
		}},
		{"ivfpq.Prepared", func(t *testing.T, res *safe.Resources) (any, closer) {
			idx := ivfpqIndex(t, res)
			q, n, d := searchBuffers(t, res)
			p, err := idx.Prepare(&ivfpq.SearchParams{NProbes: 4}, q, n, d)
			must(t, err)
			return p, both(p.Close, idx.Close)
		}},
		{"ivfpq.Filtered", func(t *testing.T, res *safe.Resources) (any, closer) {
			// With the dataset, NewFiltered builds a brute-force index of
			// its own (the exact path), destroyed by Close.
			idx := ivfpqIndex(t, res)
			f, err := idx.NewFiltered(res, nil, filter(t, res, rows/2), dataset(t, res, 1, rows), nq, k)
			must(t, err)
			return f, both(f.Close, idx.Close)
		}},
		{"ivfsq.Index", func(t *testing.T, res *safe.Resources) (any, closer) {
			idx := ivfsqIndex(t, res)
			return idx, idx.Close
		}},
		{"ivfsq.Prepared", func(t *testing.T, res *safe.Resources) (any, closer) {
			idx := ivfsqIndex(t, res)
			q, n, d := searchBuffers(t, res)
			p, err := idx.Prepare(&ivfsq.SearchParams{NProbes: 4}, q, n, d, nil)
			must(t, err)
			return p, both(p.Close, idx.Close)
		}},
		{"hnsw.Index", func(t *testing.T, res *safe.Resources) (any, closer) {
			p, err := hnsw.DefaultIndexParams()
			must(t, err)
			p.M, p.EfConstruction = 16, 64
			idx, err := hnsw.Build(res, host(t, safetest.Random(1, rows, dim), rows), &p)
			must(t, err)
			safetest.Close(t, idx)
			return idx, idx.Close
		}},
		{"nndescent.Index", func(t *testing.T, res *safe.Resources) (any, closer) {
			p, err := nndescent.DefaultIndexParams()
			must(t, err)
			p.GraphDegree, p.IntermediateGraphDegree = 16, 32
			idx, err := nndescent.Build(res, dataset(t, res, 1, rows), &p)
			must(t, err)
			safetest.Close(t, idx)
			return idx, idx.Close
		}},
		{"vamana.Index", func(t *testing.T, res *safe.Resources) (any, closer) {
			p, err := vamana.DefaultIndexParams()
			must(t, err)
			idx, err := vamana.Build(res, dataset(t, res, 1, rows), &p)
			must(t, err)
			safetest.Close(t, idx)
			return idx, idx.Close
		}},
		{"tiered.Index", func(t *testing.T, res *safe.Resources) (any, closer) {
			idx := tieredIndex(t, res)
			return idx, idx.Close
		}},
		{"tiered.Searcher", func(t *testing.T, res *safe.Resources) (any, closer) {
			// No Close of its own: it reaches its index's handles, freed
			// by the index's Close.
			idx := tieredIndex(t, res)
			return tiered.NewSearcher(idx, nil), idx.Close
		}},
		{"quantize.Binary", func(t *testing.T, res *safe.Resources) (any, closer) {
			q, err := quantize.TrainBinary(res, host(t, safetest.Random(1, rows, dim), rows), nil)
			must(t, err)
			safetest.Close(t, q)
			return q, q.Close
		}},
		{"quantize.PQ", func(t *testing.T, res *safe.Resources) (any, closer) {
			q, err := quantize.BuildPQ(res, host(t, safetest.Random(1, rows, dim), rows), &quantize.PQParams{PQBits: 4, PQDim: 4,
				UseSubspaces: true, KMeansNIters: 3, KMeansType: quantize.KMeansBalanced, MaxTrainPointsPerPQCode: 256})
			must(t, err)
			safetest.Close(t, q)
			return q, q.Close
		}},
		{"multigpu.CagraIndex", func(t *testing.T, _ *safe.Resources) (any, closer) {
			mr := mgResources(t)
			idx, err := multigpu.BuildCagra(mr, host(t, safetest.Random(1, rows, dim), rows), &multigpu.CagraIndexParams{Base: cagraParams(t)})
			must(t, err)
			safetest.Close(t, idx)
			return idx, idx.Close
		}},
		{"multigpu.IVFFlatIndex", func(t *testing.T, _ *safe.Resources) (any, closer) {
			mr := mgResources(t)
			idx, err := multigpu.BuildIVFFlat(mr, host(t, safetest.Random(1, rows, dim), rows), &multigpu.IVFFlatIndexParams{Base: ivfflatParams(t)})
			must(t, err)
			safetest.Close(t, idx)
			return idx, idx.Close
		}},
		{"multigpu.IVFPQIndex", func(t *testing.T, _ *safe.Resources) (any, closer) {
			mr := mgResources(t)
			idx, err := multigpu.BuildIVFPQ(mr, host(t, safetest.Random(1, rows, dim), rows), &multigpu.IVFPQIndexParams{Base: ivfpqParams(t)})
			must(t, err)
			safetest.Close(t, idx)
			return idx, idx.Close
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			safetest.Check(t)
			res := safetest.Resources(t)
			obj, closeAll := c.build(t, res)
			closed := false
			t.Cleanup(func() {
				if !closed {
					_ = closeAll()
				}
			})
			hs := handles(obj)
			if len(hs) == 0 {
				t.Fatalf("%s reaches no cuVS handle: nothing to check", c.name)
			}
			t.Logf("%d handles: %#x", len(hs), hs)
			closed = true
			if err := closeAll(); err != nil {
				t.Fatal(err)
			}
			safetest.CheckNoHandleKept(t, c.name, obj, hs)
		})
	}
}

// TestNoHandleHeld checks the types TestNoFreedHandleAfterClose leaves
// out: built with the library, they hold no cuVS handle in any field.
func TestNoHandleHeld(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	data := safetest.Random(1, rows, dim)
	kp, err := kmeans.DefaultParams()
	must(t, err)
	kp.Clusters = 8
	km, err := kmeans.FitSlice(res, &kp, data, dim, nil, nil)
	must(t, err)
	pp, err := pca.DefaultParams()
	must(t, err)
	pp.Components = 4
	pm, err := pca.Fit(res, &pp, data, dim)
	must(t, err)
	sq, err := quantize.TrainScalar(res, host(t, data, rows), nil)
	must(t, err)
	for name, x := range map[string]any{"kmeans.Model": km, "kmeans.Params": &kp, "pca.Model": pm, "pca.Params": &pp, "quantize.Scalar": &sq} {
		if hs := safetest.HandleWords(x); len(hs) > 0 {
			t.Errorf("%s holds cuVS handles %#x: add it to TestNoFreedHandleAfterClose", name, hs)
		}
	}
}

// handles returns the cuVS handles x reaches (safetest.HandleWords),
// without the search parameters a Prepared or a Filtered keeps in Go
// memory (its *generated.Cuvs...SearchParams fields, "Go memory without
// pointers, read by C"): HandleWords counts them, their type being the
// old pointer form of a search-params handle, but they are Go's, kept
// on purpose.
func handles(x any) []uintptr {
	var goParams []uintptr
	if v := reflect.ValueOf(x); v.Kind() == reflect.Pointer && v.Elem().Kind() == reflect.Struct {
		v = v.Elem()
		for i := range v.NumField() {
			f := v.Field(i)
			if f.Kind() == reflect.Pointer && !f.IsNil() && f.Type().Elem().PkgPath() == "github.com/cuvs-go/cuvs/generated" &&
				strings.HasSuffix(f.Type().Elem().Name(), "SearchParams") {
				goParams = append(goParams, f.Pointer())
			}
		}
	}
	return slices.DeleteFunc(safetest.HandleWords(x), func(a uintptr) bool { return slices.Contains(goParams, a) })
}

// must fails t on err, or skips it when the loaded library refuses the
// call as not of its release.
func must(t *testing.T, err error) {
	t.Helper()
	switch {
	case err == nil:
	case errors.Is(err, safe.ErrNotInRelease), errors.Is(err, safe.ErrMissingSymbol):
		t.Skipf("refused by the loaded library (release %s): %v", safe.Release(), err)
	default:
		t.Fatal(err)
	}
}

// both closes a, then b; their errors are joined.
func both(a, b closer) closer {
	return func() error { return errors.Join(a(), b()) }
}

func host(t *testing.T, data []float32, n int) *dlpack.HostMatrix[float32] {
	t.Helper()
	m, err := dlpack.NewHostMatrix(data, n, len(data)/n)
	must(t, err)
	return m
}

// dataset returns n random rows (seed) in device memory, closed at the
// end of t.
func dataset(t *testing.T, res *safe.Resources, seed uint64, n int) *safe.DeviceMatrix[float32] {
	t.Helper()
	m, err := safe.DeviceMatrixFrom(res, safetest.Random(seed, n, dim), n, dim)
	must(t, err)
	safetest.Close(t, m)
	return m
}

// searchBuffers returns device queries, neighbours (int64) and distances
// for a Prepare of nq queries for k neighbours.
func searchBuffers(t *testing.T, res *safe.Resources) (q *safe.DeviceMatrix[float32], n *safe.DeviceMatrix[int64], d *safe.DeviceMatrix[float32]) {
	t.Helper()
	q = dataset(t, res, 2, nq)
	n, err := safe.NewDeviceMatrix[int64](res, nq, k)
	must(t, err)
	safetest.Close(t, n)
	d, err = safe.NewDeviceMatrix[float32](res, nq, k)
	must(t, err)
	safetest.Close(t, d)
	return q, n, d
}

// filter returns a bitset filter allowing the first allowed rows.
func filter(t *testing.T, res *safe.Resources, allowed int) *safe.Filter {
	t.Helper()
	words := make([]uint32, (rows+31)/32)
	for i := range allowed {
		words[i/32] |= 1 << (i % 32)
	}
	f, err := safe.NewBitsetFilter(res, rows, words)
	must(t, err)
	safetest.Close(t, f)
	return f
}

func bfIndex(t *testing.T, res *safe.Resources) *bruteforce.Index {
	t.Helper()
	idx, err := bruteforce.Build(res, dataset(t, res, 1, rows), nil)
	must(t, err)
	safetest.Close(t, idx)
	return idx
}

func cagraParams(t *testing.T) *cagra.IndexParams {
	t.Helper()
	p, err := cagra.DefaultIndexParams()
	must(t, err)
	p.GraphDegree, p.IntermediateGraphDegree = 16, 32
	return &p
}

// cagraIndex builds from device rows: on 26.08 the index holds a
// CuvsDataset_t (a view of them) besides its own handle.
func cagraIndex(t *testing.T, res *safe.Resources) *cagra.Index {
	t.Helper()
	idx, err := cagra.Build(res, dataset(t, res, 1, rows), cagraParams(t))
	must(t, err)
	safetest.Close(t, idx)
	return idx
}

func ivfflatParams(t *testing.T) *ivfflat.IndexParams {
	t.Helper()
	p, err := ivfflat.DefaultIndexParams()
	must(t, err)
	p.NLists = 8
	return &p
}

func ivfflatIndex(t *testing.T, res *safe.Resources) *ivfflat.Index {
	t.Helper()
	idx, err := ivfflat.Build(res, dataset(t, res, 1, rows), ivfflatParams(t))
	must(t, err)
	safetest.Close(t, idx)
	return idx
}

func ivfpqParams(t *testing.T) *ivfpq.IndexParams {
	t.Helper()
	p, err := ivfpq.DefaultIndexParams()
	must(t, err)
	p.NLists, p.PQDim = 8, 8
	return &p
}

func ivfpqIndex(t *testing.T, res *safe.Resources) *ivfpq.Index {
	t.Helper()
	idx, err := ivfpq.Build(res, dataset(t, res, 1, rows), ivfpqParams(t))
	must(t, err)
	safetest.Close(t, idx)
	return idx
}

func ivfsqIndex(t *testing.T, res *safe.Resources) *ivfsq.Index {
	t.Helper()
	p, err := ivfsq.DefaultIndexParams()
	must(t, err)
	p.NLists = 8
	idx, err := ivfsq.Build(res, dataset(t, res, 1, rows), &p)
	must(t, err)
	safetest.Close(t, idx)
	return idx
}

// tieredIndex builds an ANN (CAGRA) tier over the rows, extends the fresh
// tier (a brute-force index of its own) and runs a selective filtered
// search (the ANN rows' brute-force index, made on first use).
func tieredIndex(t *testing.T, res *safe.Resources) *tiered.Index {
	t.Helper()
	p, err := tiered.DefaultIndexParams()
	must(t, err)
	p.Backend, p.MinANNRows = tiered.CAGRA, 100
	p.CAGRA = tiered.CAGRAParams{GraphDegree: 16, IntermediateGraphDegree: 32}
	idx, err := tiered.Build(res, dataset(t, res, 1, rows-20), &p)
	must(t, err)
	safetest.Close(t, idx)
	must(t, idx.Extend(res, host(t, safetest.Random(3, 20, dim), 20)))
	_, err = tiered.SearchSlice(res, idx, nil, safetest.Random(2, nq, dim), k, filter(t, res, 3))
	must(t, err)
	return idx
}

// mgResources returns multi-GPU resources on device 0, or skips t when
// the loaded library lacks the multi-GPU functions (a libcuvs_c built
// without them: safe/multigpu's tests skip likewise).
func mgResources(t *testing.T) *multigpu.Resources {
	t.Helper()
	for _, f := range generated.Missing() {
		if strings.HasPrefix(f, "cuvsMultiGpu") {
			t.Skipf("library lacks multi-GPU: %s of release %s is missing", f, generated.Release())
		}
	}
	r, err := multigpu.NewResources(multigpu.WithDevices(0))
	must(t, err)
	safetest.Close(t, r)
	return r
}
