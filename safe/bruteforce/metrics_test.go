package bruteforce_test

import (
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/bruteforce"
)

// checkMetric searches data (rows × d, Go memory) for qs with metric m and
// checks every returned distance against safetest.RefDistance of its row, and that
// the j-th returned distance is the j-th best of all rows (ties and the
// GPU's float rounding may order rows differently from Go).
func checkMetric(t *testing.T, res *safe.Resources, m safe.Metric, data, qs []float32, d, k int, tol float64) {
	t.Helper()
	const p = 3
	ds, err := dlpack.NewHostMatrix(data, len(data)/d, d)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := bruteforce.Build(res, ds, &bruteforce.BuildParams{Metric: m, MetricArg: p})
	if err != nil {
		t.Fatalf("%v: %v", m, err)
	}
	defer idx.Close()
	r, err := bruteforce.SearchSlice(res, idx, qs, k, nil)
	if err != nil {
		t.Fatalf("%v: %v", m, err)
	}
	n := len(data) / d
	for qi := 0; qi < len(qs)/d; qi++ {
		q := qs[qi*d : (qi+1)*d]
		all := make([]float64, n)
		for i := range all {
			all[i] = safetest.RefDistance(m, p, q, data[i*d:(i+1)*d])
		}
		slices.Sort(all)
		if m == safe.InnerProduct {
			slices.Reverse(all)
		}
		for j := 0; j < k; j++ {
			id := r.Neighbors[qi*k+j]
			if id < 0 || id >= int64(n) {
				t.Fatalf("%v: query %d slot %d: id %d", m, qi, j, id)
			}
			got := float64(r.Distances[qi*k+j])
			want := safetest.RefDistance(m, p, q, data[int(id)*d:(int(id)+1)*d])
			e := tol * math.Max(1, math.Abs(want))
			if math.Abs(got-want) > e || math.Abs(got-all[j]) > e {
				t.Fatalf("%v: query %d slot %d: row %d at %v; its distance is %v, the slot's best %v", m, qi, j, id, got, want, all[j])
			}
		}
	}
}

// Brute force computes the 16 metrics of package distance (cuVS's dense
// pairwise distance, which its search runs on), JensenShannon and
// KLDivergence among them, as package distance defines them.
func TestMetrics(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	const n, d, nq, k = 200, 8, 6, 5
	// positive rows summing to 1: every metric is defined on them
	data := safetest.Random(21, n+nq, d)
	for i := 0; i < n+nq; i++ {
		var s float32
		for j := range d {
			data[i*d+j] = float32(math.Abs(float64(data[i*d+j]))) + 0.05
			s += data[i*d+j]
		}
		for j := range d {
			data[i*d+j] /= s
		}
	}
	for _, m := range []safe.Metric{
		safe.L2Expanded, safe.L2SqrtExpanded, safe.CosineExpanded, safe.L1, safe.L2Unexpanded,
		safe.L2SqrtUnexpanded, safe.InnerProduct, safe.Linf, safe.Canberra, safe.LpUnexpanded,
		safe.CorrelationExpanded, safe.HellingerExpanded, safe.JensenShannon, safe.HammingUnexpanded,
		safe.KLDivergence, safe.RusselRaoExpanded,
	} {
		checkMetric(t, res, m, data[:n*d], data[n*d:], d, k, 2e-3)
	}
}

// Haversine takes rows of (latitude, longitude) in radians and returns the
// central angle in radians; other shapes, and more than 1024 neighbors
// (cuVS's haversine_knn keeps no more), are refused before any C call.
func TestHaversine(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	const n, nq = 1100, 7
	geo := safetest.Random(22, n+nq, 2)
	for i := 0; i < n+nq; i++ {
		geo[2*i] *= 1.5   // latitude in (−1.5, 1.5)
		geo[2*i+1] *= 3.1 // longitude in (−3.1, 3.1)
	}
	checkMetric(t, res, safe.Haversine, geo[:2*n], geo[2*n:], 2, 10, 1e-4)

	flat, _ := dlpack.NewHostMatrix(safetest.Random(23, 10, 3), 10, 3)
	safetest.Refused(t, "3 columns", "dataset", "Haversine", func() error {
		_, err := bruteforce.Build(res, flat, &bruteforce.BuildParams{Metric: safe.Haversine})
		return err
	})
	ds, _ := dlpack.NewHostMatrix(geo[:2*n], n, 2)
	idx, err := bruteforce.Build(res, ds, &bruteforce.BuildParams{Metric: safe.Haversine})
	if err != nil {
		t.Fatal(err)
	}
	defer idx.Close()
	safetest.Refused(t, "k 1025", "neighbors", "at most 1024", func() error {
		_, err := bruteforce.SearchSlice(res, idx, geo[2*n:], 1025, nil)
		return err
	})
	if _, err := bruteforce.SearchSlice(res, idx, geo[2*n:], 1024, nil); err != nil {
		t.Fatalf("k 1024: %v", err)
	}
}

// The metrics cuVS's brute-force search throws on (its dense pairwise
// distance lacks them) are refused by Build, before any C call.
func TestUnsearchableMetrics(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	ds, _ := dlpack.NewHostMatrix(safetest.Random(24, 10, 4), 10, 4)
	for _, m := range []safe.Metric{safe.BrayCurtis, safe.JaccardExpanded, safe.DiceExpanded, safe.BitwiseHamming} {
		safetest.Refused(t, m.String(), "params.Metric", m.String(), func() error {
			idx, err := bruteforce.Build(res, ds, &bruteforce.BuildParams{Metric: m})
			if err == nil {
				idx.Close()
			}
			return err
		})
	}
}

// A HellingerExpanded or KLDivergence search rewrites the index's dataset in
// place while it runs (cuVS takes square roots or logarithms and undoes
// them afterwards; Hellinger rewrites the queries too): concurrent searches
// of one index, from goroutines with their own Resources and one shared
// query matrix, still find the rows a lone search finds, and the caller's
// queries are not written, not even by a rounding.
func TestRewritingMetricsConcurrently(t *testing.T) {
	safetest.Check(t)
	const n, d, nq, k, workers, rounds = 400, 16, 8, 5, 6, 12
	data := safetest.Random(25, n+nq, d)
	for i := range data {
		// in (0.05, 0.95): no element is 1, which KL divergence would turn into 0
		data[i] = 0.05 + 0.9*float32(math.Abs(float64(data[i])))/(1+float32(math.Abs(float64(data[i]))))
	}
	res := safetest.Resources(t)
	for _, m := range []safe.Metric{safe.HellingerExpanded, safe.KLDivergence} {
		ds, err := safe.DeviceMatrixFrom(res, data[:n*d], n, d)
		if err != nil {
			t.Fatal(err)
		}
		idx, err := bruteforce.Build(res, ds, &bruteforce.BuildParams{Metric: m})
		if err != nil {
			t.Fatal(err)
		}
		qs := slices.Clone(data[n*d:])
		q, err := safe.DeviceMatrixFrom(res, qs, nq, d)
		if err != nil {
			t.Fatal(err)
		}
		// best[qi*k+j]: the j-th smallest reference distance of query qi.
		best := make([]float64, nq*k)
		for qi := range nq {
			all := make([]float64, n)
			for i := range all {
				all[i] = safetest.RefDistance(m, 2, qs[qi*d:(qi+1)*d], data[i*d:(i+1)*d])
			}
			slices.Sort(all)
			copy(best[qi*k:(qi+1)*k], all[:k])
		}
		// check: every slot holds a row at the slot's reference distance (a
		// search rewriting another's rewrite lands far off).
		check := func(ids []int64) error {
			for x, id := range ids {
				if id < 0 || id >= n {
					return fmt.Errorf("%v: slot %d: id %d", m, x, id)
				}
				qi := x / k
				got := safetest.RefDistance(m, 2, qs[qi*d:(qi+1)*d], data[int(id)*d:(int(id)+1)*d])
				if math.Abs(got-best[x]) > 2e-3*math.Max(1, math.Abs(best[x])) {
					return fmt.Errorf("%v: query %d slot %d: row %d at %v, the slot's best is %v", m, qi, x%k, id, got, best[x])
				}
			}
			return nil
		}
		var wg sync.WaitGroup
		errs := make(chan error, workers)
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r, err := safe.NewResources()
				if err != nil {
					errs <- err
					return
				}
				defer r.Close()
				nb, err := safe.NewDeviceMatrix[int64](r, nq, k)
				if err != nil {
					errs <- err
					return
				}
				defer nb.Close()
				dist, err := safe.NewDeviceMatrix[float32](r, nq, k)
				if err != nil {
					errs <- err
					return
				}
				defer dist.Close()
				for range rounds {
					if err := idx.Search(r, q, nb, dist, nil); err != nil {
						errs <- err
						return
					}
					got, err := nb.ToHost(r)
					if err != nil {
						errs <- err
						return
					}
					if err := check(got); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		after, err := q.ToHost(res)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(after, qs) {
			t.Errorf("%v: the search wrote into the caller's queries", m)
		}
		for _, c := range []interface{ Close() error }{q, idx, ds} {
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
}
