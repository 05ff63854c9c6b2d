package tiered_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/batch"
	"github.com/cuvs-go/cuvs/safe/internal/integrity"
	"github.com/cuvs-go/cuvs/safe/tiered"
)

// searchIDs returns the ids and distances of a search of queries (host
// slice) on idx.
func searchIDs(t *testing.T, res *safe.Resources, idx *tiered.Index, sp *tiered.SearchParams, queries []float32, kk int, f *safe.Filter) ([]int64, []float32) {
	t.Helper()
	n := len(queries) / dim
	q := device(t, res, queries, n)
	nb, err := safe.NewDeviceMatrix[int64](res, n, kk)
	must(t, err)
	defer nb.Close()
	ds, err := safe.NewDeviceMatrix[float32](res, n, kk)
	must(t, err)
	defer ds.Close()
	must(t, idx.Search(res, sp, q, nb, ds, f))
	ids, err := nb.ToHost(res)
	must(t, err)
	dd, err := ds.ToHost(res)
	must(t, err)
	return ids, dd
}

// checkRows checks a search's results (n rows of kk): every id one that ok
// allows (live and allowed), no id twice, distances ascending, the first
// min(kk, avail) slots filled and the rest the sentinel with +Inf.
func checkRows(t *testing.T, what string, ids []int64, d []float32, kk, avail int, ok func(int64) bool) {
	t.Helper()
	for q := range len(ids) / kk {
		row, rd := ids[q*kk:(q+1)*kk], d[q*kk:(q+1)*kk]
		seen := map[int64]bool{}
		for j, id := range row {
			if j < min(kk, avail) {
				if id == safe.SentinelID64 || !ok(id) || seen[id] || math.IsNaN(float64(rd[j])) || (j > 0 && rd[j] < rd[j-1]) {
					t.Fatalf("%s: query %d slot %d: id %d distance %v (ids %v; %d rows available)", what, q, j, id, rd[j], row, avail)
				}
				seen[id] = true
			} else if id != safe.SentinelID64 || !math.IsInf(float64(rd[j]), 1) {
				t.Fatalf("%s: query %d slot %d: id %d distance %v past the %d rows available", what, q, j, id, rd[j], avail)
			}
		}
	}
}

// deleteSome deletes the ids of the rows nearest the first queries (each
// query's own row) and a random tenth of the others; it returns the set.
func deleteSome(t *testing.T, idx *tiered.Index, self []int64, seed uint64) map[int64]bool {
	t.Helper()
	dead := map[int64]bool{}
	rng := rand.New(rand.NewPCG(seed, 7))
	del := slices.Clone(self)
	for id := range int64(idx.Rows()) {
		if rng.IntN(10) == 0 {
			del = append(del, id)
		}
	}
	for _, id := range del {
		dead[id] = true
	}
	n, err := idx.Delete(del)
	must(t, err)
	if n != len(dead) {
		t.Fatalf("Delete: %d deleted, want %d", n, len(dead))
	}
	return dead
}

// A deleted row is never returned: every layout (fresh tier only, ANN tier
// only, both; CAGRA and IVF-Flat), every k up to Rows(), with no filter, a
// broad and a selective filter, through Search, SearchSlice and a
// Batcher; k is filled while live allowed rows remain, the sentinel after.
func TestDeleteNeverReturned(t *testing.T) {
	for _, c := range []struct {
		name        string
		b           tiered.Backend
		minANN      int64
		built, more int
	}{
		{"fresh", tiered.CAGRA, 1000, 600, 0},
		{"ann", tiered.CAGRA, 300, 800, 0},
		{"both", tiered.CAGRA, 300, 600, 200},
		{"both IVFFlat", tiered.IVFFlat, 300, 600, 200},
	} {
		t.Run(c.name, func(t *testing.T) {
			safetest.Check(t)
			res := safetest.Resources(t)
			rows := c.built + c.more
			data := safetest.Random(40, rows, dim)
			idx, err := tiered.Build(res, device(t, res, data[:c.built*dim], c.built), params(t, c.b, c.minANN))
			must(t, err)
			safetest.Close(t, idx)
			if c.more > 0 {
				must(t, idx.Extend(res, device(t, res, data[c.built*dim:], c.more)))
			}
			// the queries are rows of both tiers, each deleted: a search
			// that returned deleted rows would return them first
			var self []int64
			var qs []float32
			for i := range nq {
				id := int64(i * rows / nq)
				self = append(self, id)
				qs = append(qs, data[id*dim:(id+1)*dim]...)
			}
			dead := deleteSome(t, idx, self, 41)
			if idx.Rows() != rows || idx.Live() != rows-len(dead) || idx.Stored() != rows {
				t.Fatalf("rows %d live %d stored %d, want %d, %d, %d", idx.Rows(), idx.Live(), idx.Stored(), rows, rows-len(dead), rows)
			}
			var third, sparse []int64
			for id := range int64(rows) {
				if id%3 == 0 {
					third = append(third, id)
				}
				if id%50 == 0 {
					sparse = append(sparse, id)
				}
			}
			sp := &tiered.SearchParams{CAGRA: tiered.CAGRASearchParams{ITopKSize: 128}, IVFFlat: tiered.IVFSearchParams{NProbes: 16}}
			for _, fc := range []struct {
				name  string
				allow []int64
			}{{"no filter", nil}, {"a third", third}, {"one in 50", sparse}} {
				var f *safe.Filter
				allowed := func(int64) bool { return true }
				if fc.allow != nil {
					f, err = safe.NewBitsetFilterAllowing(res, rows, fc.allow)
					must(t, err)
					safetest.Close(t, f)
					allowed = func(id int64) bool { return slices.Contains(fc.allow, id) }
				}
				ok := func(id int64) bool { return id >= 0 && id < int64(rows) && !dead[id] && allowed(id) }
				avail := 0
				for id := range int64(rows) {
					if ok(id) {
						avail++
					}
				}
				for _, kk := range []int{1, k, 64, avail, rows} {
					if kk == 0 {
						continue
					}
					what := fmt.Sprintf("%s, k %d", fc.name, kk)
					ids, d := searchIDs(t, res, idx, sp, qs, kk, f)
					checkRows(t, what, ids, d, kk, avail, ok)
					if kk == k {
						exact := safetest.ExactKNN(data, qs, dim, k, safetest.L2, func(i int) bool { return ok(int64(i)) })
						if r := recall(ids, exact, k); r < 0.9 {
							t.Errorf("%s: recall %.3f among the live rows", what, r)
						}
					}
				}
				if c.b == tiered.IVFFlat {
					// one probe of 16 lists holds fewer than 64 rows: the
					// ANN tier is searched again exactly to fill k
					one := &tiered.SearchParams{IVFFlat: tiered.IVFSearchParams{NProbes: 1}}
					ids, d := searchIDs(t, res, idx, one, qs, 64, f)
					checkRows(t, fc.name+", one probe, k 64", ids, d, 64, avail, ok)
				}
				// Go memory
				r, err := tiered.SearchSlice(res, idx, sp, qs, k, f)
				must(t, err)
				checkRows(t, fc.name+", SearchSlice", r.Neighbors, r.Distances, k, avail, ok)
			}
			// a Batcher (no filter)
			bt, err := batch.New[float32, int64](tiered.NewSearcher(idx, sp), batch.Options{MaxK: k})
			must(t, err)
			defer bt.Close()
			for q := range 5 {
				got, err := bt.Search(context.Background(), qs[q*dim:(q+1)*dim], k)
				must(t, err)
				checkRows(t, "batcher", got.Neighbors, got.Distances, k, rows, func(id int64) bool { return !dead[id] })
			}
			// a filter allowing deleted rows only: nothing to return
			gone, err := safe.NewBitsetFilterAllowing(res, rows, self)
			must(t, err)
			safetest.Close(t, gone)
			ids, d := searchIDs(t, res, idx, sp, qs, k, gone)
			checkRows(t, "deleted rows only", ids, d, k, 0, nil)
		})
	}
}

func TestDeleteRules(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	data := safetest.Random(42, 400, dim)
	idx, err := tiered.Build(res, device(t, res, data[:300*dim], 300), params(t, tiered.CAGRA, 200))
	must(t, err)
	safetest.Close(t, idx)
	must(t, idx.Extend(res, device(t, res, data[300*dim:], 100)))
	if n, err := idx.Delete([]int64{5, 350, 5}); err != nil || n != 2 {
		t.Fatalf("Delete: %d, %v; want 2 (an id twice in one call counts once)", n, err)
	}
	// twice: a no-op, not counted
	if n, err := idx.Delete([]int64{5, 350}); err != nil || n != 0 {
		t.Fatalf("Delete again: %d, %v; want 0, nil", n, err)
	}
	// an unknown id: an ArgError naming it, and nothing deleted
	for _, bad := range []int64{-1, 400, math.MaxInt64} {
		n, err := idx.Delete([]int64{7, bad})
		if !isArg(err, "ids") || !strings.Contains(err.Error(), fmt.Sprint(bad)) || n != 0 {
			t.Errorf("Delete(%d): %d, %v; want an ArgError naming ids and %d", bad, n, err, bad)
		}
	}
	if idx.Live() != 398 || idx.Rows() != 400 || idx.Stored() != 400 {
		t.Fatalf("live %d rows %d stored %d after the refusals", idx.Live(), idx.Rows(), idx.Stored())
	}
	ids, _ := searchIDs(t, res, idx, nil, data[7*dim:8*dim], 1, nil)
	if ids[0] != 7 {
		t.Errorf("row 7 found as %d after a refused Delete", ids[0])
	}
	if n, err := idx.Delete(nil); err != nil || n != 0 {
		t.Errorf("Delete(nil): %d, %v", n, err)
	}
	// Compact with nothing to free does nothing
	must(t, idx.Compact(res))
	if idx.Stored() != 398 || idx.Live() != 398 || idx.Rows() != 400 {
		t.Errorf("after Compact: stored %d live %d rows %d", idx.Stored(), idx.Live(), idx.Rows())
	}
	must(t, idx.Compact(res))
	var none *tiered.Index
	if _, err := none.Delete([]int64{1}); !isArg(err, "index") {
		t.Errorf("nil index: %v", err)
	}
	if err := none.Compact(res); !isArg(err, "index") {
		t.Errorf("nil index Compact: %v", err)
	}
	if none.Live() != 0 || none.Stored() != 0 {
		t.Error("nil index counts")
	}
	var zero tiered.Index
	if _, err := zero.Delete([]int64{1}); err == nil {
		t.Error("zero index: Delete accepted")
	}
	must(t, idx.Close())
	if _, err := idx.Delete([]int64{1}); !errors.Is(err, safe.ErrClosed) {
		t.Errorf("closed: %v", err)
	}
	if err := idx.Compact(res); !errors.Is(err, safe.ErrClosed) {
		t.Errorf("closed Compact: %v", err)
	}
}

// findSelf checks that each id of ids (a row of data) is found first by
// its own row, and that no id of dead is returned for its own row.
func findSelf(t *testing.T, what string, res *safe.Resources, idx *tiered.Index, data []float32, ids []int64, dead map[int64]bool) {
	t.Helper()
	var qs []float32
	for _, id := range ids {
		qs = append(qs, data[id*dim:(id+1)*dim]...)
	}
	got, d := searchIDs(t, res, idx, cagraSearch, qs, 2, nil)
	for i, id := range ids {
		row := got[2*i : 2*i+2]
		if dead[id] {
			if slices.Contains(row, id) {
				t.Fatalf("%s: deleted id %d returned (%v)", what, id, row)
			}
			continue
		}
		if row[0] != id || d[2*i] > 1e-4 {
			t.Fatalf("%s: row %d found as %v (distance %v)", what, id, row, d[2*i])
		}
	}
}

// Ids are stable: through Compact, the ANN rebuild of an Extend (which
// compacts), Delete after a compaction, a filter over ids after one, and
// Merge (index i's ids shifted by the Rows() before it).
func TestIDsStable(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	const total = 1100
	data := safetest.Random(43, total, dim)
	p := params(t, tiered.CAGRA, 300)
	p.CreateANNIndexOnExtend = true
	idx, err := tiered.Build(res, device(t, res, data[:600*dim], 600), p)
	must(t, err)
	safetest.Close(t, idx)
	must(t, idx.Extend(res, device(t, res, data[600*dim:700*dim], 100)))
	dead := map[int64]bool{}
	var del []int64
	for id := range int64(700) {
		if id%7 == 0 || (id >= 600 && id%5 == 0) {
			del = append(del, id)
			dead[id] = true
		}
	}
	_, err = idx.Delete(del)
	must(t, err)
	every := func(n int64) []int64 {
		var out []int64
		for id := int64(1); id < n; id += 3 {
			out = append(out, id)
		}
		return append(out, del[:20]...)
	}
	findSelf(t, "deleted", res, idx, data, every(700), dead)
	live := 700 - len(dead)
	must(t, idx.Compact(res))
	if idx.Rows() != 700 || idx.Live() != live || idx.Stored() != live || idx.ANNRows() != live {
		t.Fatalf("Compact: rows %d live %d stored %d ANN %d, want 700, %d, %d, %d", idx.Rows(), idx.Live(), idx.Stored(), idx.ANNRows(), live, live, live)
	}
	findSelf(t, "compacted", res, idx, data, every(700), dead)
	// a filter over ids keeps naming ids
	var third []int64
	for id := int64(0); id < 700; id += 3 {
		third = append(third, id)
	}
	f, err := safe.NewBitsetFilterAllowing(res, 700, third)
	must(t, err)
	safetest.Close(t, f)
	qs := safetest.Random(44, nq, dim)
	ok := func(id int64) bool { return id%3 == 0 && !dead[id] && id < 700 }
	ids, d := searchIDs(t, res, idx, cagraSearch, qs, k, f)
	checkRows(t, "compacted, filtered", ids, d, k, 1000, ok)
	exact := safetest.ExactKNN(data[:700*dim], qs, dim, k, safetest.L2, func(i int) bool { return ok(int64(i)) })
	if r := recall(ids, exact, k); r < 0.9 {
		t.Errorf("compacted, filtered: recall %.3f", r)
	}
	// Delete after the compaction: ids, not positions; a compacted id again is a no-op
	if n, err := idx.Delete([]int64{1, 4, 7}); err != nil || n != 2 {
		t.Fatalf("Delete after Compact: %d, %v; want 2 (7 was compacted away)", n, err)
	}
	dead[1], dead[4] = true, true
	findSelf(t, "deleted after compaction", res, idx, data, every(700), dead)
	// Extend: new ids from Rows() on; past MinANNRows fresh rows the ANN
	// rebuild drops the deleted rows
	must(t, idx.Extend(res, device(t, res, data[700*dim:800*dim], 100)))
	if _, err := idx.Delete([]int64{700, 750, 3}); err != nil {
		t.Fatal(err)
	}
	dead[700], dead[750], dead[3] = true, true, true
	must(t, idx.Extend(res, device(t, res, data[800*dim:total*dim], total-800)))
	live = total - len(dead)
	if idx.Rows() != total || idx.Live() != live || idx.Stored() != live || idx.ANNRows() != live {
		t.Fatalf("rebuild: rows %d live %d stored %d ANN %d, want %d, %d, %d, %d", idx.Rows(), idx.Live(), idx.Stored(), idx.ANNRows(), total, live, live, live)
	}
	findSelf(t, "rebuilt", res, idx, data, every(total), dead)

	// Merge: b's id x is a.Rows() + x
	b, err := tiered.Build(res, device(t, res, data[:400*dim], 400), params(t, tiered.CAGRA, 300))
	must(t, err)
	safetest.Close(t, b)
	_, err = b.Delete([]int64{0, 10, 399})
	must(t, err)
	small := *p
	small.CreateANNIndexOnExtend = false
	m, err := tiered.Merge(res, &small, idx, b)
	must(t, err)
	safetest.Close(t, m)
	if m.Rows() != total+400 || m.Live() != idx.Live()+397 || m.Stored() != m.Live() {
		t.Fatalf("merged: rows %d live %d stored %d", m.Rows(), m.Live(), m.Stored())
	}
	mdata := append(slices.Clone(data), data[:400*dim]...)
	mdead := maps(dead)
	for _, x := range []int64{0, 10, 399} {
		mdead[total+x] = true
	}
	var probe []int64
	for id := int64(0); id < total+400; id += 5 {
		probe = append(probe, id)
	}
	probe = append(probe, total, total+10, total+399, 3, 700)
	// rows of b duplicate rows of a: search the merged rows apart by a
	// filter of each half
	var first, second []int64
	for _, id := range probe {
		if id < total {
			first = append(first, id)
		} else {
			second = append(second, id)
		}
	}
	var lo, hi []int64
	for id := range int64(total + 400) {
		if id < total {
			lo = append(lo, id)
		} else {
			hi = append(hi, id)
		}
	}
	for _, half := range []struct {
		probe, allow []int64
	}{{first, lo}, {second, hi}} {
		hf, err := safe.NewBitsetFilterAllowing(res, total+400, half.allow)
		must(t, err)
		var q []float32
		for _, id := range half.probe {
			q = append(q, mdata[id*dim:(id+1)*dim]...)
		}
		got, gd := searchIDs(t, res, m, cagraSearch, q, 1, hf)
		for i, id := range half.probe {
			if mdead[id] {
				if got[i] == id {
					t.Fatalf("merged: deleted id %d returned", id)
				}
			} else if got[i] != id || gd[i] > 1e-4 {
				t.Fatalf("merged: row %d found as %d", id, got[i])
			}
		}
		must(t, hf.Close())
	}
	if n, err := m.Delete([]int64{total, total + 10, 3, 7}); err != nil || n != 0 {
		t.Errorf("merged: deleting deleted ids: %d, %v", n, err)
	}
}

func maps(m map[int64]bool) map[int64]bool {
	out := make(map[int64]bool, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// Deletions persist: the stream holds the live rows and their ids; the
// index read back never returns a deleted id, Deletes it as a no-op, and
// gives new rows the ids after Rows(). A version-1 stream (before Delete)
// is read; ids out of order are a corrupt stream.
func TestDeletePersist(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	data := safetest.Random(45, 900, dim)
	idx, err := tiered.Build(res, device(t, res, data[:600*dim], 600), params(t, tiered.CAGRA, 300))
	must(t, err)
	safetest.Close(t, idx)
	must(t, idx.Extend(res, device(t, res, data[600*dim:800*dim], 200)))
	dead := map[int64]bool{}
	var del []int64
	for id := int64(0); id < 800; id += 9 {
		del = append(del, id)
		dead[id] = true
	}
	_, err = idx.Delete(del)
	must(t, err)
	probe := func() []int64 {
		var out []int64
		for id := int64(0); id < 800; id += 4 {
			out = append(out, id)
		}
		return append(out, del[:10]...)
	}()
	for _, step := range []string{"deleted", "compacted"} {
		if step == "compacted" {
			must(t, idx.Compact(res))
		}
		var buf bytes.Buffer
		_, err := idx.SerializeTo(res, &buf)
		must(t, err)
		back, err := tiered.DeserializeFrom(res, bytes.NewReader(buf.Bytes()))
		must(t, err)
		if back.Rows() != 800 || back.Live() != idx.Live() || back.Stored() != idx.Live() {
			t.Fatalf("%s: read back rows %d live %d stored %d, want 800, %d, %d", step, back.Rows(), back.Live(), back.Stored(), idx.Live(), idx.Live())
		}
		findSelf(t, step+", read back", res, back, data, probe, dead)
		if n, err := back.Delete(del); err != nil || n != 0 {
			t.Errorf("%s: deleting deleted ids after the read: %d, %v", step, n, err)
		}
		must(t, back.Extend(res, device(t, res, data[800*dim:], 100)))
		findSelf(t, step+", extended after the read", res, back, data, []int64{800, 850, 899, 9, 10}, dead)
		// the file path, and a stream that is stable across round trips
		path := filepath.Join(t.TempDir(), "tiered.idx")
		must(t, back.Serialize(res, path))
		again, err := tiered.Deserialize(res, path)
		must(t, err)
		if again.Rows() != 900 || again.Live() != back.Live() {
			t.Errorf("%s: file round trip: rows %d live %d", step, again.Rows(), again.Live())
		}
		must(t, again.Close())
		must(t, back.Close())
	}

	// version 1: the magic's last byte 1, no ids-given field, no ids
	plain, err := tiered.Build(res, device(t, res, data[:500*dim], 500), params(t, tiered.CAGRA, 300))
	must(t, err)
	safetest.Close(t, plain)
	must(t, plain.Extend(res, device(t, res, data[500*dim:600*dim], 100)))
	var v2 bytes.Buffer
	_, err = plain.SerializeTo(res, &v2)
	must(t, err)
	const magicLen = 16
	s := unsealed(t, v2.Bytes()) // the format's own checks, under the checksum
	hdr := len(s) - magicLen - 8 - 600*dim*4
	if s[magicLen-1] != 2 || binary.LittleEndian.Uint64(s[magicLen+hdr:]) != 600 {
		t.Fatalf("stream layout: version byte %d, ids given %d", s[magicLen-1], binary.LittleEndian.Uint64(s[magicLen+hdr:]))
	}
	v1 := append(append(slices.Clone(s[:magicLen+hdr]), s[magicLen+hdr+8:]...), []byte{}...)
	v1[magicLen-1] = 1
	old, err := tiered.DeserializeFrom(res, bytes.NewReader(v1))
	must(t, err)
	safetest.Close(t, old)
	if old.Rows() != 600 || old.Live() != 600 || old.ANNRows() != 500 {
		t.Fatalf("version 1: rows %d live %d ANN %d", old.Rows(), old.Live(), old.ANNRows())
	}
	findSelf(t, "version 1", res, old, data, []int64{0, 250, 499, 500, 599}, nil)
	// version 3 and ids out of order: corrupt
	v3 := slices.Clone(s)
	v3[magicLen-1] = 3
	if _, err := tiered.DeserializeFrom(res, bytes.NewReader(v3)); !errors.Is(err, safe.ErrCorruptIndex) {
		t.Errorf("version 3: %v", err)
	}
	var withIDs bytes.Buffer
	_, err = plain.Delete([]int64{2})
	must(t, err)
	_, err = plain.SerializeTo(res, &withIDs)
	must(t, err)
	bad := slices.Clone(unsealed(t, withIDs.Bytes()))
	tail := len(bad) - 599*8 // the ids: 0, 1, 3, ...
	binary.LittleEndian.PutUint64(bad[tail+8:], 0)
	if _, err := tiered.DeserializeFrom(res, bytes.NewReader(bad)); !errors.Is(err, safe.ErrCorruptIndex) || !strings.Contains(err.Error(), "ids") {
		t.Errorf("ids out of order: %v", err)
	}
	binary.LittleEndian.PutUint64(bad[tail+8:], 1)
	binary.LittleEndian.PutUint64(bad[len(bad)-8:], 600) // past the ids given
	if _, err := tiered.DeserializeFrom(res, bytes.NewReader(bad)); !errors.Is(err, safe.ErrCorruptIndex) {
		t.Errorf("id past the ids given: %v", err)
	}
}

// Every row deleted: searches return the sentinel only; Compact frees
// every row; the index still takes rows (new ids), and its stream reads.
func TestDeleteAll(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	data := safetest.Random(46, 400, dim)
	idx, err := tiered.Build(res, device(t, res, data[:300*dim], 300), params(t, tiered.CAGRA, 200))
	must(t, err)
	safetest.Close(t, idx)
	all := make([]int64, 300)
	for i := range all {
		all[i] = int64(i)
	}
	_, err = idx.Delete(all)
	must(t, err)
	ids, d := searchIDs(t, res, idx, nil, data[:4*dim], k, nil)
	checkRows(t, "all deleted", ids, d, k, 0, nil)
	must(t, idx.Compact(res))
	if idx.Stored() != 0 || idx.Live() != 0 || idx.Rows() != 300 {
		t.Fatalf("stored %d live %d rows %d", idx.Stored(), idx.Live(), idx.Rows())
	}
	ids, d = searchIDs(t, res, idx, nil, data[:4*dim], k, nil)
	checkRows(t, "all compacted", ids, d, k, 0, nil)
	var buf bytes.Buffer
	_, err = idx.SerializeTo(res, &buf)
	must(t, err)
	back, err := tiered.DeserializeFrom(res, &buf)
	must(t, err)
	safetest.Close(t, back)
	for _, x := range []*tiered.Index{idx, back} {
		must(t, x.Extend(res, device(t, res, data[300*dim:], 100)))
		findSelf(t, "extended", res, x, data, []int64{300, 350, 399, 0, 5}, map[int64]bool{0: true, 5: true})
	}
}

// Delete beside searches, Extends and Compacts (run under -race): a
// search sees a Delete call whole or not at all, and never returns a row
// deleted before it began. Rows come in pairs of equal vectors, each pair
// deleted by one call: a query of a pair's vector returns both (nearest,
// distance 0) or neither.
func TestDeleteConcurrent(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	const pairs, extra = 300, 200
	base := safetest.Random(47, pairs+extra/2, dim)
	data := make([]float32, 0, (2*pairs+extra)*dim)
	for i := range pairs + extra/2 {
		v := base[i*dim : (i+1)*dim]
		data = append(append(data, v...), v...)
	}
	// every row fresh: exact searches (a pair is found whole), Compact
	// building a new fresh tier
	p := params(t, tiered.CAGRA, 10000)
	idx, err := tiered.Build(res, device(t, res, data[:2*pairs*dim], 2*pairs), p)
	must(t, err)
	safetest.Close(t, idx)
	order := rand.New(rand.NewPCG(48, 1)).Perm(pairs)
	var done atomic.Int64 // pairs of order whose Delete returned
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var failed atomic.Bool
	fail := func(format string, args ...any) {
		if failed.CompareAndSwap(false, true) {
			t.Errorf(format, args...)
		}
	}
	rank := make([]int, pairs) // the pair's place in order
	for i, pr := range order {
		rank[pr] = i
	}
	for g := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := safe.NewResources()
			if err != nil {
				fail("%v", err)
				return
			}
			defer r.Close()
			rng := rand.New(rand.NewPCG(uint64(49+g), 2))
			for {
				select {
				case <-stop:
					return
				default:
				}
				pr := rng.IntN(pairs)
				before := done.Load()
				out, err := tiered.SearchSlice(r, idx, nil, data[2*pr*dim:(2*pr+1)*dim], 4, nil)
				if err != nil {
					fail("search: %v", err)
					return
				}
				a, b := slices.Contains(out.Neighbors, int64(2*pr)), slices.Contains(out.Neighbors, int64(2*pr+1))
				if a != b {
					fail("pair %d half deleted: %v", pr, out.Neighbors)
				}
				if a && int64(rank[pr]) < before {
					fail("pair %d deleted before the search and returned: %v", pr, out.Neighbors)
				}
				if !a && int64(rank[pr]) >= done.Load()+1 {
					fail("pair %d not deleted yet and missing: %v", pr, out.Neighbors)
				}
			}
		}()
	}
	wg.Add(1)
	go func() { // Extends (past 700 rows the ANN rebuild compacts), and a Compact
		defer wg.Done()
		r, err := safe.NewResources()
		if err != nil {
			fail("%v", err)
			return
		}
		defer r.Close()
		for at := 2 * pairs; at < 2*pairs+extra; at += 20 {
			m, err := safe.DeviceMatrixFrom(r, data[at*dim:(at+20)*dim], 20, dim)
			if err == nil {
				err = idx.Extend(r, m)
				_ = m.Close()
			}
			if err == nil && at%100 == 0 {
				err = idx.Compact(r)
			}
			if err != nil {
				fail("extend: %v", err)
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	for i, pr := range order[:pairs/2] {
		if _, err := idx.Delete([]int64{int64(2 * pr), int64(2*pr + 1)}); err != nil {
			t.Fatal(err)
		}
		done.Store(int64(i + 1))
		time.Sleep(200 * time.Microsecond)
	}
	close(stop)
	wg.Wait()
	if want := 2*pairs + extra - pairs; idx.Live() != want {
		t.Errorf("live %d, want %d", idx.Live(), want)
	}
}

// unsealed returns a sealed stream's data: its checksum trailer cut off.
func unsealed(t testing.TB, b []byte) []byte {
	t.Helper()
	off := int64(len(b) - integrity.FooterSize)
	f, found, err := integrity.ParseFooter(b[off:], off)
	if err != nil || !found {
		t.Fatalf("no checksum trailer at the stream's end (%v)", err)
	}
	return b[:f.DataLen]
}

// TestIntegrity: the package's own format is sealed (a CRC-32C trailer):
// a stream and a file read back verified; any flipped bit, in the data or
// the trailer, is safe.ErrCorruptIndex naming the checksum's damaged
// range; a stream without the trailer (as written before it) loads
// unverified, and safe.RequireChecksum refuses it.
func TestIntegrity(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	data := safetest.Random(47, 400, dim)
	idx, err := tiered.Build(res, device(t, res, data[:300*dim], 300), params(t, tiered.CAGRA, 200))
	must(t, err)
	safetest.Close(t, idx)
	must(t, idx.Extend(res, device(t, res, data[300*dim:], 100)))
	_, err = idx.Delete([]int64{5, 305})
	must(t, err)
	var buf bytes.Buffer
	n, err := idx.SerializeTo(res, &buf)
	must(t, err)
	if n != int64(buf.Len()) {
		t.Fatalf("SerializeTo returned %d bytes, wrote %d", n, buf.Len())
	}
	sealed := buf.Bytes()
	ok := false
	back, err := tiered.DeserializeFrom(res, bytes.NewReader(sealed), safe.Verified(&ok))
	must(t, err)
	if !ok || back.Live() != idx.Live() || back.Rows() != idx.Rows() {
		t.Errorf("round trip: verified %v, live %d rows %d; want true, %d, %d", ok, back.Live(), back.Rows(), idx.Live(), idx.Rows())
	}
	must(t, back.Close())
	rng := rand.New(rand.NewPCG(47, 1))
	for i := range 24 {
		bad := slices.Clone(sealed)
		bit := rng.IntN(8 * len(bad))
		if i%4 == 0 { // the trailer
			bit = 8*len(unsealed(t, sealed)) + rng.IntN(8*(len(bad)-len(unsealed(t, sealed))))
		}
		bad[bit/8] ^= 1 << (bit % 8)
		if x, err := tiered.DeserializeFrom(res, bytes.NewReader(bad)); !errors.Is(err, safe.ErrCorruptIndex) || !strings.Contains(err.Error(), "checksum") {
			if x != nil {
				_ = x.Close()
			}
			t.Fatalf("bit %d of %d flipped: %v, want safe.ErrCorruptIndex from the checksum", bit, 8*len(bad), err)
		}
	}
	plain := unsealed(t, sealed)
	ok = true
	old, err := tiered.DeserializeFrom(res, bytes.NewReader(plain), safe.Verified(&ok))
	must(t, err)
	must(t, old.Close())
	if ok {
		t.Error("a stream without a trailer read back as verified")
	}
	if _, err := tiered.DeserializeFrom(res, bytes.NewReader(plain), safe.RequireChecksum()); !errors.Is(err, safe.ErrCorruptIndex) {
		t.Errorf("RequireChecksum, no trailer: %v, want safe.ErrCorruptIndex", err)
	}
	path := filepath.Join(t.TempDir(), "tiered.idx")
	must(t, idx.Serialize(res, path))
	ok = false
	f, err := tiered.Deserialize(res, path, safe.Verified(&ok))
	must(t, err)
	must(t, f.Close())
	if !ok {
		t.Error("the file read back unverified")
	}
	b, err := os.ReadFile(path)
	must(t, err)
	b[len(b)/3] ^= 0x10
	must(t, os.WriteFile(path, b, 0o600))
	if _, err := tiered.Deserialize(res, path); !errors.Is(err, safe.ErrCorruptIndex) || !strings.Contains(err.Error(), "checksum") {
		t.Errorf("a flipped bit in the file: %v, want safe.ErrCorruptIndex from the checksum", err)
	}
}
