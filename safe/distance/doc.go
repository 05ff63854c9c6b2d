// Package distance computes dense pairwise distances on the GPU
// (cuvsPairwiseDistance): the distance of every row of x to every row of y,
// for 16 metrics, float32, float16 or float64 rows, row-major or
// column-major, into a tensor of yours (Pairwise) or into Go memory
// (PairwiseSlice).
//
// Distances and neighbor ids: see package safe's doc, sections Distances
// and Neighbor ids (what each metric returns here, and unfilled slots).
//
// The metrics are cuVS's definitions, which are not always the textbook's:
//
//   - L2Expanded and L2Unexpanded are squared Euclidean distances (the
//     expanded form computes ‖x‖² + ‖y‖² − 2x·y and so loses precision
//     for nearby rows); L2SqrtExpanded and L2SqrtUnexpanded their roots;
//   - InnerProduct is x·y itself (larger is nearer), CosineExpanded
//     1 − cos, CorrelationExpanded 1 − Pearson's r;
//   - L1, Linf, Canberra (Σ|x−y|/(|x|+|y|), 0/0 terms skipped),
//     LpUnexpanded ((Σ|x−y|^p)^(1/p), p = metricArg);
//   - HammingUnexpanded is the fraction of differing coordinates,
//     RusselRaoExpanded (k − x·y)/k;
//   - HellingerExpanded is sqrt(1 − Σ sqrt(x·y)), JensenShannon
//     sqrt(½ Σ (x log(x/m) + y log(y/m))) with m = (x+y)/2, and
//     KLDivergence ½ Σ x log(x/y) (note the ½; a zero x contributes 0,
//     a zero y is read as log y = 0).
//
// # What the C API does not say
//
//   - The C function checks only x's dtype (its y and dist dtype variables
//     are x's): a wrong y or dist dtype is found later, by the tensor
//     conversion. Pairwise checks all three first.
//   - float16 inputs give float32 distances; float64 inputs float64.
//   - All three tensors must share one layout; C-contiguity is tested
//     first, and a tensor of one row or one column is both, so it reaches C
//     as row-major (this package's tensors always do): a column-major call
//     needs every tensor to have at least two rows and two columns.
//   - The extents are cast to 32-bit ints inside cuVS; Pairwise refuses
//     larger ones. Products of extents beyond 2^31 are not checked here
//     and were not tried on a GPU.
//   - HellingerExpanded overwrites x and y with their square roots during
//     the call and squares them back afterwards; KLDivergence overwrites y
//     with its logarithms and exponentiates it back (not when x and y are
//     the same memory). The inputs come back only up to rounding, and
//     anything reading them meanwhile sees the transformed values:
//     Pairwise requires writable tensors for those metrics and holds them
//     exclusively for the call.
//   - JaccardExpanded, Haversine, BrayCurtis, DiceExpanded and
//     BitwiseHamming are cuvsDistanceType values the dense function throws
//     on ("Unknown or unsupported distance metric").
//
// # The C API
//
// cuvsPairwiseDistance (Pairwise, PairwiseSlice); PairwiseSlice also
// allocates and copies with cuvsRMMAlloc/Free, cuvsMatrixCopy and
// cuvsStreamSync.
package distance
