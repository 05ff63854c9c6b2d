package ivfsq

import (
	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
)

// IndexParams configures Build (cuvsIvfSqIndexParams). Start from
// DefaultIndexParams, which reads cuVS's defaults from the library.
//
// The zero IndexParams is refused by Build: NLists, KMeansNIters and
// MaxTrainPointsPerCluster must be at least 1; its zero Metric is
// L2Expanded and its zero AddDataOnBuild leaves the index empty (add rows
// with Extend).
type IndexParams struct {
	// Metric: L2Expanded (squared distances), L2SqrtExpanded, InnerProduct
	// or CosineExpanded (at least two dimensions).
	Metric safe.Metric
	// MetricArg is handed to cuVS as is; none of the metrics above reads it.
	MetricArg float32
	// AddDataOnBuild encodes the dataset's rows (ids 0..rows-1) into the
	// lists after training; false trains the centers and quantiser only.
	AddDataOnBuild bool
	// NLists is the number of inverted lists, at least 1 and at most the
	// dataset's rows.
	NLists uint32
	// KMeansNIters is the number of k-means iterations, at least 1.
	KMeansNIters uint32
	// MaxTrainPointsPerCluster bounds the training set (k-means and the
	// quantiser) to NLists × this many rows, sampled; at least 1.
	MaxTrainPointsPerCluster uint32
	// ConservativeMemoryAllocation grows the lists by as little as needed
	// on Extend.
	ConservativeMemoryAllocation bool
}

// SearchParams configures Search (cuvsIvfSqSearchParams). A zero field means
// cuVS's default (DefaultSearchParams), so the zero SearchParams, like nil
// params, is cuVS's defaults.
type SearchParams struct {
	// NProbes is the number of nearest lists searched per query (0: cuVS's
	// default); cuVS uses min(NProbes, NLists). Even NProbes = NLists is
	// approximate: distances are computed to the 8-bit codes.
	NProbes uint32
	// FilterPath chooses how a search with a filter runs; the zero value
	// is safe.FilterAuto. An IVF search sees only the rows of the lists it
	// probes: with a selective filter, the nearest allowed rows are mostly
	// in lists that NProbes does not reach, and recall falls (on the test
	// double, N = 20,000, D = 64, 1,024 lists, 20 probes: recall@10 0.421
	// unfiltered, 0.273 with 10% of the rows allowed, 0.050 with 0.1%),
	// and slots stay unfilled though enough rows are allowed.
	//
	// safe.FilterAuto (the zero value) keeps the filtered search's recall
	// near the unfiltered one's at every fraction f of the rows the filter
	// allows. It probes NProbes / f lists (cuVS drops the rejected rows
	// inside each probed list, so a probe brings f times the rows), and at
	// least enough for 8 × k allowed rows on average (8 × k × NLists /
	// allowed); when that is more than half the lists, it probes them all
	// (every list probed: the nearest allowed rows as the 8-bit codes rank them, the best this index can do); otherwise it then reads the distances (a copy to pinned
	// host memory and a stream sync: the search waits) and searches again,
	// with every list, the queries that came back with fewer than
	// min(k, allowed) slots filled. With every row allowed it is the plain
	// search. The numbers were fitted on the test double (package doc of
	// safe/internal/ivffilter): on the double, filtered recall@10 stays
	// within 0.03 of unfiltered at 100, 50, 20, 10, 2, 0.1% and 3 rows
	// allowed, with no unfilled slot while at least k rows are allowed.
	// They have not been measured on the real library.
	//
	// safe.FilterIndex is cuVS's own filtered search with NProbes, one C
	// call, nothing added. safe.FilterExact probes every list: the nearest allowed rows as the 8-bit codes rank them, the best this index can do.
	FilterPath safe.FilterPath
}

// DefaultIndexParams returns cuVS's defaults, read from the loaded library
// (cuvsIvfSqIndexParamsCreate/Destroy): L2Expanded, 1024 lists, 20 k-means
// iterations, 256 training rows per list, data added on build, in v26.06.
func DefaultIndexParams() (IndexParams, error) {
	const op = "ivfsq.DefaultIndexParams"
	var p generated.CuvsIvfSqIndexParams_t
	if err := generated.CuvsIvfSqIndexParamsCreate(&p); err != nil {
		return IndexParams{}, kit.Wrap(op, err)
	}
	out := IndexParams{
		Metric: safe.Metric(p.Ref().Metric), MetricArg: p.Ref().MetricArg, AddDataOnBuild: p.Ref().AddDataOnBuild,
		NLists: p.Ref().NLists, KMeansNIters: p.Ref().KmeansNIters, MaxTrainPointsPerCluster: p.Ref().MaxTrainPointsPerCluster,
		ConservativeMemoryAllocation: p.Ref().ConservativeMemoryAllocation,
	}
	return out, kit.Wrap(op, generated.CuvsIvfSqIndexParamsDestroy(p))
}

// DefaultSearchParams returns cuVS's default search parameters, read from
// the library (cuvsIvfSqSearchParamsCreate/Destroy): 20 probes in v26.06.
func DefaultSearchParams() (SearchParams, error) {
	const op = "ivfsq.DefaultSearchParams"
	var p generated.CuvsIvfSqSearchParams_t
	if err := generated.CuvsIvfSqSearchParamsCreate(&p); err != nil {
		return SearchParams{}, kit.Wrap(op, err)
	}
	out := SearchParams{NProbes: p.Ref().NProbes}
	return out, kit.Wrap(op, generated.CuvsIvfSqSearchParamsDestroy(p))
}

func (p *IndexParams) validate(op string, rows, dim int64) error {
	switch p.Metric {
	case safe.L2Expanded, safe.L2SqrtExpanded, safe.InnerProduct, safe.CosineExpanded:
	default:
		return kit.Argf(op, "params.Metric", "%s is not supported by IVF-SQ (L2Expanded, L2SqrtExpanded, InnerProduct, CosineExpanded)", p.Metric)
	}
	if p.NLists < 1 {
		return kit.Argf(op, "params.NLists", "0, want at least 1")
	}
	if int64(p.NLists) > rows {
		return kit.Argf(op, "params.NLists", "%d, the dataset has only %d rows (cuVS: number of rows can't be less than n_lists)", p.NLists, rows)
	}
	if p.KMeansNIters < 1 {
		return kit.Argf(op, "params.KMeansNIters", "0, want at least 1")
	}
	if p.MaxTrainPointsPerCluster < 1 {
		return kit.Argf(op, "params.MaxTrainPointsPerCluster", "0, want at least 1")
	}
	if p.Metric == safe.CosineExpanded && dim < 2 {
		return kit.Argf(op, "params.Metric", "CosineExpanded needs at least two dimensions, the dataset has %d", dim)
	}
	return nil
}

func (p *IndexParams) cValue() generated.CuvsIvfSqIndexParams {
	return generated.CuvsIvfSqIndexParams{
		Metric: kit.CMetric(p.Metric), MetricArg: p.MetricArg, AddDataOnBuild: p.AddDataOnBuild,
		NLists: p.NLists, KmeansNIters: p.KMeansNIters, MaxTrainPointsPerCluster: p.MaxTrainPointsPerCluster,
		ConservativeMemoryAllocation: p.ConservativeMemoryAllocation,
	}
}

func (s *SearchParams) validate(op string) error {
	if err := kit.CheckFilterPath(op, s.FilterPath); err != nil {
		return err
	}
	if s.NProbes < 1 {
		return kit.Argf(op, "params.NProbes", "0, want at least 1")
	}
	return nil
}

// resolve returns the parameters a search uses: s with each zero field
// replaced by cuVS's default (DefaultSearchParams, read once), or all the
// defaults for a nil s, checked against cuVS's ranges.
func (s *SearchParams) resolve(op string) (SearchParams, error) {
	d, err := searchDefaults.Get()
	if err != nil {
		return SearchParams{}, err
	}
	if s == nil {
		return *d, nil
	}
	r := *s
	if r.NProbes == 0 {
		r.NProbes = d.NProbes
	}
	return r, r.validate(op)
}

// searchDefaults are DefaultSearchParams, read once: what a nil
// *SearchParams means.
var searchDefaults = kit.Defaults[SearchParams]{Read: DefaultSearchParams}
