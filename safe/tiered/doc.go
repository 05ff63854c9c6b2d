// Package tiered is a growable index for a service that inserts and
// deletes while it serves: an ANN index (CAGRA, IVF-Flat or IVF-PQ) over
// the rows it was built from, and a fresh tier searched by brute force over
// the rows added since, searched together for any k up to Rows(), with or
// without a bitset filter, with stable ids and its own file format.
//
//	if err := safe.Load(); err != nil { ... }
//	res, _ := safe.NewResources()
//	defer res.Close()
//	idx, _ := tiered.Build(res, data, nil) // float32 rows; CAGRA by default
//	defer idx.Close()
//	_ = idx.Extend(res, more)              // new rows get the next ids
//	_, _ = idx.Delete([]int64{3})          // never returned again
//	out, _ := tiered.SearchSlice(res, idx, nil, queries, 10, nil)
//	ids, dists := out.Row(0)               // int64 ids, nearest first
//
// Index says how ids are given and kept, what Rows, Live and Stored count,
// how a filter and the deletions combine, how the index grows, merges,
// compacts and persists, and the memory it holds; Search what a search
// costs and writes in a slot it cannot fill. For distances and neighbor
// ids see safe.Metric and safe.Sentinel. NewSearcher adapts an index to
// package batch.
//
// # Design
//
// The ANN tier is a cuVS tiered index holding exactly the ANN rows; the
// fresh tier, the deletions and the merge of the two tiers' lists are the
// package's: cuVS's tiered search of both tiers caps k at the fresh rows
// and tests fresh row j against bit j of the filter, and its C API has no
// delete and no serializer. safe/tiered/DESIGN.md has the reasoning, with
// the cuVS sources each rule comes from.
package tiered
