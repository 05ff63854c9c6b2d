package safetest

import (
	"math"

	"github.com/cuvs-go/cuvs/safe"
)

// RefDistance is metric m of query q to row x as cuVS's distance ops define
// it (cpp/src/distance/detail/distance_ops; Haversine
// cpp/src/neighbors/detail/haversine_distance.cuh), in float64; p is
// LpUnexpanded's. The tests of package distance and of brute force share
// it.
func RefDistance[T float32 | float64](m safe.Metric, p float64, q, x []T) float64 {
	k := float64(len(q))
	var acc, sq, sx, sq2, sx2 float64
	for j := range q {
		a, b := float64(q[j]), float64(x[j])
		switch m {
		case safe.L2Expanded, safe.L2SqrtExpanded, safe.L2Unexpanded, safe.L2SqrtUnexpanded:
			acc += (a - b) * (a - b)
		case safe.InnerProduct, safe.RusselRaoExpanded:
			acc += a * b
		case safe.CosineExpanded, safe.CorrelationExpanded:
			acc += a * b
			sq += a
			sx += b
			sq2 += a * a
			sx2 += b * b
		case safe.L1:
			acc += math.Abs(a - b)
		case safe.Linf:
			acc = math.Max(acc, math.Abs(a-b))
		case safe.LpUnexpanded:
			acc += math.Pow(math.Abs(a-b), p)
		case safe.Canberra:
			acc += math.Abs(a-b) / (math.Abs(a) + math.Abs(b))
		case safe.HammingUnexpanded:
			if a != b {
				acc++
			}
		case safe.HellingerExpanded:
			acc += math.Sqrt(a * b)
		case safe.JensenShannon:
			mm := (a + b) / 2
			acc += a*math.Log(a/mm) + b*math.Log(b/mm)
		case safe.KLDivergence:
			acc += a * math.Log(a/b)
		}
	}
	switch m {
	case safe.L2SqrtExpanded, safe.L2SqrtUnexpanded:
		return math.Sqrt(acc)
	case safe.CosineExpanded:
		return 1 - acc/(math.Sqrt(sq2)*math.Sqrt(sx2))
	case safe.CorrelationExpanded:
		return 1 - (k*acc-sq*sx)/math.Sqrt((k*sq2-sq*sq)*(k*sx2-sx*sx))
	case safe.LpUnexpanded:
		return math.Pow(acc, 1/p)
	case safe.HammingUnexpanded:
		return acc / k
	case safe.RusselRaoExpanded:
		return (k - acc) / k
	case safe.HellingerExpanded:
		return math.Sqrt(math.Max(0, 1-acc))
	case safe.JensenShannon:
		return math.Sqrt(acc / 2)
	case safe.KLDivergence:
		return acc / 2
	case safe.Haversine: // rows are (latitude, longitude) in radians
		s0 := math.Sin((float64(q[0]) - float64(x[0])) / 2)
		s1 := math.Sin((float64(q[1]) - float64(x[1])) / 2)
		return 2 * math.Asin(math.Sqrt(s0*s0+math.Cos(float64(q[0]))*math.Cos(float64(x[0]))*s1*s1))
	}
	return acc
}
