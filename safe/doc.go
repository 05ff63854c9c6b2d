// Package safe is the safe layer of the Go bindings for NVIDIA cuVS:
// loading the library, resources, device and pinned memory, filters,
// results and the errors that the algorithm packages (safe/cagra,
// safe/ivfpq, safe/bruteforce and the others, and safe/batch on top of
// them) share. Nothing in its API is a cgo type, and misuse comes back as
// an error, not as undefined behaviour in C.
//
//	if err := safe.Load(); err != nil { ... } // once, before anything else
//	res, _ := safe.NewResources()             // a CUDA stream: one per goroutine
//	defer res.Close()
//	data, _ := safe.DeviceMatrixFrom(res, rows, n, dim) // rows: n × dim []float32, copied
//	defer data.Close()
//	idx, _ := cagra.Build(res, data, nil) // borrows data until idx.Close
//	defer idx.Close()
//	out, _ := cagra.SearchSlice(res, idx, nil, queries, 10, nil)
//	ids, _ := out.Row(0) // test each id with safe.Valid: unfilled slots hold SentinelID64
//
// Load finds libcuvs_c, checks its release and enables a process-wide
// device memory pool; until it succeeds every call fails with
// ErrNotLoaded. Every call takes a Resources: calls on one are
// serialized, so give each goroutine its own; device outputs are ready
// once Resources.Sync returns (copies to Go memory, such as
// DeviceMatrix.ToHost, wait by themselves). Tensors are dlpack.Tensor
// (inputs) and dlpack.TensorMut (outputs): DeviceMatrix and DeviceVector
// (device memory), PinnedMatrix (page-locked host memory cuVS also takes
// as device memory), dlpack.NewHostMatrix (a Go slice, for the arguments
// that accept host memory); Copy moves data between them. A Filter
// restricts a search to some rows. Metric's doc has what each metric
// returns, per package (Distances), Sentinel's the id types (Neighbor ids).
//
// # Design
//
// Misuse is an error: which memory, element type, rank and layout each
// argument of each cuVS function accepts is checked before any C call (an
// *ArgError naming the argument, errors.Is(err, ErrInvalidArgument)); a
// failed cuVS call is an *Error (ErrCuvs; Op, Func, Reason, Text); a call
// the loaded release lacks a *NotInReleaseError (ErrNotInRelease); the
// other sentinels are ErrClosed, ErrVersion, ErrNotLoaded,
// ErrLibraryNotFound and ErrMissingSymbol. An index in use is waited for,
// not refused: searches run together, an Extend waits its turn and runs
// alone, and Close waits for the calls in flight. Memory is borrowed, never
// freed under a user: a call borrows its tensors for its duration, and an
// index that keeps a reference to its dataset (brute force always, CAGRA
// on device rows of a multiple of 16 bytes, an index made from a graph)
// borrows it until its Close; meanwhile the owner refuses to be closed or
// written (a *dlpack.BorrowedError naming the index), and views into an
// index's memory expire with it (dlpack.ErrExpired). Every handle's Close
// is idempotent; after it, a call with the handle is ErrClosed and a getter
// (Rows, Dim, DType...) returns its zero value. A runtime cleanup frees a
// handle dropped without Close, but device memory is scarcer than the
// garbage collector knows: do not rely on it. Float inputs in host
// memory (SearchSlice's queries, Build's and Extend's rows) are read once
// and a NaN or an infinity is refused, naming the first bad row (cuVS
// would answer with NaN distances or sentinels, and NaN rows in IVF
// training poison every later search); device inputs are not read (a pass
// on the GPU): keeping them finite is the caller's part. The memory pool
// belongs to the whole process (every RMM user in it allocates from it,
// and its reservation is held until ResetMemoryResource): without it every
// search allocates with blocking calls and concurrent searches do not
// scale (WithoutMemoryPool; Load has the sizes).
package safe
