// Package kmeans is cuVS's k-means on the GPU: Fit finds centroids (Lloyd's
// iterations from k-means++ / k-means||, random rows or centroids of
// yours, the best of NInit runs, optional per-row weights), Predict labels
// rows with their nearest centroid, ClusterCost measures a clustering;
// with Params.Balanced, cuVS's balanced (hierarchical) k-means, the one its
// IVF indexes train with, which keeps cluster sizes even.
//
//	if err := safe.Load(); err != nil { ... }
//	res, _ := safe.NewResources()
//	defer res.Close()
//	p, _ := kmeans.DefaultParams()
//	p.Clusters = 4
//	m, _ := kmeans.FitSlice(res, &p, data, dim, nil, nil) // data: rows × dim []float32
//	labels, _, _ := m.Predict(res, data, nil, false)      // []int32, one per row
//	// m.Centroids: 4 × dim, row-major
//
// The tensor functions (Fit, Predict, ClusterCost) take your tensors; Fit
// takes host data (streamed to the GPU Params.HostBatchRows rows at a time)
// or device data, but its centroids are device memory and its weights on
// x's side; Predict and ClusterCost take device data only. FitSlice and
// Model's methods take Go slices and copy them; a Model keeps its params,
// and Model.Predict predicts with them. Nil params mean DefaultParams
// (Predict: with Clusters the centroids' rows). Only L2Expanded and
// L2SqrtExpanded serve regular k-means. Fit's inertia (FitResult) is in
// squared distances whatever the metric, weighted with the weights rescaled
// to sum to the rows; Predict's in the metric's, possibly from a TF32
// product (Predict); ClusterCost squared and unweighted. Distances: see
// safe.Metric.
//
// # Design
//
// One API over two releases: 26.06 has two parameter structs
// (cuvsKMeansParams, with an inertia_check member cuVS never reads, and
// cuvsKMeansParams_v2 without it) and two sets of functions; 26.08 removed
// the _v2 functions and gave cuvsKMeansParams the v2 layout, renaming
// streaming_batch_size to device_buffer_samples (Params.HostBatchRows).
// Params is plain Go: each call creates the loaded release's C struct,
// fills it and destroys it, so no Go value ever holds a C struct of the
// wrong layout. On 26.06 the _v2 functions are used, the unversioned ones
// only when the library lacks them. The C code reads host data through its
// pointer and shape only, with no layout or rank check: Fit checks them.
//
// C calls: cuvsKMeansParamsCreate/Destroy (DefaultParams, and around every
// Fit and Predict), cuvsKMeansFit (Fit, FitSlice), cuvsKMeansPredict
// (Predict, Model.Predict), cuvsKMeansClusterCost (ClusterCost,
// Model.Cost); on 26.06 cuvsKMeansParamsCreate_v2/Destroy_v2,
// cuvsKMeansFit_v2 and cuvsKMeansPredict_v2 in their place.
// cuvsMultiGpuKMeansFit (26.08, multi-GPU) is not wrapped here.
package kmeans
