package ivfflat

import (
	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
)

// IndexParams configures Build (cuvsIvfFlatIndexParams). Start from
// DefaultIndexParams, which reads cuVS's defaults from the library.
//
// The zero IndexParams is refused by Build: NLists and KMeansNIters must be
// at least 1 and KMeansTrainsetFraction in (0, 1]; its zero Metric is
// L2Expanded and its zero AddDataOnBuild leaves the index empty (add rows
// with Extend).
type IndexParams struct {
	// Metric: L2Expanded (squared distances), L2SqrtExpanded,
	// InnerProduct or CosineExpanded (at least two dimensions).
	Metric safe.Metric
	// MetricArg is handed to cuVS as is; none of the metrics above reads it.
	MetricArg float32
	// AddDataOnBuild adds the dataset's rows (ids 0..rows-1) to the lists
	// after training; false trains the centers only.
	AddDataOnBuild bool
	// NLists is the number of inverted lists (k-means clusters), at least 1
	// and at most the dataset's rows.
	NLists uint32
	// KMeansNIters is the number of k-means iterations, at least 1.
	KMeansNIters uint32
	// KMeansTrainsetFraction is the fraction of the rows k-means trains on,
	// in (0, 1] (cuVS takes at least NLists rows, evenly spaced).
	KMeansTrainsetFraction float64
	// AdaptiveCenters moves the centers towards the rows Extend adds.
	AdaptiveCenters bool
	// ConservativeMemoryAllocation grows the lists by as little as needed
	// on Extend (less memory, slower extends).
	ConservativeMemoryAllocation bool
}

// SearchParams configures Search (cuvsIvfFlatSearchParams). A zero field means
// cuVS's default (DefaultSearchParams), so the zero SearchParams, like nil
// params, is cuVS's defaults.
type SearchParams struct {
	// NProbes is the number of nearest lists searched per query (0: cuVS's
	// default); cuVS uses min(NProbes, NLists). NProbes = NLists searches every
	// row (exact results); fewer is faster and approximate.
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
	// (every list probed is exact: the true nearest allowed rows); otherwise it then reads the distances (a copy to pinned
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
	// call, nothing added. safe.FilterExact probes every list, which is exact: the true nearest allowed rows.
	FilterPath safe.FilterPath
}

// DefaultIndexParams returns cuVS's defaults, read from the loaded library
// (cuvsIvfFlatIndexParamsCreate, cuvsIvfFlatIndexParamsDestroy):
// L2Expanded, 1024 lists, 20 k-means iterations on half the rows, data
// added on build, in cuVS v26.06.
func DefaultIndexParams() (IndexParams, error) {
	const op = "ivfflat.DefaultIndexParams"
	var p generated.CuvsIvfFlatIndexParams_t
	if err := generated.CuvsIvfFlatIndexParamsCreate(&p); err != nil {
		return IndexParams{}, kit.Wrap(op, err)
	}
	out := IndexParams{
		Metric: safe.Metric(p.Ref().Metric), MetricArg: p.Ref().MetricArg, AddDataOnBuild: p.Ref().AddDataOnBuild,
		NLists: p.Ref().NLists, KMeansNIters: p.Ref().KmeansNIters, KMeansTrainsetFraction: p.Ref().KmeansTrainsetFraction,
		AdaptiveCenters: p.Ref().AdaptiveCenters, ConservativeMemoryAllocation: p.Ref().ConservativeMemoryAllocation,
	}
	return out, kit.Wrap(op, generated.CuvsIvfFlatIndexParamsDestroy(p))
}

// DefaultSearchParams returns cuVS's default search parameters, read from
// the library (cuvsIvfFlatSearchParamsCreate/Destroy): 20 probes in v26.06.
func DefaultSearchParams() (SearchParams, error) {
	const op = "ivfflat.DefaultSearchParams"
	var p generated.CuvsIvfFlatSearchParams_t
	if err := generated.CuvsIvfFlatSearchParamsCreate(&p); err != nil {
		return SearchParams{}, kit.Wrap(op, err)
	}
	out := SearchParams{NProbes: p.Ref().NProbes}
	return out, kit.Wrap(op, generated.CuvsIvfFlatSearchParamsDestroy(p))
}

// supportedMetric reports whether IVF-Flat's search kernels implement m
// (cuVS v26.06's interleaved scan also takes the Unexpanded L2 forms, whose
// coarse search is not L2: they are not offered).
func supportedMetric(m safe.Metric) bool {
	switch m {
	case safe.L2Expanded, safe.L2SqrtExpanded, safe.InnerProduct, safe.CosineExpanded:
		return true
	}
	return false
}

func (p *IndexParams) validate(op string, rows, dim int64) error {
	if !supportedMetric(p.Metric) {
		return kit.Argf(op, "params.Metric", "%s is not supported by IVF-Flat (L2Expanded, L2SqrtExpanded, InnerProduct, CosineExpanded)", p.Metric)
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
	if !(p.KMeansTrainsetFraction > 0 && p.KMeansTrainsetFraction <= 1) {
		return kit.Argf(op, "params.KMeansTrainsetFraction", "%g is not in (0, 1]", p.KMeansTrainsetFraction)
	}
	if p.Metric == safe.CosineExpanded && dim < 2 {
		return kit.Argf(op, "params.Metric", "CosineExpanded needs at least two dimensions, the dataset has %d", dim)
	}
	return nil
}

// cValue is the C struct: plain values, read by cuVS during the call only.
func (p *IndexParams) cValue() generated.CuvsIvfFlatIndexParams {
	return generated.CuvsIvfFlatIndexParams{
		Metric: kit.CMetric(p.Metric), MetricArg: p.MetricArg, AddDataOnBuild: p.AddDataOnBuild,
		NLists: p.NLists, KmeansNIters: p.KMeansNIters, KmeansTrainsetFraction: p.KMeansTrainsetFraction,
		AdaptiveCenters: p.AdaptiveCenters, ConservativeMemoryAllocation: p.ConservativeMemoryAllocation,
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
