// Package allneighbors builds the all-neighbours kNN graph of a dataset on
// one GPU: for every row its k nearest rows, computed by brute force, by
// IVF-PQ with refinement, or by NN-Descent, optionally in batches of
// overlapping clusters for datasets larger than the GPU's memory, and
// optionally with mutual-reachability distances (what HDBSCAN clusters
// on).
//
//	if err := safe.Load(); err != nil { ... }
//	res, _ := safe.NewResources()
//	defer res.Close()
//	p, _ := allneighbors.DefaultIndexParams() // brute force unless p.Algo says otherwise
//	g, _ := allneighbors.BuildSlice(res, rows, n, dim, 10, &p) // rows: n × dim float32
//	ids, dists := g.Row(0) // row 0's 10 nearest rows (itself first), int64 ids
//
// Build takes a float32 dataset (host or device memory) and writes into
// tensors of yours: indices (int64) and, optionally, distances (float32),
// rows × k each. BuildMutualReachability also fills core distances and
// turns the distances into mutual-reachability ones. BuildSlice takes and
// returns Go memory. The builder is a typed choice (IndexParams.Algo with
// IndexParams.IVFPQ or IndexParams.NNDescent): the C struct's pointers to
// other params never reach the API. Nothing is kept after a build: there is
// no index. Multi-GPU builds (cuVS's multi-GPU resources) are not offered.
// Distances and neighbor ids: see safe.Metric (what each metric returns
// here) and safe.Sentinel (unfilled slots).
//
// # Design
//
// What the C API does not say, and what the package does about it:
// cuvsAllNeighborsIndexParamsDestroy also destroys the IVF-PQ and
// NN-Descent params the struct points to, so the package makes both in the
// library and frees them with the struct, once. With NN-Descent params
// given, cuVS builds with their metric but checks (and shifts the self edge
// by) the struct's: the package sets both to IndexParams.Metric. cuVS 26.06
// wants the outputs in device memory; 26.08 also takes host outputs (CPU,
// pinned or managed, all outputs the same kind) when the dataset is in host
// memory: the package takes host outputs on both, building into device
// buffers on 26.06 and copying them to yours. Brute force and IVF-PQ list
// each row among its own neighbours; cuVS shifts NN-Descent's rows to put
// the row first at distance 0, except with InnerProduct, where no row
// lists itself; with core distances, column 0 then holds the row's core
// distance. Batching (NClusters > 1) needs a host dataset and
// OverlapFactor < NClusters; a device dataset is built in one piece.
//
// C calls: cuvsAllNeighborsIndexParamsCreate/Destroy (DefaultIndexParams
// and every build), cuvsAllNeighborsBuild (Build, BuildMutualReachability,
// BuildSlice), with cuvsIvfPqIndexParamsCreate or
// cuvsNNDescentIndexParamsCreate for the builders' params.
package allneighbors
