package safe

import "github.com/cuvs-go/cuvs/generated"

// Metric is a distance measure (cuVS's cuvsDistanceType).
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
