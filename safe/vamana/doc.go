// Package vamana builds Vamana graphs on the GPU: the graph of Microsoft
// DiskANN, for search from SSD or memory on the CPU. Each row is inserted
// by a greedy search from the medoid and keeps at most GraphDegree
// neighbours chosen by RobustPrune (Alpha > 1 keeps longer edges, which
// make the graph navigable); cuVS inserts rows in batches of growing size.
//
// Distances and neighbor ids: see package safe's doc, sections Distances
// and Neighbor ids (what each metric returns here, and unfilled slots).
//
// # Building and writing
//
// Build takes float32, int8 or uint8 rows in host or device memory
// (row-major; host rows are copied to the device first) and returns an
// Index; Serialize writes it in DiskANN's
// in-memory index format (a graph file, and with the dataset a ".data"
// file), which DiskANN's diskann::Index::load reads. ReadGraph reads a
// graph file back into Go, to inspect it. Start from DefaultIndexParams,
// which reads cuVS's defaults from the library.
//
// There is no search in cuVS's C API for Vamana, no deserialization, and
// no way to read the graph but the file: search the graph with DiskANN, or
// build a CAGRA index (package cagra) or an HNSW one for search in cuVS.
//
// # What the C API does not say
//
//   - Only L2Expanded is supported, GraphDegree must be 32, 64, 128 or 256,
//     VisitedSize above it (rounded up to a power of two by cuVS, at most
//     512, or 1024 for degree 256) and VamanaIters at least 1.
//   - int(MaxFraction × rows) < 1, BatchBase < 1 and ReverseBatchSize 0
//     make batches of no rows: cuVS's build then never ends. Build refuses
//     them.
//   - cuVS's build over a host dataset (kDLCPU) hands the host pointer to
//     its GPU kernels: cudaErrorIllegalAddress, and every later CUDA call
//     of the process fails (cuVS issue #1380; cuVS's own tests build from
//     device memory only). Build copies host rows to device memory first.
//   - cuVS keeps a view of a device dataset whose rows are a multiple of 16
//     bytes and copies any other; Build borrows the viewed dataset until
//     Close (Borrows reports it), or owns its own device copy of host rows.
//   - The greedy search kernel keeps the row (padded to 16 elements), the
//     neighbour ids and QueueSize 16-byte queue slots in shared memory and
//     never asks for more than the 48 KiB a kernel gets by default: Build
//     refuses what does not fit rather than fail the launch.
//   - Rows may name the same neighbour more than once: cuVS's RobustPrune
//     drops a repeat only when its two merged lists meet it head to head,
//     writes a merge no longer than GraphDegree without pruning, and
//     overwrites only its result's slots, leaving an older tail behind.
//   - cuvsVamanaBuild writes the dataset's dtype into the handle first,
//     makes an empty index before checking anything (a refused build leaks
//     it), and returns success with an empty index for a tensor neither in
//     host nor in device memory; Build checks everything first.
//   - cuvsVamanaIndexGetDims writes nothing, successfully, for an index of
//     another dtype than float32, int8 and uint8.
//   - cuvsVamanaSerialize swallows a failure to write the ".data" file;
//     Serialize checks the file and reports it. The C API writes the
//     non-sector-aligned format only (no "_disk.index" file for DiskANN's
//     SSD index, and no PQ-compressed file).
//   - The medoid is a random row (cuVS's own TODO says so), and unfilled
//     neighbour slots are left out of the file: rows have up to
//     GraphDegree neighbours.
//
// # The C API
//
// cuvsVamanaIndexParamsCreate/Destroy (DefaultIndexParams; Build hands the
// params to C as a Go value), cuvsVamanaIndexCreate/Destroy (Build,
// Close), cuvsVamanaBuild (Build), cuvsVamanaIndexGetDims (Build, Dim),
// cuvsVamanaSerialize (Serialize, with include_dataset).
package vamana
