package doctables_test

import (
	"math"
	"strings"
	"testing"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/bruteforce"
	"github.com/cuvs-go/cuvs/safe/cagra"
	"github.com/cuvs-go/cuvs/safe/distance"
	"github.com/cuvs-go/cuvs/safe/hnsw"
	"github.com/cuvs-go/cuvs/safe/ivfflat"
	"github.com/cuvs-go/cuvs/safe/ivfpq"
	"github.com/cuvs-go/cuvs/safe/ivfsq"
)

const (
	nRows = 300
	dim   = 8
)

// formula returns the function of the table's distance cell (nil where the
// cell has no formula of q and x) and whether it is approximate.
func formula(cell string) (func(q, x []float32) float64, bool) {
	approx := strings.HasPrefix(cell, "≈ ")
	cell = strings.TrimPrefix(cell, "≈ ")
	f, _, _ := strings.Cut(cell, ", ")
	var ip = func(q, x []float32) (s float64) {
		for i := range q {
			s += float64(q[i]) * float64(x[i])
		}
		return s
	}
	sq := func(q, x []float32) (s float64) {
		for i := range q {
			d := float64(q[i]) - float64(x[i])
			s += d * d
		}
		return s
	}
	switch strings.TrimSpace(f) {
	case "‖q−x‖²":
		return sq, approx
	case "‖q−x‖":
		return func(q, x []float32) float64 { return math.Sqrt(sq(q, x)) }, approx
	case "⟨q,x⟩":
		return ip, approx
	case "1 − ⟨q,x⟩ (hnswlib's)":
		return func(q, x []float32) float64 { return 1 - ip(q, x) }, approx
	case "−cos(q,x)":
		return func(q, x []float32) float64 { return -ip(q, x) / math.Sqrt(ip(q, q)*ip(x, x)) }, approx
	case "1 − cos(q,x)":
		return func(q, x []float32) float64 { return 1 - ip(q, x)/math.Sqrt(ip(q, q)*ip(x, x)) }, approx
	case "Σ|q−x|":
		return func(q, x []float32) (s float64) {
			for i := range q {
				s += math.Abs(float64(q[i]) - float64(x[i]))
			}
			return s
		}, approx
	}
	return nil, approx
}

// search is a package's one-query search of a tiny index for one metric:
// the nearest row's id and distance.
type search func(t *testing.T, res *safe.Resources, data []float32, q []float32, m safe.Metric) (int64, float32, error)

func devMatrix(t *testing.T, res *safe.Resources, data []float32) *safe.DeviceMatrix[float32] {
	t.Helper()
	d, err := safe.NewDeviceMatrix[float32](res, len(data)/dim, dim)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	if err := d.CopyFromHost(res, data); err != nil {
		t.Fatal(err)
	}
	return d
}

func first(r *safe.Results, err error) (int64, float32, error) {
	if err != nil {
		return 0, 0, err
	}
	return r.Neighbors[0], r.Distances[0], nil
}

var searches = map[string]search{
	"bruteforce": func(t *testing.T, res *safe.Resources, data, q []float32, m safe.Metric) (int64, float32, error) {
		p, err := bruteforce.DefaultBuildParams()
		if err != nil {
			return 0, 0, err
		}
		p.Metric = m
		idx, err := bruteforce.Build(res, devMatrix(t, res, data), &p)
		if err != nil {
			return 0, 0, err
		}
		defer idx.Close()
		return first(bruteforce.SearchSlice(res, idx, q, 1, nil))
	},
	"cagra": func(t *testing.T, res *safe.Resources, data, q []float32, m safe.Metric) (int64, float32, error) {
		idx, err := cagraIndex(res, data, m)
		if err != nil {
			return 0, 0, err
		}
		defer idx.Close()
		return first(cagra.SearchSlice(res, idx, nil, q, 1, nil))
	},
	"ivfflat": func(t *testing.T, res *safe.Resources, data, q []float32, m safe.Metric) (int64, float32, error) {
		p, err := ivfflat.DefaultIndexParams()
		if err != nil {
			return 0, 0, err
		}
		p.Metric, p.NLists = m, 4
		idx, err := ivfflat.Build(res, devMatrix(t, res, data), &p)
		if err != nil {
			return 0, 0, err
		}
		defer idx.Close()
		sp, err := ivfflat.DefaultSearchParams()
		if err != nil {
			return 0, 0, err
		}
		sp.NProbes = 4
		return first(ivfflat.SearchSlice(res, idx, &sp, q, 1, nil))
	},
	"ivfpq": func(t *testing.T, res *safe.Resources, data, q []float32, m safe.Metric) (int64, float32, error) {
		p, err := ivfpq.DefaultIndexParams()
		if err != nil {
			return 0, 0, err
		}
		p.Metric, p.NLists, p.PQDim, p.PQBits = m, 4, dim, 8
		idx, err := ivfpq.Build(res, devMatrix(t, res, data), &p)
		if err != nil {
			return 0, 0, err
		}
		defer idx.Close()
		sp, err := ivfpq.DefaultSearchParams()
		if err != nil {
			return 0, 0, err
		}
		sp.NProbes = 4
		return first(ivfpq.SearchSlice(res, idx, &sp, q, 1))
	},
	"ivfsq": func(t *testing.T, res *safe.Resources, data, q []float32, m safe.Metric) (int64, float32, error) {
		p, err := ivfsq.DefaultIndexParams()
		if err != nil {
			return 0, 0, err
		}
		p.Metric, p.NLists = m, 4
		idx, err := ivfsq.Build(res, devMatrix(t, res, data), &p)
		if err != nil {
			return 0, 0, err
		}
		defer idx.Close()
		sp, err := ivfsq.DefaultSearchParams()
		if err != nil {
			return 0, 0, err
		}
		sp.NProbes = 4
		return first(ivfsq.SearchSlice(res, idx, &sp, q, 1, nil))
	},
	"hnsw": func(t *testing.T, res *safe.Resources, data, q []float32, m safe.Metric) (int64, float32, error) {
		ci, err := cagraIndex(res, data, m)
		if err != nil {
			return 0, 0, err
		}
		defer ci.Close()
		p, err := hnsw.DefaultIndexParams()
		if err != nil {
			return 0, 0, err
		}
		p.Hierarchy = hnsw.HierarchyCPU
		idx, err := hnsw.FromCagra(res, ci, &p)
		if err != nil {
			return 0, 0, err
		}
		defer idx.Close()
		sp, err := hnsw.DefaultSearchParams()
		if err != nil {
			return 0, 0, err
		}
		sp.Ef = nRows
		ids, d := make([]uint64, 1), make([]float32, 1)
		im, err := dlpack.NewHostMatrix(ids, 1, 1)
		if err != nil {
			return 0, 0, err
		}
		dm, err := dlpack.NewHostMatrix(d, 1, 1)
		if err != nil {
			return 0, 0, err
		}
		qm, err := dlpack.NewHostMatrix(q, 1, dim)
		if err != nil {
			return 0, 0, err
		}
		err = idx.Search(res, &sp, qm, im, dm)
		return int64(ids[0]), d[0], err
	},
	// distance: the distance of the query to row 0 (no search).
	"distance": func(t *testing.T, res *safe.Resources, data, q []float32, m safe.Metric) (int64, float32, error) {
		d, err := distance.PairwiseSlice(res, q, data[:dim], dim, m, 2)
		if err != nil {
			return 0, 0, err
		}
		return 0, d[0], nil
	},
}

func cagraIndex(res *safe.Resources, data []float32, m safe.Metric) (*cagra.Index, error) {
	p, err := cagra.DefaultIndexParams()
	if err != nil {
		return nil, err
	}
	p.Metric, p.GraphDegree, p.IntermediateGraphDegree = m, 16, 32
	p.BuildAlgo = cagra.NNDescent
	ds, err := dlpack.NewHostMatrix(data, len(data)/dim, dim)
	if err != nil {
		return nil, err
	}
	return cagra.Build(res, ds, &p)
}

// For each package and metric of the Distances table that has a formula,
// a tiny index searched for one query returns, for its nearest row, the
// table's distance of the query to that row (within float32 rounding, or
// 5% for the approximate ones). Cells of other packages are checked by
// those packages' own tests.
func TestDistanceFormulas(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	data := safetest.Random(7, nRows, dim)
	for i := range data {
		data[i] = float32(math.Abs(float64(data[i]))) + 0.05 // positive: every metric defined
	}
	q := make([]float32, dim)
	for i := range q {
		q[i] = data[5*dim+i] * 1.1
	}
	checked := 0
	for _, r := range table(t, "Distances") {
		s := searches[r.pkg]
		f, approx := formula(r.cells[1])
		if s == nil || f == nil {
			continue
		}
		for _, name := range strings.Split(r.cells[0], ", ") {
			var m safe.Metric
			for m = safe.L2Expanded; m.Valid() && m.String() != name; m++ {
			}
			t.Run(r.pkg+"/"+name, func(t *testing.T) {
				id, got, err := s(t, res, data, q, m)
				if err != nil {
					t.Fatalf("%v", err)
				}
				if id < 0 || id >= nRows {
					t.Fatalf("id %d", id)
				}
				want := f(q, data[id*dim:(id+1)*dim])
				tol := 1e-4 * math.Max(1, math.Abs(want))
				if approx {
					tol = 0.05 * math.Max(1, math.Abs(want))
				}
				if math.Abs(float64(got)-want) > tol {
					t.Errorf("row %d: distance %v, the table's formula %q gives %v", id, got, r.cells[1], want)
				}
			})
			checked++
		}
	}
	if checked < 25 {
		t.Errorf("%d cells checked", checked)
	}
}

// The Distances table's bruteforce rows are exactly the metrics brute force
// searches: each one listed searches a tiny index (Haversine, whose row
// asks for 2-column rows, is left to package bruteforce's tests), and each
// one missing is refused, by the package or by cuVS.
func TestBruteForceMetricsAsTable(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	data := safetest.Random(8, nRows, dim)
	for i := range data {
		data[i] = float32(math.Abs(float64(data[i]))) + 0.05
	}
	q := data[3*dim : 4*dim]
	listed := map[safe.Metric]bool{}
	for _, r := range table(t, "Distances") {
		if r.pkg != "bruteforce" {
			continue
		}
		for _, name := range strings.Split(r.cells[0], ", ") {
			for m := safe.L2Expanded; m.Valid(); m++ {
				if m.String() == name {
					listed[m] = !strings.Contains(r.cells[1], "2-column rows")
				}
			}
		}
	}
	for m := safe.L2Expanded; m.Valid(); m++ {
		plain, ok := listed[m] // plain: searchable on tiny rows of dim columns
		if ok && !plain {
			continue
		}
		_, _, err := searches["bruteforce"](t, res, data, q, m)
		if ok && err != nil {
			t.Errorf("%v, listed: %v", m, err)
		} else if !ok && err == nil {
			t.Errorf("%v, not listed: searched", m)
		}
	}
}
