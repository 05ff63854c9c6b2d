// Package distance computes dense pairwise distances on the GPU
// (cuvsPairwiseDistance): the distance of every row of x to every row of y,
// for 16 metrics, float32, float16 or float64 rows, row-major or
// column-major, into a tensor of yours (Pairwise) or into Go memory
// (PairwiseSlice).
//
//	if err := safe.Load(); err != nil { ... }
//	res, _ := safe.NewResources()
//	defer res.Close()
//	// x: n × dim, y: m × dim, row-major []float32 in Go memory
//	d, _ := distance.PairwiseSlice(res, x, y, dim, safe.L2SqrtExpanded, 0)
//	// d[i*m+j] is the distance of x's row i to y's row j
//
// Pairwise takes device tensors and writes into yours; PairwiseSlice
// uploads Go slices and returns Go memory. Metrics lists the metrics and
// gives cuVS's definitions, which are not always the textbook's (L2Expanded
// is squared, InnerProduct is x·y itself, KLDivergence carries a ½).
// Distances and neighbor ids: see safe.Metric (what each metric returns
// here) and safe.Sentinel (unfilled slots).
//
// # Design
//
// What the C API does not say: the C function checks only x's dtype (its
// y and dist dtype variables are x's), so a wrong y or dist dtype would be
// found later, by the tensor conversion: Pairwise checks all three first.
// All three tensors must share one layout, C-contiguity tested first (see
// Pairwise for one-row and one-column tensors), and the extents are cast
// to 32-bit ints inside cuVS. HellingerExpanded overwrites x and y with
// their square roots during the call and squares them back afterwards;
// KLDivergence overwrites y with its logarithms and exponentiates it back
// (not when x and y are the same memory). The inputs come back only up to
// rounding, and anything reading them meanwhile sees the transformed
// values: Pairwise requires writable tensors for those metrics and holds
// them exclusively for the call. JaccardExpanded, Haversine, BrayCurtis,
// DiceExpanded and BitwiseHamming are cuvsDistanceType values the dense
// function throws on ("Unknown or unsupported distance metric").
//
// C calls: cuvsPairwiseDistance (Pairwise, PairwiseSlice); PairwiseSlice
// also allocates and copies with cuvsRMMAlloc/Free, cuvsMatrixCopy and
// cuvsStreamSync.
package distance
