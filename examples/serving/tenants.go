package main

import (
	"fmt"
	"io"
	"math/rand/v2"

	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/batch"
)

// tenantSet is -tenants: filters over the index's rows, each letting a
// random fraction (-tenant-allow) through, and their bits on the host for
// checking results. Goroutine i searches with filter i mod len(filters).
type tenantSet struct {
	filters []*safe.Filter
	allow   [][]uint64 // allow[t][id/64] bit id%64: tenant t lets row id through
}

// newTenants makes c.tenants filters on res (none for 0).
func newTenants(res *safe.Resources, c config) (*tenantSet, error) {
	ts := &tenantSet{}
	rng := rand.New(rand.NewPCG(c.seed, 0x7e4a47))
	for range c.tenants {
		bits := make([]uint64, (c.rows+63)/64)
		ids := make([]int64, 0, int(float64(c.rows)*c.tenantAllow)+16)
		for r := range c.rows {
			if rng.Float64() < c.tenantAllow {
				bits[r/64] |= 1 << (r % 64)
				ids = append(ids, int64(r))
			}
		}
		f, err := safe.NewBitsetFilterAllowing(res, c.rows, ids)
		if err != nil {
			return ts, err
		}
		ts.filters = append(ts.filters, f)
		ts.allow = append(ts.allow, bits)
	}
	return ts, nil
}

// of returns goroutine i's filter and its bits (nil, nil without tenants).
func (ts *tenantSet) of(i int) (*safe.Filter, []uint64) {
	if ts == nil || len(ts.filters) == 0 {
		return nil, nil
	}
	t := i % len(ts.filters)
	return ts.filters[t], ts.allow[t]
}

func (ts *tenantSet) Close() error {
	var err error
	if ts != nil {
		for _, f := range ts.filters {
			if e := f.Close(); err == nil {
				err = e
			}
		}
	}
	return err
}

// outside counts the ids of neighbors (valid ones) that allow forbids.
func outside(neighbors []uint32, allow []uint64) int64 {
	var n int64
	for _, id := range neighbors {
		if safe.Valid(id) && (int(id/64) >= len(allow) || allow[id/64]&(1<<(id%64)) == 0) {
			n++
		}
	}
	return n
}

// tenantLine is the row's comment line in -tenants mode: what was checked.
func tenantLine(out io.Writer, c config, g int, checked, bad int64, st batch.Stats) {
	if c.tenants == 0 {
		return
	}
	fmt.Fprintf(out, "# tenants at %d goroutines: %d filters (%.0f%% of the rows each), goroutine i on filter i mod %d", g, c.tenants, 100*c.tenantAllow, c.tenants)
	if c.batched {
		fmt.Fprintf(out, "; %d requests checked, %d ids outside their request's filter; %d filtered batches of %d (%d mixed, %d scans, mean %.1f rows), a request passed by at most %d",
			checked, bad, st.Filtered, st.Batches, st.Mixed, st.Scans, st.Mean(), st.MaxPassed)
	}
	fmt.Fprintln(out)
}
