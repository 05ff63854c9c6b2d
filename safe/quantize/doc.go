// Package quantize is cuVS's preprocessing quantizers: scalar (int8),
// binary (one bit per value) and product quantization (PQ, optionally after
// a coarse vector quantization, VQ). Each is trained on a dataset and then
// transforms rows into codes; scalar and PQ codes transform back into
// approximate rows.
//
//	if err := safe.Load(); err != nil { ... }
//	res, _ := safe.NewResources()
//	defer res.Close()
//	in, _ := dlpack.NewHostMatrix(rows, n, dim)   // rows: n × dim float32 in Go memory
//	q, _ := quantize.TrainScalar(res, in, nil)    // cuVS's defaults: the 0.99 quantile range
//	codes := make([]int8, n*dim)
//	out, _ := dlpack.NewHostMatrix(codes, n, dim) // on the input's side (here Go memory)
//	err := q.Transform(res, in, out)              // int8 rows: cagra.Build takes them
//
// Scalar (TrainScalar, or NewScalar for a range of yours) maps a range
// [Min, Max] from the quantiles of the training values onto -128..127; it
// is a Go value, nothing to free. Binary (TrainBinary) keeps per-column
// thresholds (zero, the mean, or the median of a sample); BinaryTransform
// is the threshold-zero case without a quantizer. PQ (BuildPQ) trains
// codebooks by k-means; PQCodebook and VQCodebook view them until Close.
// Binary and PQ hold library memory: Close them; their transforms may run
// concurrently, each goroutine with its own safe.Resources. Every transform
// waits for its resources' stream. Scalar and binary take float32, float16
// and float64 rows, in host or device memory, with outputs on the input's
// side; PQ takes float32 only, and its codes, labels and decoded rows are
// in device memory even for host input. The codes are datasets of their
// own: int8 and uint8 codes build CAGRA indexes, and the float32 rows the
// inverse transforms give back build any index, brute force included.
//
// # Design
//
// What the C API does not say: on its host path cuVS checks no shapes (it
// writes as many elements as the input has); the package requires outputs
// of exactly the input's shape (binary: rows × ceil(dim/8)), which also
// keeps cuVS's device path from leaving extra binary columns unwritten. A
// binary quantizer is read as the element type of the data given to it,
// whatever it was trained on, and for as many columns: Transform refuses
// another element type or dimension. cuvsBinaryQuantizerCreate and
// cuvsProductQuantizerCreate leave the handle uninitialized: the package
// never uses a handle it has not trained. With VQ,
// cuvsProductQuantizerTransform computes the VQ labels only into a labels
// vector it is given; without one every row is encoded against VQ center
// 0, and InverseTransform without labels decodes against center 0 too: the
// package requires labels with UseVQ (and refuses them without). PQ's dim
// must be a multiple of PQDim: cuVS checks it with subspaces, and without
// them reads past its training set. cuvsBinaryQuantizerDestroy and
// cuvsProductQuantizerDestroy free only the handle (cuVS's leak: see
// TrainBinary, BuildPQ, BinaryTransform); Threshold's doc has where
// ThresholdSamplingMedian gives no medians, PQ.Transform how VQ labels
// round. Each function names its C calls (the same, and behaving the same,
// in cuVS 26.06 and 26.08): the params' Create/Destroy in the Default*
// functions, Create and Train or Build in TrainScalar, TrainBinary and
// BuildPQ (the PQ getters read once), cuvsStreamSync after each.
package quantize
