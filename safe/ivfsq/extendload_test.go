package ivfsq_test

import (
	"testing"

	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/ivfsq"
)

// Extend under search traffic: 8 goroutines search (each query is a row
// of the index) while Extend adds rows far from every query, 20 times.
// Every Extend succeeds (it waits its turn), no search fails (a search
// waits for an Extend rather than fail with ErrBusy), the row count
// follows, and every result stays right.
func TestExtendUnderLoad(t *testing.T) {
	safetest.Check(t)
	const n, d, nq, kk, extends, add = 300, 16, 8, 4, 20, 10
	res := safetest.Resources(t)
	data := safetest.Random(31, n, d)
	ds, err := safe.DeviceMatrixFrom(res, data, n, d)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, ds)
	p, err := ivfsq.DefaultIndexParams()
	if err != nil {
		t.Fatal(err)
	}
	p.NLists = 8
	idx, err := ivfsq.Build(res, ds, &p)
	if err != nil {
		t.Fatal(err)
	}
	sp := ivfsq.SearchParams{NProbes: 8}
	safetest.Close(t, idx)
	queries := data[:nq*d]
	far := safetest.Random(32, add, d)
	for i := range far {
		far[i] += 10 // far from every query
	}
	fm, err := safe.DeviceMatrixFrom(res, far, add, d)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, fm)
	searches := safetest.ExtendUnderLoad(t, 8, extends, func(r *safe.Resources) error {
		out, err := ivfsq.SearchSlice(r, idx, &sp, queries, kk, nil)
		if err != nil {
			return err
		}
		rows := int64(idx.Rows())
		for q := range nq {
			ids, dist := out.Row(q)
			_ = dist
			for _, id := range ids {
				if id < 0 || id >= rows {
					t.Errorf("query %d: id %d of %d rows", q, id, rows)
				}
			}
		}
		return nil
	}, func(int) error { return idx.Extend(res, fm, nil) })
	if got, want := idx.Rows(), n+extends*add; got != want {
		t.Errorf("Rows() = %d after %d Extends of %d rows to %d, want %d", got, extends, add, n, want)
	}
	t.Logf("%d searches around %d Extends", searches, extends)
}
