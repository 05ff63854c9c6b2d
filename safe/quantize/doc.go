// Package quantize is cuVS's preprocessing quantizers: scalar (int8),
// binary (one bit per value) and product quantization (PQ, optionally
// after a coarse vector quantization, VQ). Each is trained on a dataset and
// then transforms rows into codes; scalar and PQ codes transform back into
// approximate rows.
//
// The codes are datasets of their own: scalar codes (int8) and binary codes
// (uint8) build CAGRA indexes (cagra.Build takes int8 and uint8 rows); the
// rows that Scalar.InverseTransform and PQ.InverseTransform give back
// (float32) build any index, brute force included.
//
// # The quantizers
//
//   - Scalar (TrainScalar): a range [Min, Max] from the quantiles of the
//     training values, mapped onto -128..127. It is a Go value: two floats,
//     nothing to free.
//   - Binary (TrainBinary): per-column thresholds (zero, the mean, or the
//     median of a sample); a bit is set for a value above its threshold.
//     BinaryTransform is the threshold-zero case without a quantizer.
//   - PQ (BuildPQ): codebooks trained by k-means; PQCodebook and VQCodebook
//     view them in the library's memory until Close.
//
// Binary and PQ hold library memory: Close them. Their transforms may run
// concurrently, each goroutine with its own safe.Resources. Every transform
// waits for its resources' stream: the output is ready when it returns.
//
// # What the C API does not say
//
//   - Scalar and binary take float32, float16 and float64 rows, in host or
//     device memory; the output must be on the same side as the input (the C
//     code reads it with the input's path). PQ takes float32 only; its codes,
//     labels and decoded rows are in device memory even for host input.
//   - The scalar range comes from the (1±Quantile)/2 quantiles of all the
//     values of at most 1e6/dim rows (sampled at random when there are
//     more). A value inside the range comes back within Step()/2.
//   - On its host path cuVS checks no shapes (it writes as many elements as
//     the input has); the package requires outputs of exactly the input's
//     shape (binary: rows × ceil(dim/8)), which also keeps cuVS's device
//     path from leaving extra binary columns unwritten.
//   - A binary quantizer is read as the element type of the data given to
//     it, whatever it was trained on, and for as many columns: Transform
//     refuses another element type or dimension. cuvsBinaryQuantizerCreate
//     and cuvsProductQuantizerCreate leave the handle uninitialized: the
//     package never uses a handle it has not trained.
//   - ThresholdSamplingMedian on device memory does not give medians in
//     cuVS 26.06 and 26.08: after sorting the sampled columns, the C++ code
//     copies the thresholds from the unsorted samples. On host memory it is
//     the median of an odd sample of rows taken with a fixed prime stride
//     (every row when SamplingRatio is 1 and the rows are odd in number).
//   - With VQ, cuvsProductQuantizerTransform computes the VQ labels only
//     into a labels vector it is given; without one every row is encoded
//     against VQ center 0, and InverseTransform without labels decodes
//     against center 0 too. The package requires labels with UseVQ (and
//     refuses them without).
//   - A VQ label is the nearest center by cuVS's balanced k-means predict,
//     whose distances on some GPUs (compute capability 9.x below 4096 rows
//     and centers, 10 and later always) are ‖x‖² + ‖c‖² − 2x·c with x·c
//     from a TF32 product: a label may name a center nearest only within
//     that rounding (on an H200, 1.73454 where another center was at
//     1.73373). The codes are the nearest entries of the residual
//     against the label's center.
//   - cuvsBinaryQuantizerDestroy and cuvsProductQuantizerDestroy free only
//     the handle: the trained thresholds and codebooks stay allocated in
//     device memory (cuVS's leak, not the package's; nothing in the C API
//     frees them). cuvsBinaryQuantizerTransform leaks a small quantizer on
//     every call the same way.
//   - PQ needs at least 2^PQBits training rows; dim must be a multiple of
//     PQDim (cuVS checks it with subspaces; without them it reads past its
//     training set).
//
// # The C API
//
// cuvsScalarQuantizerParamsCreate/Destroy (DefaultScalarParams),
// cuvsScalarQuantizerCreate, cuvsScalarQuantizerTrain and
// cuvsScalarQuantizerDestroy (TrainScalar), cuvsScalarQuantizerTransform
// (Scalar.Transform), cuvsScalarQuantizerInverseTransform
// (Scalar.InverseTransform); cuvsBinaryQuantizerParamsCreate/Destroy
// (DefaultBinaryParams), cuvsBinaryQuantizerCreate and
// cuvsBinaryQuantizerTrain (TrainBinary), cuvsBinaryQuantizerDestroy
// (Binary.Close), cuvsBinaryQuantizerTransformWithParams
// (Binary.Transform), cuvsBinaryQuantizerTransform (BinaryTransform);
// cuvsProductQuantizerParamsCreate/Destroy (DefaultPQParams),
// cuvsProductQuantizerCreate, cuvsProductQuantizerBuild and
// cuvsProductQuantizerGetPqBits/GetPqDim/GetEncodedDim/GetUseVq (BuildPQ,
// read once), cuvsProductQuantizerDestroy (PQ.Close),
// cuvsProductQuantizerTransform (PQ.Transform),
// cuvsProductQuantizerInverseTransform (PQ.InverseTransform),
// cuvsProductQuantizerGetPqCodebook (PQ.PQCodebook),
// cuvsProductQuantizerGetVqCodebook (PQ.VQCodebook); cuvsStreamSync after
// each training and transform. The functions and their behaviour are the
// same in cuVS 26.06 and 26.08.
package quantize
