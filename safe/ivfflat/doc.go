// Package ivfflat is IVF-Flat: approximate nearest-neighbour search on the
// GPU over an inverted file. Build clusters the rows by k-means into
// IndexParams.NLists lists and copies each row, uncompressed, into the list
// of its nearest center; a search compares each query with the rows of its
// SearchParams.NProbes nearest lists only. NProbes = NLists is exact; fewer
// probes are faster and miss neighbours that sit in other lists.
//
// Distances and neighbor ids: see package safe's doc, sections Distances
// and Neighbor ids (what each metric returns here, and unfilled slots).
//
// # Building and searching
//
// Build takes float32, float16, int8 or uint8 rows in device memory (CUDA,
// pinned or managed; the C code converts them to a device view whatever
// the header says) and copies them: the index borrows nothing. Start from
// DefaultIndexParams, which reads cuVS's defaults from the library; NLists
// must not exceed the rows. Extend adds rows with ids of your own or, by
// default, Rows(), Rows()+1, ...
//
// Search takes queries, neighbors (int64: the rows' ids) and distances
// (float32) in device memory, k being the number of columns of neighbors,
// and optionally a bitset filter for Rows() rows. Any number of goroutines
// may search one index at once, each with its own safe.Resources; Extend
// needs the index alone (it waits its turn, and searches wait for it, at
// most one Extend's time); Close waits for both. Prepare binds a search's tensors once for a loop of
// Runs, as in package cagra.
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
//   - It has no size getter: Size is counted by Build and Extend, and read
//     from the file's header by Deserialize.
//   - cuvsIvfFlatExtend dereferences its ids argument even though the C++
//     accepts none: Extend always passes ids, making Rows()..Rows()+n-1 when
//     given none.
//   - cuvsIvfFlatIndexGetCenters overwrites the tensor it is given with a
//     view into the index instead of copying into it: Centers copies from
//     that view into your tensor.
//   - cuvsIvfFlatDeserialize sets the index dtype's code and bits but not
//     its lanes (left 0): the package reads lanes 0 as 1.
//
// # The C API
//
// cuvsIvfFlatIndexParamsCreate/Destroy (DefaultIndexParams),
// cuvsIvfFlatSearchParamsCreate/Destroy (DefaultSearchParams),
// cuvsIvfFlatIndexCreate/Destroy (Build, Deserialize, Close),
// cuvsIvfFlatBuild (Build), cuvsIvfFlatSearch (Search, Prepared.Run),
// cuvsIvfFlatExtend (Extend), cuvsIvfFlatSerialize (Serialize),
// cuvsIvfFlatDeserialize (Deserialize), cuvsIvfFlatIndexGetNLists and
// cuvsIvfFlatIndexGetDim (read once, NLists and Dim),
// cuvsIvfFlatIndexGetCenters (Centers). The index and search parameters
// are handed to C as Go values: plain structs that cuVS only reads during
// the call.
package ivfflat
