package main

import (
	"fmt"
	"io"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/safe"
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
	data, err := dlpack.NewHostMatrix(widen(quantize[T](randomMatrix(c.seed, c.rows, c.dim))), c.rows, c.dim)
	if err != nil {
		return err
	}
	bf, err := bruteforce.Build(res, data, nil)
	if err != nil {
		return err
	}
	defer closeInto(&err, bf)
	queries := quantize[T](randomMatrix(querySeed(c.seed, -2), c.recall, c.dim))
	truth, err := bruteforce.SearchSlice(res, bf, widen(queries), c.k, nil)
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
