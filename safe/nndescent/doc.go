// Package nndescent is NN-Descent: an approximate all-neighbours kNN graph
// of a dataset, built on the GPU by iteratively improving neighbour lists
// (cuVS's GNND). For each row the graph holds its GraphDegree nearest other
// rows (never the row itself); CAGRA uses it to build its own graph, and
// package allneighbors offers it among other builders.
//
//	if err := safe.Load(); err != nil { ... }
//	res, _ := safe.NewResources()
//	defer res.Close()
//	data, _ := dlpack.NewHostMatrix(rows, n, dim) // rows: n × dim float32 in Go memory
//	p, _ := nndescent.DefaultIndexParams()        // cuVS's defaults (degree 64)
//	idx, _ := nndescent.Build(res, data, &p)
//	defer idx.Close()
//	g, _ := idx.GraphSlice(res) // row i's neighbours: g[i*64 : (i+1)*64], uint32
//
// Build takes float32, float16, int8 or uint8 rows in host or device memory
// (row-major) and returns an Index holding the graph in host memory and,
// with IndexParams.ReturnDistances, the distances in device memory. Read
// them into tensors of yours with Graph and Distances (host or device
// memory), or into Go memory with GraphSlice and DistancesSlice. BuildInto
// writes the graph straight into a host uint32 matrix of yours and keeps
// nothing. There is no search and no serialization in cuVS's C API for
// NN-Descent. Distances and neighbor ids: see safe.Metric (what each metric
// returns here) and safe.Sentinel (unfilled slots).
//
// # Design
//
// What the C API does not say: cuvsNNDescentIndexDestroy frees only a
// handle whose dtype is uint32, which cuvsNNDescentBuild writes; a fresh
// handle's dtype is zero, so a handle whose build never ran would fail to
// be destroyed and leak: the package sets the dtype when it makes the
// handle. With a caller's graph (BuildInto), cuVS's index is a view of that
// memory, written with params.graph_degree ids per row whatever the
// tensor's shape, and return_distances must be false: BuildInto checks the
// shape and turns ReturnDistances off. cuVS lowers graph_degree to
// intermediate_graph_degree, and intermediate_graph_degree to rows-1, with
// a log line only; with graph_degree above rows-1 it fills a wider graph
// with narrower rows: Build refuses GraphDegree >= rows and
// IntermediateGraphDegree < GraphDegree instead. The graph never holds the
// row itself or a repeat (short lists are filled with random rows); with
// GraphDegree = rows-1 and no distances, cuVS skips NN-Descent and writes
// the complete graph. The index keeps no reference to the dataset.
//
// C calls: cuvsNNDescentIndexParamsCreate/Destroy (DefaultIndexParams;
// Build hands the params to C as a Go value), cuvsNNDescentIndexCreate/
// Destroy (Build, BuildInto, Close), cuvsNNDescentBuild (Build with graph
// NULL, BuildInto with the caller's graph), cuvsNNDescentIndexGetGraph
// (Graph, GraphSlice), cuvsNNDescentIndexGetDistances (Distances,
// DistancesSlice).
package nndescent
