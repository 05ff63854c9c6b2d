package safe

import "github.com/cuvs-go/cuvs/generated"

// Metric is a distance measure (cuVS's cuvsDistanceType). Which metrics
// each package takes, and what its searches return for each, is the table
// below (a test checks it against the packages).
//
// # Distances
//
// What a search (or graph build) returns as the distance of query q to row
// x, by package and metric; ‖·‖ is the Euclidean norm, ⟨q,x⟩ the inner
// product. A metric missing from a package's rows is refused: by the
// package before any C call, or by cuVS. "≈" marks distances computed from
// compressed rows. distance.Metrics gives the formulas of the other
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
type Metric int32

// Distance metrics. Which ones an index supports depends on the algorithm.
const (
	L2Expanded          = Metric(generated.CuvsDistanceType_L2Expanded)
	L2SqrtExpanded      = Metric(generated.CuvsDistanceType_L2SqrtExpanded)
	CosineExpanded      = Metric(generated.CuvsDistanceType_CosineExpanded)
	L1                  = Metric(generated.CuvsDistanceType_L1)
	L2Unexpanded        = Metric(generated.CuvsDistanceType_L2Unexpanded)
	L2SqrtUnexpanded    = Metric(generated.CuvsDistanceType_L2SqrtUnexpanded)
	InnerProduct        = Metric(generated.CuvsDistanceType_InnerProduct)
	Linf                = Metric(generated.CuvsDistanceType_Linf)
	Canberra            = Metric(generated.CuvsDistanceType_Canberra)
	LpUnexpanded        = Metric(generated.CuvsDistanceType_LpUnexpanded)
	CorrelationExpanded = Metric(generated.CuvsDistanceType_CorrelationExpanded)
	JaccardExpanded     = Metric(generated.CuvsDistanceType_JaccardExpanded)
	HellingerExpanded   = Metric(generated.CuvsDistanceType_HellingerExpanded)
	Haversine           = Metric(generated.CuvsDistanceType_Haversine)
	BrayCurtis          = Metric(generated.CuvsDistanceType_BrayCurtis)
	JensenShannon       = Metric(generated.CuvsDistanceType_JensenShannon)
	HammingUnexpanded   = Metric(generated.CuvsDistanceType_HammingUnexpanded)
	KLDivergence        = Metric(generated.CuvsDistanceType_KLDivergence)
	RusselRaoExpanded   = Metric(generated.CuvsDistanceType_RusselRaoExpanded)
	DiceExpanded        = Metric(generated.CuvsDistanceType_DiceExpanded)
	BitwiseHamming      = Metric(generated.CuvsDistanceType_BitwiseHamming)
)

// String returns cuVS's name of the metric, e.g. "L2Expanded".
func (m Metric) String() string { return generated.CuvsDistanceType(m).String() }

// Valid reports whether m is one of the metrics above.
func (m Metric) Valid() bool { return m >= L2Expanded && m <= BitwiseHamming }
