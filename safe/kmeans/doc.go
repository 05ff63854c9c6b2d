// Package kmeans is cuVS's k-means on the GPU: Fit finds centroids (Lloyd's
// iterations from k-means++ / k-means||, random rows or centroids of
// yours, the best of NInit runs, optional per-row weights), Predict labels
// rows with their nearest centroid, ClusterCost measures a clustering; with
// Params.Balanced, cuVS's balanced (hierarchical) k-means, the one its IVF
// indexes train with, which keeps cluster sizes even.
//
// The tensor functions (Fit, Predict, ClusterCost) take your tensors;
// FitSlice and Model's methods take Go slices and copy them.
//
// Distances: see package safe's doc, section Distances (what Predict's
// metric means; Inertia and ClusterCost are described below).
//
// # One API over two releases
//
// 26.06 has two parameter structs (cuvsKMeansParams, with an inertia_check
// member cuVS never reads, and cuvsKMeansParams_v2 without it) and two
// sets of functions; 26.08 removed the _v2 functions and gave
// cuvsKMeansParams the v2 layout, renaming streaming_batch_size to
// device_buffer_samples (Params.HostBatchRows). Params is plain Go: each
// call creates the loaded release's C struct, fills it and destroys it, so
// no Go value ever holds a C struct of the wrong layout. On 26.06 the _v2
// functions are used, the unversioned ones only when the library lacks
// them.
//
// # What the C API does not say
//
//   - Fit takes host data (streamed to the GPU HostBatchRows rows at a
//     time); its centroids must still be device memory and its weights
//     host memory. The C code reads host data through its pointer and shape
//     only, with no layout or rank check: Fit checks them.
//     Predict and ClusterCost take device data only.
//   - Only L2Expanded and L2SqrtExpanded are accepted by regular k-means.
//     Fit's inertia is cuVS's cluster cost, in squared distances whatever
//     the metric (L2SqrtExpanded included), weighted; Predict's is in the
//     metric's distances (squared, or their square roots for
//     L2SqrtExpanded). ClusterCost is always in squared distances,
//     unweighted: an unweighted Fit's inertia is ClusterCost of its data.
//   - Sample weights are rescaled to sum to the number of rows in Fit
//     (always) and in Predict when normalizeWeights; otherwise Predict
//     weighs with them as given.
//   - Predict's distances (its labels and inertia) are computed as
//     ‖x‖² + ‖c‖² − 2x·c, clamped at 0. On some GPUs (compute capability
//     9.x below 4096 rows and 4096 centroids, 10 and later always) x·c
//     comes from a TF32 matrix product (10-bit mantissas), so for float32
//     data far from the origin each distance may be off by up to about
//     2⁻⁸ × Σ|x_j c_j|: on an H200, 240 rows in clusters 20 apart gave a
//     predict inertia of 77.18 where the exact sum (Fit's, and
//     ClusterCost's) was 57.74, and a label may pick a centroid that is
//     nearest only within that error. Fit's inertia and ClusterCost use
//     a kernel as exact as float32; float64 is exact. Center your data,
//     or use ClusterCost, where the inertia matters.
//   - Balanced k-means ignores Clusters (it uses the centroids' rows),
//     Init, MaxIter, Tol, NInit and OversamplingFactor; it refuses host
//     data, weights and float64; its Fit reports Iterations =
//     BalancedIters and its Predict an inertia of 0. Its metrics are
//     L2Expanded, L2SqrtExpanded, CosineExpanded and InnerProduct. It
//     re-balances as it trains (cpp/src/cluster/detail/kmeans_balanced.cuh)
//     by moving the centroids of small clusters next to large ones: 26.06
//     those of clusters under 0.25 × the mean size (0.2 in its last pass),
//     26.08 while a cluster is under 0.333 × the mean or another over 3 ×
//     (tolerances the C API does not expose); the last step is a plain
//     k-means one, so these are targets, not bounds. The offsets it
//     draws rows with come from a counter cuVS keeps across calls: two
//     balanced fits of the same data may differ.
//   - Init Array runs once whatever NInit says. For host data k-means++
//     seeds from min(3 × Clusters, rows) sampled rows unless InitSize says
//     otherwise (cuVS logs a warning).
//   - Predict's labels are int32; Predict and ClusterCost index with 32-bit
//     ints (rows and columns up to 2^31-1, and rows × columns too for the
//     balanced predict).
//   - Fit refuses more Clusters than rows here (cuVS's seeding samples
//     rows; what it does with too few was not tried on a GPU).
//   - cuVS draws its random numbers from a fixed seed: the same call on
//     the same data gives the same centroids.
//
// Nil params mean DefaultParams (Predict: with Clusters the centroids'
// rows); a Model from FitSlice keeps its params, and Model.Predict takes
// none: it predicts with the model's.
//
// # The C API
//
// cuvsKMeansParamsCreate/Destroy (DefaultParams, and around every Fit and
// Predict), cuvsKMeansFit (Fit, FitSlice), cuvsKMeansPredict (Predict,
// Model.Predict), cuvsKMeansClusterCost (ClusterCost, Model.Cost); on
// 26.06 cuvsKMeansParamsCreate_v2/Destroy_v2, cuvsKMeansFit_v2 and
// cuvsKMeansPredict_v2 in their place. cuvsMultiGpuKMeansFit (26.08,
// multi-GPU) is not wrapped here.
package kmeans
