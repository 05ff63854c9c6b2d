package cagra_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/cagra"
)

// Valid and Trim recognise the sentinels the real library writes in slots
// it could not fill.
func TestSentinels(t *testing.T) {
	if cagra.SentinelID != 2147483647 || float32(cagra.SentinelDistance) != 3.4028235e+38 {
		t.Fatalf("sentinels %d, %g", cagra.SentinelID, float32(cagra.SentinelDistance))
	}
	if !cagra.Valid(uint32(0)) || cagra.Valid(uint32(cagra.SentinelID)) || cagra.Valid(int64(cagra.SentinelID)) || !cagra.Valid(int64(5)) {
		t.Error("Valid")
	}
	ids := []int64{4, 9, int64(cagra.SentinelID), int64(cagra.SentinelID)}
	d := []float32{1, 2, cagra.SentinelDistance, cagra.SentinelDistance}
	gi, gd := cagra.Trim(ids, d)
	if !slices.Equal(gi, []int64{4, 9}) || !slices.Equal(gd, []float32{1, 2}) {
		t.Errorf("Trim = %v %v", gi, gd)
	}
	if gi, gd := cagra.Trim([]uint32{1, 2}, nil); len(gi) != 2 || gd != nil {
		t.Errorf("Trim of a full row = %v %v", gi, gd)
	}
}

// A selective filter takes the exact path: the true nearest allowed rows,
// sentinels past the allowed count, in uint32 and int64 neighbors, through
// Search and Prepared alike. On the real library graph search returned only
// the query's own row for such filters.
func TestExactFilter(t *testing.T) {
	f := setup(t)
	idx := build(t, f.res, f.dataset, params(t))
	for _, c := range []struct {
		name    string
		allowed []int64
		below   float64
	}{
		{"3 allowed, fewer than k", []int64{3, 77, 150}, 0},
		{"none allowed", nil, 0},
		{"50 allowed, threshold 0.5", func() []int64 {
			var a []int64
			for i := int64(0); i < rows; i += 4 {
				a = append(a, i)
			}
			return a
		}(), 0.5},
	} {
		t.Run(c.name, func(t *testing.T) {
			filter, err := safe.NewBitsetFilterAllowing(f.res, rows, c.allowed)
			if err != nil {
				t.Fatal(err)
			}
			defer filter.Close()
			if filter.Allowed() != len(c.allowed) {
				t.Fatalf("Allowed() = %d, want %d", filter.Allowed(), len(c.allowed))
			}
			ok := func(i int) bool { return slices.Contains(c.allowed, int64(i)) }
			sp := f.sp
			sp.FilterExactBelow = c.below
			for _, run := range []func(nb any) error{
				func(nb any) error {
					switch nb := nb.(type) {
					case *safe.DeviceMatrix[uint32]:
						return idx.Search(f.res, &sp, f.queries, nb, f.dist, filter)
					case *safe.DeviceMatrix[int64]:
						return idx.Search(f.res, &sp, f.queries, nb, f.dist, filter)
					}
					return nil
				},
				func(nb any) error {
					var p *cagra.Prepared
					var err error
					switch nb := nb.(type) {
					case *safe.DeviceMatrix[uint32]:
						p, err = idx.Prepare(&sp, f.queries, nb, f.dist, filter)
					case *safe.DeviceMatrix[int64]:
						p, err = idx.Prepare(&sp, f.queries, nb, f.dist, filter)
					}
					if err != nil {
						return err
					}
					defer p.Close()
					return p.Run(f.res)
				},
			} {
				if err := run(f.n32); err != nil {
					t.Fatal(err)
				}
				checkExactResults(t, f.res, f.n32, f.dist, f.data, f.qs, dim, ok)
				if err := run(f.n64); err != nil {
					t.Fatal(err)
				}
				checkExactResults(t, f.res, f.n64, f.dist, f.data, f.qs, dim, ok)
			}
			// Turned off, the search is CAGRA's graph search: whatever
			// row it returns is allowed.
			sp.FilterExactBelow = -1
			if err := idx.Search(f.res, &sp, f.queries, f.n64, f.dist, filter); err != nil {
				t.Fatal(err)
			}
			if err := f.res.Sync(); err != nil {
				t.Fatal(err)
			}
			got, err := f.n64.ToHost(f.res)
			if err != nil {
				t.Fatal(err)
			}
			for _, id := range got {
				// A slot the graph search could not fill holds SentinelID;
				// any other id is an allowed row.
				if id == int64(cagra.SentinelID) {
					continue
				}
				if id < 0 || id >= rows || !ok(int(id)) {
					t.Fatalf("graph search returned id %d: neither the sentinel nor an allowed row", id)
				}
			}
		})
	}
	sp := f.sp
	sp.FilterExactBelow = 1.5
	if err := idx.Search(f.res, &sp, f.queries, f.n64, f.dist, nil); !isArg(err, "params.FilterExactBelow") {
		t.Errorf("FilterExactBelow 1.5: %v", err)
	}
	for _, p := range []safe.FilterPath{-1, safe.FilterExact + 1} {
		sp := f.sp
		sp.FilterPath = p
		err := idx.Search(f.res, &sp, f.queries, f.n64, f.dist, nil)
		if !isArg(err, "params.FilterPath") || !strings.Contains(err.Error(), "want FilterAuto, FilterIndex or FilterExact") {
			t.Errorf("FilterPath %d: %v, want a refusal naming the valid paths", p, err)
		}
	}
}

// The zero SearchParams searches (its zeros are cuVS's defaults); the
// documented ranges are checked in Go, naming the field.
func TestSearchParamsZeroAndRanges(t *testing.T) {
	f := setup(t)
	idx := build(t, f.res, f.dataset, params(t))
	if err := idx.Search(f.res, &cagra.SearchParams{}, f.queries, f.n64, f.dist, nil); err != nil {
		t.Fatalf("zero SearchParams: %v", err)
	}
	checkResults(t, f.res, f.n64, f.dist, f.data, f.qs, dim, nil)
	for field, set := range map[string]func(*cagra.SearchParams){
		"params.HashmapMaxFillRate":    func(s *cagra.SearchParams) { s.HashmapMaxFillRate = 0.95 },
		"params.ThreadBlockSize":       func(s *cagra.SearchParams) { s.ThreadBlockSize = 100 },
		"params.HashmapMinBitlen":      func(s *cagra.SearchParams) { s.HashmapMinBitlen = 21 },
		"params.PersistentDeviceUsage": func(s *cagra.SearchParams) { s.PersistentDeviceUsage = 1.5 },
		"params.PersistentLifetime":    func(s *cagra.SearchParams) { s.PersistentLifetime = -1 },
		"params.ITopKSize":             func(s *cagra.SearchParams) { s.ITopKSize = 2 }, // below k
		"params.Algo":                  func(s *cagra.SearchParams) { s.Algo = 7 },
		"params.HashmapMode":           func(s *cagra.SearchParams) { s.HashmapMode, s.Algo = cagra.HashSmall, cagra.MultiCTA },
	} {
		sp := f.sp
		set(&sp)
		if err := idx.Search(f.res, &sp, f.queries, f.n64, f.dist, nil); !isArg(err, field) {
			t.Errorf("%s: %v", field, err)
		}
	}
	if cagra.SingleCTA.String() != "SINGLE_CTA" || cagra.HashSmall.String() != "SMALL" || cagra.NNDescent.String() != "NN_DESCENT" {
		t.Errorf("enum names %v %v %v", cagra.SingleCTA, cagra.HashSmall, cagra.NNDescent)
	}
}

// Compression parameters that cuVS would fail on for the dataset's shape are
// refused in Go, naming the field to change.
func TestCompressionRefusals(t *testing.T) {
	f := setup(t)
	def, err := cagra.DefaultCompressionParams()
	if err != nil {
		t.Fatal(err)
	}
	if on2608() {
		p := params(t)
		p.Compression = &def
		_, err := cagra.Build(f.res, f.dataset, &p)
		wantCompressionRefused(t, err)
		return
	}
	for field, set := range map[string]func(*cagra.CompressionParams){
		"params.Compression.PQBits":                   func(c *cagra.CompressionParams) {}, // 256 centers > 200 rows
		"params.Compression.PQDim":                    func(c *cagra.CompressionParams) { c.PQBits, c.PQDim = 4, 3 },
		"params.Compression.VQNCenters":               func(c *cagra.CompressionParams) { c.PQBits, c.VQNCenters = 4, 300 },
		"params.Compression.VQKMeansTrainsetFraction": func(c *cagra.CompressionParams) { c.PQBits, c.VQKMeansTrainsetFraction = 4, 2 },
		"params.Compression.PQKMeansTrainsetFraction": func(c *cagra.CompressionParams) { c.PQBits, c.PQKMeansTrainsetFraction = 4, 0.05 }, // 10 rows for 16 centers
	} {
		c := def
		set(&c)
		p := params(t)
		p.Compression = &c
		if _, err := cagra.Build(f.res, f.dataset, &p); !isArg(err, field) {
			t.Errorf("%s: %v", field, err)
		}
	}
	c := def
	c.PQBits = 4
	p := params(t)
	p.Metric, p.Compression = safe.InnerProduct, &c
	if _, err := cagra.Build(f.res, f.dataset, &p); !isArg(err, "params.Compression") {
		t.Errorf("compression with InnerProduct: %v", err)
	}
}

// The exact path over a dataset whose rows cuVS pads to 16 bytes (3
// float32s): brute force gets a packed copy.
func TestExactFilterPadded(t *testing.T) {
	f := setup(t)
	const n, d = 60, 3
	data := make([]float32, n*d)
	for i := range data {
		data[i] = float32((i*37)%101) / 10
	}
	qs := data[:nq*d]
	p := params(t)
	p.GraphDegree, p.IntermediateGraphDegree = 8, 16
	idx := build(t, f.res, deviceMatrix(t, f.res, data, n, d), p)
	queries := deviceMatrix(t, f.res, qs, nq, d)
	allowed := []int64{1, 20, 59}
	filter, err := safe.NewBitsetFilterAllowing(f.res, n, allowed)
	if err != nil {
		t.Fatal(err)
	}
	defer filter.Close()
	for i := 0; i < 2; i++ { // built once, then reused
		if err := idx.Search(f.res, &f.sp, queries, f.n32, f.dist, filter); err != nil {
			t.Fatal(err)
		}
		checkExactResults(t, f.res, f.n32, f.dist, data, qs, d, func(i int) bool { return slices.Contains(allowed, int64(i)) })
	}
}
