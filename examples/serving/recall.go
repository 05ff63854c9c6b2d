package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/batch"
	"github.com/cuvs-go/cuvs/safe/bruteforce"
	"github.com/cuvs-go/cuvs/safe/cagra"
)

// printRecall prints the recall@k of c.recall random queries against brute
// force, for each CAGRA search kernel, the queries searched one at a time
// (the -batch 1 traffic of the steps) and all in one batch: the steps'
// throughput is only comparable between kernels that find the same rows.
//
// For int8 and uint8 the ground truth is brute force over the same values
// as float32 (widen): the same squared L2 distances.
func printRecall[T elem](out io.Writer, res *safe.Resources, idx *cagra.Index, sp cagra.SearchParams, c config) (err error) {
	queries := quantize[T](randomMatrix(querySeed(c.seed, -2), c.recall, c.dim))
	truth, err := groundTruth[T](res, c, queries, nil)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "# recall@%d of %d queries against brute force, one by one and in one batch:", c.k, c.recall)
	sep := " "
	for _, a := range []cagra.SearchAlgo{cagra.SingleCTA, cagra.MultiCTA, cagra.AutoAlgo} {
		p := sp
		p.Algo = a
		one := &safe.Results{}
		var got []int64
		for i := 0; i < c.recall; i++ {
			if err := cagra.SearchSliceInto(res, idx, &p, queries[i*c.dim:(i+1)*c.dim], c.k, nil, one); err != nil {
				return err
			}
			got = append(got, one.Neighbors...)
		}
		all, err := cagra.SearchSlice(res, idx, &p, queries, c.k, nil)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "%s%s %.4f, %.4f", sep, algoName(a), recallOf(got, truth), recallOf(all.Neighbors, truth))
		sep = "; "
	}
	fmt.Fprintln(out)
	return nil
}

// groundTruth is brute force's k nearest rows of the index's data to
// queries, with filter (nil: none). For int8 and uint8 it searches the
// same values as float32 (widen): the same squared L2 distances.
func groundTruth[T elem](res *safe.Resources, c config, queries []T, filter *safe.Filter) (truth *safe.Results, err error) {
	data, err := dlpack.NewHostMatrix(widen(quantize[T](randomMatrix(c.seed, c.rows, c.dim))), c.rows, c.dim)
	if err != nil {
		return nil, err
	}
	bf, err := bruteforce.Build(res, data, nil)
	if err != nil {
		return nil, err
	}
	defer closeInto(&err, bf)
	return bruteforce.SearchSlice(res, bf, widen(queries), c.k, filter)
}

// recallOf is the fraction of truth's rows (Len()×K ids) found in the same
// query's row of got.
func recallOf(got []int64, truth *safe.Results) float64 {
	k, hit := truth.K, 0
	for q := 0; q < truth.Len(); q++ {
		want := make(map[int64]bool, k)
		for _, id := range truth.Neighbors[q*k : (q+1)*k] {
			want[id] = true
		}
		for _, id := range got[q*k : (q+1)*k] {
			if want[id] {
				hit++
			}
		}
	}
	return float64(hit) / float64(len(truth.Neighbors))
}

// printTenantRecall prints, with -tenants and -recall, the recall@k of
// c.recall queries restricted to the first tenant's filter, against
// filtered brute force: searched directly one by one (cagra.SearchSlice),
// and all at once through a Batcher (SearchFiltered from a goroutine each,
// so that they share batches). A batched filtered request must find what a
// direct one does.
func printTenantRecall[T elem](out io.Writer, res *safe.Resources, idx *cagra.Index, sp cagra.SearchParams, c config, ts *tenantSet) (err error) {
	f, allow := ts.of(0)
	if f == nil || c.recall == 0 {
		return nil
	}
	queries := quantize[T](randomMatrix(querySeed(c.seed, -3), c.recall, c.dim))
	truth, err := groundTruth[T](res, c, queries, f)
	if err != nil {
		return err
	}
	one := &safe.Results{}
	var direct []int64
	for i := 0; i < c.recall; i++ {
		if err := cagra.SearchSliceInto(res, idx, &sp, queries[i*c.dim:(i+1)*c.dim], c.k, f, one); err != nil {
			return err
		}
		direct = append(direct, one.Neighbors...)
	}
	s, err := batch.CAGRA(idx, &sp, nil)
	if err != nil {
		return err
	}
	b, err := batch.New[T, int64](s, batch.Options{MaxK: c.k, MaxBatch: c.maxBatch, Slots: c.slots})
	if err != nil {
		return err
	}
	defer closeInto(&err, b)
	batched := make([]int64, c.recall*c.k)
	errs := make([]error, c.recall)
	var wg sync.WaitGroup
	for i := range c.recall {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := make([]float32, c.k)
			errs[i] = b.SearchIntoFiltered(context.Background(), f, queries[i*c.dim:(i+1)*c.dim], batched[i*c.k:(i+1)*c.k], d)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	bad := int64(0)
	for _, ids := range [][]int64{direct, batched} {
		for _, id := range ids {
			if id >= 0 && id != safe.SentinelID64 && allow[id/64]&(1<<(id%64)) == 0 {
				bad++
			}
		}
	}
	st := b.Stats()
	fmt.Fprintf(out, "# filtered recall@%d of %d queries (filter 0, %.0f%% of the rows) against filtered brute force: direct one by one %.4f, batched %.4f (%d batches, mean %.1f queries); %d ids outside the filter\n",
		c.k, c.recall, 100*c.tenantAllow, recallOf(direct, truth), recallOf(batched, truth), st.Batches, st.Mean(), bad)
	return nil
}
