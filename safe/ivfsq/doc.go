// Package ivfsq is IVF-SQ: approximate nearest-neighbour search on the GPU
// over an inverted file of scalar-quantised rows. Build clusters the rows
// by k-means into IndexParams.NLists lists and stores each row as its
// residual from its list's center, 8 bits per dimension (a per-dimension
// range learnt from a sample); a search compares each query with the codes
// in its SearchParams.NProbes nearest lists. A quarter of IVF-Flat's memory
// for float32 data, at the price of approximate distances even when every
// list is probed.
//
// Distances and neighbor ids: see package safe's doc, sections Distances
// and Neighbor ids (what each metric returns here, and unfilled slots).
//
// # Building and searching
//
// Build takes float32 or float16 rows in host or device memory and copies
// what it needs: the index borrows nothing. Start from DefaultIndexParams,
// which reads cuVS's defaults from the library. Extend adds rows (host or
// device; ids, if given, in the same kind of memory) with ids of your own
// or, by default, Rows(), Rows()+1, ...
//
// Search takes float32 or float16 queries (whatever the index was built
// from: the index holds codes), neighbors (int64 ids) and distances
// (float32), all in device memory, and optionally a bitset filter for
// Rows() rows. Concurrency is that of package ivfflat: searches in
// parallel, each goroutine with its own safe.Resources; Extend alone;
// Close waits. Prepare binds a search once for a loop of Runs.
//
// # Filtered search
//
// An IVF search sees only the rows of the lists it probes, so a selective
// filter with few probes loses recall and leaves slots unfilled. With the
// zero SearchParams.FilterPath (safe.FilterAuto) a filtered Search,
// Prepared.Run or SearchSlice raises the probes with the fraction of rows
// the filter allows, probes every list when that passes half of them, and
// searches again, with every list, the queries that came back short (that
// second pass reads the distances: such a search waits for the device).
// See SearchParams.FilterPath for the numbers; safe.FilterIndex is cuVS's
// own filtered search, safe.FilterExact probes every list.
//
// # What the C API does not say
//
//   - The index's dtype is code and bits only (lanes 0, read as 1) after
//     Build, all zero after Deserialize, and set by the next Extend; cuVS
//     never compares it with the queries'. DType reports it as it is.
//   - cuvsIvfSqIndexGetCenters overwrites the tensor it is given with a
//     view into the index: Centers copies from that view into your tensor.
//   - cuVS numbers rows itself only when extending an empty index.
//
// # The C API
//
// cuvsIvfSqIndexParamsCreate/Destroy (DefaultIndexParams),
// cuvsIvfSqSearchParamsCreate/Destroy (DefaultSearchParams),
// cuvsIvfSqIndexCreate/Destroy (Build, Deserialize, Close), cuvsIvfSqBuild
// (Build), cuvsIvfSqSearch (Search, Prepared.Run), cuvsIvfSqExtend
// (Extend), cuvsIvfSqSerialize (Serialize), cuvsIvfSqDeserialize
// (Deserialize), cuvsIvfSqIndexGetSize/GetNLists/GetDim (read after every
// change: Size, NLists, Dim), cuvsIvfSqIndexGetCenters (Centers). The index
// and search parameters are handed to C as Go values.
package ivfsq
