// Package safe is the safe layer of the Go bindings for NVIDIA cuVS: loading
// the library, resources, device and pinned memory, filters, results and
// the errors that the algorithm packages (safe/bruteforce, safe/cagra,
// safe/ivfflat, safe/ivfpq, safe/ivfsq, safe/refine, and safe/batch on top
// of them) share.
// Nothing in its API is a cgo type, and misuse comes back as an error, not
// as undefined behaviour in C.
//
// # Loading
//
// Call Load once before anything else. It finds libcuvs_c (WithLibrary,
// else $CUVS_LIBRARY, else the dynamic loader's search for libcuvs_c.so,
// else $CONDA_PREFIX/lib), refuses a library whose major.minor version is
// none of the releases the bindings serve (Releases: ErrVersion, naming
// them; WithoutVersionCheck overrides), and enables the device memory pool. Later
// calls do nothing. Until Load succeeds, every call fails with ErrNotLoaded.
//
// # The memory pool
//
// By default Load switches the device memory resource to a pool
// (cuvsRMMPoolMemoryResourceEnable): DefaultPoolInitialPercent (10%) of the
// device's memory is reserved at once, and the pool grows to at most
// DefaultPoolMaxPercent (60%). Without it, cuVS allocates and frees device
// memory with blocking calls in every search, and concurrent searches do
// not scale (on an H200, a CAGRA search stays at ~2.9k queries/s however
// many goroutines search; with the pool, throughput grows with them).
//
// The memory resource belongs to the whole process, not to a Resources:
// every later cuVS call, and any other user of RMM in the process (another
// library, Python through cgo), allocates from the pool, and the reserved
// memory is held until ResetMemoryResource. Choose the sizes with
// WithMemoryPool, or keep cuVS's default resource with WithoutMemoryPool
// when something else manages device memory. EnableMemoryPool and
// ResetMemoryResource change it later, for the whole process too.
//
// # Resources
//
// A Resources is a cuVS resources handle: a CUDA stream and the device it
// works on. Every call takes one. Calls on one Resources are serialized (a
// Resources may be shared, but then its goroutines take turns); give each
// goroutine that searches its own Resources, and the searches run in
// parallel, on one index if you like. Work is queued on the stream: results
// written to device memory are ready once Resources.Sync returns (the
// copies to Go memory, such as DeviceMatrix.ToHost, wait by themselves).
//
// # Tensors
//
// Functions take tensors as dlpack.Tensor (inputs) and dlpack.TensorMut
// (outputs). DeviceMatrix and DeviceVector own device memory from cuVS's
// memory resource (cuvsRMMAlloc); PinnedMatrix owns page-locked host memory
// (cuvsRMMHostAlloc), readable from Go and usable as device memory by cuVS;
// dlpack.NewHostMatrix lends a Go slice without copying, for the arguments
// that accept host memory. Which memory, element types, rank and layout
// each argument of each cuVS function accepts is checked before any C
// call, and a refusal is an *ArgError that names the argument.
// Copy and the DeviceMatrix copy methods move data between host and device
// (cuvsMatrixCopy).
//
// # Lifetimes and borrows
//
// Every handle has a Close, which is idempotent; a runtime cleanup frees
// what is dropped without one, but do not rely on it (device memory is
// scarcer than the garbage collector knows). Using a handle after Close is
// an error wrapping ErrClosed.
//
// Memory is borrowed, never freed under a user: a call borrows its tensors
// for its duration, and an index that keeps a reference to its dataset (a
// brute-force index always, CAGRA on device data whose rows are a multiple
// of 16 bytes, an index made from a graph) borrows it until the index's
// Close. Meanwhile the dataset's owner refuses to be closed or written, with
// a *dlpack.BorrowedError (errors.Is(err, dlpack.ErrBorrowed)) that names
// the index. Views into an index's own memory (cagra.Index.Dataset, Graph)
// expire with it: using one afterwards reports dlpack.ErrExpired.
//
// # Non-finite values and unfilled slots
//
// Float inputs in host memory (a SearchSlice's queries, the datasets and
// vectors given to Build and Extend in Go, C or pinned host memory) are read
// once before cuVS copies them: a NaN or an infinity is refused with an
// *ArgError naming the argument and the first bad row (cuVS would answer
// with NaN distances, or rows of sentinels, and NaN rows in IVF training
// poison every later search). Inputs in device memory are not read, which
// would cost a pass over them on the GPU: keeping them finite is the
// caller's part.
//
// A search cannot always fill k slots per query. What cuVS writes in an
// unfilled slot of a device output differs by algorithm (each package's
// Search says, and the table under Neighbor ids); results this module delivers in Go memory (Results) hold
// the sentinel of their neighbor type (SentinelID64 for int64 ids) with
// distance +Inf, whatever the algorithm: test ids with Valid.
//
// # Distances
//
// What a search (or graph build) returns as the distance of query q to row
// x, by package and metric; ‖·‖ is the Euclidean norm, ⟨q,x⟩ the inner
// product. A metric missing from a package's rows is refused: by the
// package before any C call, or by cuVS. "≈" marks distances computed from
// compressed rows. Package distance gives the formulas of the other
// metrics.
//
//	package       metrics                           distance
//	bruteforce    L2Expanded, L2Unexpanded          ‖q−x‖²
//	bruteforce    L2SqrtExpanded, L2SqrtUnexpanded  ‖q−x‖
//	bruteforce    InnerProduct                      ⟨q,x⟩, larger is nearer
//	bruteforce    CosineExpanded                    1 − cos(q,x)
//	bruteforce    L1, Linf, Canberra, LpUnexpanded, CorrelationExpanded, HellingerExpanded, HammingUnexpanded, RusselRaoExpanded, JensenShannon, KLDivergence   as package distance (KLDivergence carries a ½)
//	bruteforce    Haversine                         2·asin(√(sin²((q₀−x₀)/2) + cos q₀·cos x₀·sin²((q₁−x₁)/2))), 2-column rows (latitude, longitude) in radians
//	cagra         L2Expanded                        ‖q−x‖²
//	cagra         InnerProduct                      ⟨q,x⟩, larger is nearer
//	cagra         CosineExpanded                    1 − cos(q,x)
//	cagra         BitwiseHamming                    popcount(q xor x), int8/uint8 rows
//	ivfflat       L2Expanded                        ‖q−x‖²
//	ivfflat       L2SqrtExpanded                    ‖q−x‖
//	ivfflat       InnerProduct                      ⟨q,x⟩, larger is nearer
//	ivfflat       CosineExpanded                    1 − cos(q,x)
//	ivfpq         L2Expanded                        ≈ ‖q−x‖²
//	ivfpq         L2SqrtExpanded                    ≈ ‖q−x‖
//	ivfpq         InnerProduct                      ≈ ⟨q,x⟩, larger is nearer
//	ivfpq         CosineExpanded                    ≈ −cos(q,x), cuVS's score as it is (not 1 − cos)
//	ivfsq         L2Expanded                        ≈ ‖q−x‖²
//	ivfsq         L2SqrtExpanded                    ≈ ‖q−x‖
//	ivfsq         InnerProduct                      ≈ ⟨q,x⟩, larger is nearer
//	ivfsq         CosineExpanded                    ≈ 1 − cos(q,x)
//	hnsw          L2Expanded                        ‖q−x‖²
//	hnsw          InnerProduct                      1 − ⟨q,x⟩ (hnswlib's), smaller is nearer
//	tiered        L2Expanded                        ‖q−x‖²
//	tiered        L2SqrtExpanded                    ‖q−x‖, IVF backends only
//	tiered        InnerProduct                      ⟨q,x⟩, larger is nearer
//	tiered        CosineExpanded                    1 − cos(q,x) (IVFPQ backend, no fresh rows: ≈ −cos(q,x), as ivfpq)
//	refine        L2Expanded                        ‖q−x‖²
//	refine        L2SqrtExpanded                    ‖q−x‖, device memory only
//	refine        InnerProduct                      ⟨q,x⟩, larger is nearer
//	refine        CosineExpanded                    1 − cos(q,x), device memory only
//	distance      L2Expanded, L2Unexpanded          ‖q−x‖²
//	distance      L2SqrtExpanded, L2SqrtUnexpanded  ‖q−x‖
//	distance      InnerProduct                      ⟨q,x⟩
//	distance      CosineExpanded                    1 − cos(q,x)
//	distance      L1, Linf, Canberra, LpUnexpanded, CorrelationExpanded, HellingerExpanded, HammingUnexpanded, RusselRaoExpanded, JensenShannon, KLDivergence   as package distance (KLDivergence carries a ½)
//	nndescent     L2Expanded                        ‖q−x‖²
//	nndescent     L2SqrtExpanded                    ‖q−x‖
//	nndescent     InnerProduct                      ⟨q,x⟩, larger is nearer
//	nndescent     CosineExpanded                    1 − cos(q,x)
//	nndescent     L1                                Σ|q−x|
//	nndescent     BitwiseHamming                    popcount(q xor x), int8/uint8 rows
//	allneighbors  L2Expanded, L2Unexpanded          ‖q−x‖²
//	allneighbors  L2SqrtExpanded, L2SqrtUnexpanded  ‖q−x‖
//	allneighbors  InnerProduct                      ⟨q,x⟩, larger is nearer
//	allneighbors  CosineExpanded                    1 − cos(q,x)
//	allneighbors  L1, Linf, Canberra, LpUnexpanded, CorrelationExpanded, JensenShannon   as package distance
//	vamana        L2Expanded                        none (a graph file, no distances)
//	kmeans        L2Expanded, L2SqrtExpanded        none (centroids and labels; see its Inertia and ClusterCost)
//	batch         any                               the index's behind it
//	multigpu      any                               package cagra's, ivfflat's or ivfpq's for the index's metric
//
// Notes on the rows: L2Expanded and L2Unexpanded are both squared (the
// expanded form computes ‖q‖² + ‖x‖² − 2⟨q,x⟩, which loses precision for
// near rows); InnerProduct is the similarity itself, larger first, except
// in hnsw, whose hnswlib space returns 1 − ⟨q,x⟩, smaller first. What
// unfilled slots hold is under Neighbor ids.
// allneighbors's builders differ: brute force takes the metrics listed,
// NN-Descent L2Expanded, L2SqrtExpanded, CosineExpanded and InnerProduct
// (its distances as in the nndescent rows), IVF-PQ L2Expanded only. nndescent
// computes in float16 above 16 dimensions by default (see its
// DefaultIndexParams). kmeans's balanced mode also takes CosineExpanded and
// InnerProduct. multigpu's k-means takes L2Expanded and L2SqrtExpanded.
//
// # Neighbor ids
//
// The neighbor id type of each package's outputs, and what a slot cuVS
// could not fill holds in device (or, for hnsw, host) outputs. Results in
// Go memory (Results, SearchSlice, BuildSlice, the batcher) always hold
// the sentinel of their type (Sentinel) with distance +Inf instead.
//
//	package       ids              unfilled slot
//	bruteforce    int64            none: a filter letting fewer than k rows through is refused
//	cagra         uint32, int64    2147483647 (SentinelID32), distance math.MaxFloat32
//	ivfflat       int64            a repeated row id, or 9223372036854775807 (SentinelID64) when every probed list is empty, distance ±Inf
//	ivfpq         int64            9223372036854775807 (SentinelID64), distance ±Inf
//	ivfsq         int64            9223372036854775807 (SentinelID64), distance ±Inf
//	hnsw          int64, uint64    none from Search (k ≤ Rows()); 9223372036854775807 (SentinelID64), distance +Inf, from SearchSlice with a filter
//	tiered        int64            9223372036854775807 (SentinelID64), distance +Inf; the one-call paths write their backend's
//	refine        int64            none: k ≤ candidates
//	distance      none             none
//	nndescent     uint32           none: short lists are filled with other rows
//	allneighbors  int64            none
//	vamana        uint32           none: a row's unfilled slots are left out of the file
//	kmeans        none             none
//	batch         the index's      the sentinel of the type (Sentinel), distance +Inf
//	multigpu      int64            9223372036854775807 (SentinelID64), distance +Inf
//
// # Filters
//
// A Filter restricts a search to some rows: a bitset (one bit per index
// row) or a bitmap (one bit per query and row, brute force only). It is
// sized for the index's row count, uploaded once, and reusable by any
// number of searches, concurrent ones included.
//
// # Errors
//
// A failed cuVS call is an *Error: the Go operation (Op), the C function
// (Func), cuVS's reason (Reason, the first line of its text without the
// source location) and its full text with the stack trace (Text);
// errors.Is(err, ErrCuvs) holds. An argument refused before any C call is
// an *ArgError (errors.Is(err, ErrInvalidArgument)). A call the loaded
// library's release does not have is a *NotInReleaseError
// (errors.Is(err, ErrNotInRelease)), which names the releases that have
// it. The other sentinels: ErrClosed, ErrVersion, ErrNotLoaded,
// ErrLibraryNotFound and ErrMissingSymbol (the loaded library lacks a
// function: a build without an algorithm). An index in use is waited
// for, not refused: searches run together, an Extend waits its turn and
// runs alone, and Close waits for the calls in flight.
package safe
