package tiered_test

import (
	"bytes"
	"context"
	"math"
	"path/filepath"
	"slices"
	"testing"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/batch"
	"github.com/cuvs-go/cuvs/safe/tiered"
)

var cagraSearch = &tiered.SearchParams{CAGRA: tiered.CAGRASearchParams{ITopKSize: 128}}

// Issue 29: after an Extend of one row, k = 10 was refused ("exceeds the 1
// rows") and NewSearcher(...).Rows() was 1. Now k goes up to Rows().
func TestKBeyondFreshTier(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	const built = 1000
	data := safetest.Random(20, built+1, dim)
	qs := safetest.Random(21, nq, dim)
	idx, err := tiered.Build(res, device(t, res, data[:built*dim], built), params(t, tiered.CAGRA, 500))
	must(t, err)
	safetest.Close(t, idx)
	must(t, idx.Extend(res, device(t, res, data[built*dim:], 1)))
	got := search(t, res, idx, cagraSearch, qs, k, nil)
	exact := safetest.ExactKNN(data, qs, dim, k, safetest.L2, nil)
	if r := recall(got, exact, k); r < 0.9 {
		t.Errorf("k = %d with 1 fresh row: recall %.3f", k, r)
	}
	self := search(t, res, idx, cagraSearch, data[built*dim:], k, nil)
	if self[0] != built {
		t.Errorf("the fresh row found as %v", self)
	}
	if r := tiered.NewSearcher(idx, nil).Rows(); r != built+1 {
		t.Errorf("Searcher.Rows() = %d, want %d", r, built+1)
	}
	b, err := batch.New[float32, int64](tiered.NewSearcher(idx, cagraSearch), batch.Options{MaxK: k})
	must(t, err)
	defer b.Close()
	br, err := b.Search(context.Background(), data[built*dim:], k)
	must(t, err)
	nb := br.Neighbors
	if nb[0] != built {
		t.Errorf("batched: %v", nb)
	}
	// k = Rows() on a fresh-only index with an ANN-less build: every row.
	small, err := tiered.Build(res, device(t, res, data[:50*dim], 50), params(t, tiered.CAGRA, 100))
	must(t, err)
	safetest.Close(t, small)
	must(t, small.Extend(res, device(t, res, data[50*dim:60*dim], 10)))
	all := search(t, res, small, nil, qs[:dim], 60, nil)
	slices.Sort(all)
	for i, id := range all {
		if id != int64(i) {
			t.Fatalf("k = Rows(): ids %v", all)
		}
	}
}

// Issue 29: a filter was refused while both tiers held rows (cuVS tests the
// fresh row j against bit j). Now each tier gets its own bits, at every
// selectivity, with recall against the exact kNN among the allowed rows.
func TestFilterBothTiers(t *testing.T) {
	for _, b := range []tiered.Backend{tiered.CAGRA, tiered.IVFFlat} {
		t.Run(b.String(), func(t *testing.T) {
			safetest.Check(t)
			res := safetest.Resources(t)
			const built, added = 1500, 300
			rows := built + added
			data := safetest.Random(22, rows, dim)
			qs := safetest.Random(23, nq, dim)
			idx, err := tiered.Build(res, device(t, res, data[:built*dim], built), params(t, b, 1000))
			must(t, err)
			safetest.Close(t, idx)
			must(t, idx.Extend(res, device(t, res, data[built*dim:], added)))
			sp := &tiered.SearchParams{CAGRA: tiered.CAGRASearchParams{ITopKSize: 128}, IVFFlat: tiered.IVFSearchParams{NProbes: 8}}
			for _, every := range []int{2, 3, 10, 100, 600} {
				allow := func(i int) bool { return i%every == 1 }
				var ids []int64
				for i := range rows {
					if allow(i) {
						ids = append(ids, int64(i))
					}
				}
				f, err := safe.NewBitsetFilterAllowing(res, rows, ids)
				must(t, err)
				kk := min(k, len(ids))
				got := search(t, res, idx, sp, qs, kk, f)
				for _, id := range got {
					if !allow(int(id)) {
						t.Fatalf("1 in %d allowed: id %d not allowed", every, id)
					}
				}
				exact := safetest.ExactKNN(data, qs, dim, kk, safetest.L2, allow)
				if r := recall(got, exact, kk); r < 0.9 {
					t.Errorf("1 in %d allowed: recall %.3f", every, r)
				}
				must(t, f.Close())
			}
			// only fresh rows allowed: fresh row j answers for bit built+j
			f, err := safe.NewBitsetFilterAllowing(res, rows, []int64{built + 7})
			must(t, err)
			safetest.Close(t, f)
			got := search(t, res, idx, sp, data[:dim], 1, f)
			if got[0] != built+7 {
				t.Errorf("only id %d allowed, got %d", built+7, got[0])
			}
		})
	}
}

// Unfilled slots hold safe.SentinelID64 with distance +Inf (was -1).
func TestSentinel(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	data := safetest.Random(24, 700, dim)
	idx, err := tiered.Build(res, device(t, res, data[:600*dim], 600), params(t, tiered.CAGRA, 500))
	must(t, err)
	safetest.Close(t, idx)
	must(t, idx.Extend(res, device(t, res, data[600*dim:], 100)))
	f, err := safe.NewBitsetFilterAllowing(res, 700, []int64{3, 650})
	must(t, err)
	safetest.Close(t, f)
	r, err := tiered.SearchSlice(res, idx, nil, data[:dim], 5, f)
	must(t, err)
	want := []int64{3, 650, safe.SentinelID64, safe.SentinelID64, safe.SentinelID64}
	if !slices.Equal(r.Neighbors[:2], want[:2]) && !slices.Equal(r.Neighbors[:2], []int64{650, 3}) || !slices.Equal(r.Neighbors[2:], want[2:]) {
		t.Errorf("neighbors %v, want 3 and 650 then sentinels", r.Neighbors)
	}
	for _, d := range r.Distances[2:] {
		if !math.IsInf(float64(d), 1) {
			t.Errorf("unfilled distance %v", d)
		}
	}
	// the device path writes the same
	got := search(t, res, idx, nil, data[:dim], 5, f)
	if !slices.Equal(got[2:], want[2:]) {
		t.Errorf("device neighbors %v", got)
	}
}

// Build and Extend take Go memory, and refuse non-finite values naming the
// argument; SearchSlice refuses non-finite queries.
func TestGoMemoryAndNonFinite(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	data := safetest.Random(25, 800, dim)
	qs := safetest.Random(26, nq, dim)
	host, err := dlpack.NewHostMatrix(data[:600*dim], 600, dim)
	must(t, err)
	idx, err := tiered.Build(res, host, params(t, tiered.CAGRA, 500))
	must(t, err)
	safetest.Close(t, idx)
	more, err := dlpack.NewHostMatrix(data[600*dim:], 200, dim)
	must(t, err)
	must(t, idx.Extend(res, more))
	r, err := tiered.SearchSlice(res, idx, cagraSearch, qs, k, nil)
	must(t, err)
	exact := safetest.ExactKNN(data, qs, dim, k, safetest.L2, nil)
	if rc := recall(r.Neighbors, exact, k); rc < 0.9 {
		t.Errorf("Go-memory build: recall %.3f", rc)
	}
	bad := slices.Clone(data[:600*dim])
	bad[17*dim+3] = float32(math.NaN())
	bh, _ := dlpack.NewHostMatrix(bad, 600, dim)
	if _, err := tiered.Build(res, bh, nil); !isArg(err, "dataset") {
		t.Errorf("NaN row in Build: %v", err)
	}
	inf := slices.Clone(data[:2*dim])
	inf[dim] = float32(math.Inf(1))
	ih, _ := dlpack.NewHostMatrix(inf, 2, dim)
	if err := idx.Extend(res, ih); !isArg(err, "vectors") {
		t.Errorf("+Inf in Extend: %v", err)
	}
	q := slices.Clone(qs[:dim])
	for _, v := range []float32{float32(math.NaN()), float32(math.Inf(-1))} {
		q[0] = v
		if _, err := tiered.SearchSlice(res, idx, nil, q, k, nil); !isArg(err, "queries") {
			t.Errorf("query holding %v: %v", v, err)
		}
	}
	if idx.Rows() != 800 {
		t.Errorf("rows %d after refusals", idx.Rows())
	}
}

// SerializeTo/DeserializeFrom and the files: the same rows, ids, split and
// parameters; the fresh tier's results equal, the ANN's by recall.
func TestSerializeRoundTrip(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	data := safetest.Random(27, 1200, dim)
	qs := safetest.Random(28, nq, dim)
	idx, err := tiered.Build(res, device(t, res, data[:1000*dim], 1000), params(t, tiered.CAGRA, 500))
	must(t, err)
	safetest.Close(t, idx)
	must(t, idx.Extend(res, device(t, res, data[1000*dim:], 200)))
	var buf bytes.Buffer
	n, err := idx.SerializeTo(res, &buf)
	must(t, err)
	if n != int64(buf.Len()) {
		t.Errorf("SerializeTo: %d bytes reported, %d written", n, buf.Len())
	}
	back, err := tiered.DeserializeFrom(res, bytes.NewReader(buf.Bytes()))
	must(t, err)
	safetest.Close(t, back)
	if back.Rows() != 1200 || back.ANNRows() != 1000 || back.Dim() != dim || back.Params() != idx.Params() {
		t.Fatalf("round trip: rows %d ANN %d dim %d params %+v", back.Rows(), back.ANNRows(), back.Dim(), back.Params())
	}
	exact := safetest.ExactKNN(data, qs, dim, k, safetest.L2, nil)
	if r := recall(search(t, res, back, cagraSearch, qs, k, nil), exact, k); r < 0.9 {
		t.Errorf("deserialized recall %.3f", r)
	}
	// the fresh tier alone (a filter allowing the fresh rows): exact, equal
	var fresh []int64
	for i := 1000; i < 1200; i++ {
		fresh = append(fresh, int64(i))
	}
	f, err := safe.NewBitsetFilterAllowing(res, 1200, fresh)
	must(t, err)
	safetest.Close(t, f)
	if a, b := search(t, res, idx, nil, qs, k, f), search(t, res, back, nil, qs, k, f); !slices.Equal(a, b) {
		t.Error("fresh-tier results differ after the round trip")
	}
	path := filepath.Join(t.TempDir(), "tiered.idx")
	must(t, back.Serialize(res, path))
	again, err := tiered.Deserialize(res, path)
	must(t, err)
	safetest.Close(t, again)
	var buf2 bytes.Buffer
	_, err = again.SerializeTo(res, &buf2)
	must(t, err)
	if !bytes.Equal(buf.Bytes(), buf2.Bytes()) {
		t.Error("the file round trip changed the stream")
	}
	// fresh-only index: exact equality of results
	small, err := tiered.Build(res, device(t, res, data[:300*dim], 300), nil)
	must(t, err)
	safetest.Close(t, small)
	buf.Reset()
	_, err = small.SerializeTo(res, &buf)
	must(t, err)
	sb, err := tiered.DeserializeFrom(res, &buf)
	must(t, err)
	safetest.Close(t, sb)
	if a, b := search(t, res, small, nil, qs, k, nil), search(t, res, sb, nil, qs, k, nil); !slices.Equal(a, b) || sb.ANNRows() != 0 {
		t.Error("brute-force index changed in the round trip")
	}
	// refusals
	if _, err := tiered.DeserializeFrom(res, bytes.NewReader([]byte("garbage garbage garbage"))); err == nil {
		t.Error("garbage accepted")
	}
	if _, err := tiered.DeserializeFrom(res, bytes.NewReader(buf2.Bytes()[:buf2.Len()-3])); err == nil {
		t.Error("truncated stream accepted")
	}
	if _, err := tiered.DeserializeFrom(res, bytes.NewReader(buf2.Bytes()), safe.MaxBytes(100)); !isArg(err, "r") {
		t.Errorf("MaxBytes: %v", err)
	}
}

// With the IVF-PQ backend and CosineExpanded, cuVS's IVF-PQ returns -cos
// (the real library, both releases: -1 for a row along the query) while
// the fresh tier's brute force returns 1 - cos: the merge puts them on one
// scale, so a fresh row along the query is found first, at distance ~0,
// and every distance returned is 1 - cos (in [0, 2]).
func TestIVFPQCosineMerge(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	const built = 1000
	data := safetest.Random(21, built+1, dim)
	p := params(t, tiered.IVFPQ, 500)
	p.Metric = safe.CosineExpanded
	idx, err := tiered.Build(res, device(t, res, data[:built*dim], built), p)
	must(t, err)
	safetest.Close(t, idx)
	must(t, idx.Extend(res, device(t, res, data[built*dim:], 1)))
	if idx.ANNRows() == 0 || idx.Rows() != built+1 {
		t.Fatalf("want ANN rows and one fresh row: %d ANN of %d", idx.ANNRows(), idx.Rows())
	}
	q := device(t, res, data[built*dim:], 1)
	const k = 5
	nb, err := safe.NewDeviceMatrix[int64](res, 1, k)
	must(t, err)
	defer nb.Close()
	ds, err := safe.NewDeviceMatrix[float32](res, 1, k)
	must(t, err)
	defer ds.Close()
	must(t, idx.Search(res, nil, q, nb, ds, nil))
	ids, dists := make([]int64, k), make([]float32, k)
	must(t, nb.CopyToHost(res, ids))
	must(t, ds.CopyToHost(res, dists))
	if ids[0] != built || dists[0] > 1e-3 {
		t.Errorf("the fresh row along the query: got %v at %v, want %d first at ~0", ids, dists, built)
	}
	for j, d := range dists {
		if d < -1e-3 || d > 2+1e-3 || (j > 0 && d < dists[j-1]) {
			t.Errorf("distances %v: want 1 - cos, ascending", dists)
			break
		}
	}
}
