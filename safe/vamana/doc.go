// Package vamana builds Vamana graphs on the GPU: the graph of Microsoft
// DiskANN, for search from SSD or memory on the CPU. Each row is inserted
// by a greedy search from the medoid and keeps at most GraphDegree
// neighbours chosen by RobustPrune (Alpha > 1 keeps longer edges, which
// make the graph navigable); cuVS inserts rows in batches of growing size.
//
//	if err := safe.Load(); err != nil { ... }
//	res, _ := safe.NewResources()
//	defer res.Close()
//	data, _ := dlpack.NewHostMatrix(rows, n, dim) // rows: n × dim float32 in Go memory
//	idx, _ := vamana.Build(res, data, nil)         // cuVS's defaults: L2, degree 32
//	defer idx.Close()
//	err := idx.Serialize(res, "index") // "index" and "index.data", for DiskANN
//
// Build takes float32, int8 or uint8 rows in host or device memory
// (row-major; host rows are copied to the device first) and returns an
// Index; Serialize writes it in DiskANN's in-memory index format (a graph
// file, and with the dataset a ".data" file), which DiskANN's
// diskann::Index::load reads. ReadGraph reads a graph file back into Go, to
// inspect it. Start from DefaultIndexParams, which reads cuVS's defaults
// from the library (IndexParams has the limits: L2Expanded only,
// GraphDegree 32, 64, 128 or 256). There is no search in cuVS's C API for
// Vamana, no deserialization, and no way to read the graph but the file:
// search the graph with DiskANN, or build a CAGRA index (package cagra) or
// an HNSW one for search in cuVS. Distances and neighbor ids: see
// safe.Metric (what each metric returns here) and safe.Sentinel (unfilled
// slots).
//
// # Design
//
// What the C API does not say: int(MaxFraction × rows) < 1, BatchBase < 1
// and ReverseBatchSize 0 make batches of no rows, and cuVS's build then
// never ends: Build refuses them. cuVS's build over a host dataset (kDLCPU)
// hands the host pointer to its GPU kernels (cudaErrorIllegalAddress, and
// every later CUDA call of the process fails; cuVS issue #1380; cuVS's own
// tests build from device memory only): Build copies host rows to device
// memory first. cuVS keeps a view of a device dataset whose rows are a
// multiple of 16 bytes and copies any other (Borrows). The greedy search
// kernel keeps the row (padded to 16 elements), the neighbour ids and
// QueueSize 16-byte queue slots in shared memory and never asks for more
// than the 48 KiB a kernel gets by default: Build refuses what does not fit
// rather than fail the launch. cuvsVamanaBuild writes the dataset's dtype
// into the handle first, makes an empty index before checking anything (a
// refused build leaks it), and returns success with an empty index for a
// tensor neither in host nor in device memory: Build checks everything
// first. cuvsVamanaIndexGetDims writes nothing, successfully, for an index
// of another dtype than float32, int8 and uint8. cuvsVamanaSerialize
// swallows a failure to write the ".data" file (Serialize checks the file),
// and writes the non-sector-aligned format only (no "_disk.index" file for
// DiskANN's SSD index, and no PQ-compressed file). Graph has what a file's
// rows may hold (repeats, a random medoid).
//
// C calls: cuvsVamanaIndexParamsCreate/Destroy (DefaultIndexParams; Build
// hands the params to C as a Go value), cuvsVamanaIndexCreate/Destroy
// (Build, Close), cuvsVamanaBuild (Build), cuvsVamanaIndexGetDims (Build,
// Dim), cuvsVamanaSerialize (Serialize, with include_dataset).
package vamana
