package multigpu

import (
	"errors"
	"strconv"
	"strings"

	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/cagra"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
	"github.com/cuvs-go/cuvs/safe/ivfflat"
	"github.com/cuvs-go/cuvs/safe/ivfpq"
)

// Mode is how an index is laid out over the devices
// (cuvsMultiGpuDistributionMode): Sharded (the default: device r holds rows
// [r·⌈n/R⌉, (r+1)·⌈n/R⌉) of the dataset, and every query is searched on
// every device, the per-device top-k merged on the root rank, by TreeMerge
// or MergeOnRootRank) or Replicated (every device holds the whole index; a
// search's queries are split in batches over the devices, LoadBalancer, or
// go whole to the next device, RoundRobin). Sharded results over exact
// backends (IVF-Flat with every list probed) are the exact kNN of the whole
// dataset; the ids are dataset rows (see Shards for their numbering after
// an Extend).
type Mode int32

const (
	// Sharded splits the rows: device r builds on rows [r·⌈n/R⌉,
	// (r+1)·⌈n/R⌉), and every query is searched on every device, the
	// per-device top-k merged on the root rank. cuVS's default.
	Sharded Mode = iota
	// Replicated builds the whole index on every device; queries are
	// spread over them (SearchMode).
	Replicated
)

// c returns the C enum (whose zero is REPLICATED: Go's zero Mode is cuVS's
// default instead).
func (m Mode) c() generated.CuvsMultiGpuDistributionMode {
	if m == Replicated {
		return generated.CuvsMultiGpuDistributionMode_CUVS_NEIGHBORS_MG_REPLICATED
	}
	return generated.CuvsMultiGpuDistributionMode_CUVS_NEIGHBORS_MG_SHARDED
}

func modeOf(c generated.CuvsMultiGpuDistributionMode) Mode {
	if c == generated.CuvsMultiGpuDistributionMode_CUVS_NEIGHBORS_MG_REPLICATED {
		return Replicated
	}
	return Sharded
}

// String returns "Sharded" or "Replicated".
func (m Mode) String() string {
	switch m {
	case Sharded:
		return "Sharded"
	case Replicated:
		return "Replicated"
	}
	return "Mode(" + strconv.Itoa(int(m)) + ")"
}

func (m Mode) valid() bool { return m == Sharded || m == Replicated }

// SearchMode is how a replicated index spreads a search's queries
// (cuvsMultiGpuReplicatedSearchMode); a sharded index ignores it.
type SearchMode int32

const (
	// LoadBalancer splits the queries into batches of at most
	// RowsPerBatch, at least one per device, batch b on device b mod R.
	// cuVS's default.
	LoadBalancer SearchMode = SearchMode(generated.CuvsMultiGpuReplicatedSearchMode_CUVS_NEIGHBORS_MG_LOAD_BALANCER)
	// RoundRobin sends each whole search to the next device in turn; it
	// refuses a search of more than RowsPerBatch queries.
	RoundRobin SearchMode = SearchMode(generated.CuvsMultiGpuReplicatedSearchMode_CUVS_NEIGHBORS_MG_ROUND_ROBIN)
)

// String returns "LoadBalancer" or "RoundRobin".
func (m SearchMode) String() string {
	switch m {
	case LoadBalancer:
		return "LoadBalancer"
	case RoundRobin:
		return "RoundRobin"
	}
	return "SearchMode(" + strconv.Itoa(int(m)) + ")"
}

// MergeMode is how a sharded index merges the devices' results
// (cuvsMultiGpuShardedMergeMode); a replicated index ignores it. Both give
// the same results.
type MergeMode int32

const (
	// TreeMerge merges pairwise in rounds over NCCL. cuVS's default.
	TreeMerge MergeMode = iota
	// MergeOnRootRank sends every device's top-k to the root rank, which
	// merges them.
	MergeOnRootRank
)

// c returns the C enum (whose zero is MERGE_ON_ROOT_RANK: Go's zero
// MergeMode is cuVS's default instead).
func (m MergeMode) c() generated.CuvsMultiGpuShardedMergeMode {
	if m == MergeOnRootRank {
		return generated.CuvsMultiGpuShardedMergeMode_CUVS_NEIGHBORS_MG_MERGE_ON_ROOT_RANK
	}
	return generated.CuvsMultiGpuShardedMergeMode_CUVS_NEIGHBORS_MG_TREE_MERGE
}

func mergeOf(c generated.CuvsMultiGpuShardedMergeMode) MergeMode {
	if c == generated.CuvsMultiGpuShardedMergeMode_CUVS_NEIGHBORS_MG_MERGE_ON_ROOT_RANK {
		return MergeOnRootRank
	}
	return TreeMerge
}

// String returns "TreeMerge" or "MergeOnRootRank".
func (m MergeMode) String() string {
	switch m {
	case TreeMerge:
		return "TreeMerge"
	case MergeOnRootRank:
		return "MergeOnRootRank"
	}
	return "MergeMode(" + strconv.Itoa(int(m)) + ")"
}

// Distribution is what every multi-GPU search takes besides the base
// algorithm's params: the fields of cuvsMultiGpu*SearchParams. The zero
// Distribution is cuVS's defaults (LoadBalancer, TreeMerge, 2^20 rows per
// batch).
type Distribution struct {
	// SearchMode applies to replicated indexes.
	SearchMode SearchMode
	// MergeMode applies to sharded indexes.
	MergeMode MergeMode
	// RowsPerBatch bounds the queries one device searches at once
	// (n_rows_per_batch); 0 means cuVS's default, 2^20. cuVS divides by
	// it: a negative value is refused.
	RowsPerBatch int64
}

const defaultRowsPerBatch = 1 << 20

func (d *Distribution) resolve(op string) (Distribution, error) {
	var r Distribution
	if d != nil {
		r = *d
	}
	if r.SearchMode != LoadBalancer && r.SearchMode != RoundRobin {
		return r, kit.Argf(op, "params.SearchMode", "%d is not a search mode", r.SearchMode)
	}
	if r.MergeMode != TreeMerge && r.MergeMode != MergeOnRootRank {
		return r, kit.Argf(op, "params.MergeMode", "%d is not a merge mode", r.MergeMode)
	}
	if r.RowsPerBatch < 0 {
		return r, kit.Argf(op, "params.RowsPerBatch", "%d is negative", r.RowsPerBatch)
	}
	if r.RowsPerBatch == 0 {
		r.RowsPerBatch = defaultRowsPerBatch
	}
	return r, nil
}

// CagraIndexParams configures BuildCagra (cuvsMultiGpuCagraIndexParams):
// the layout and single-GPU CAGRA's own params, checked and converted by
// package cagra exactly as cagra.Build does. The zero value is a sharded
// index with cuVS's CAGRA defaults.
type CagraIndexParams struct {
	Mode Mode
	// Base: nil means cagra.DefaultIndexParams.
	Base *cagra.IndexParams
}

// CagraSearchParams configures CagraIndex.Search
// (cuvsMultiGpuCagraSearchParams). The zero value is cuVS's defaults.
type CagraSearchParams struct {
	Distribution
	// Base: nil means cuVS's defaults, as for cagra.Index.Search.
	Base *cagra.SearchParams
}

// IVFFlatIndexParams configures BuildIVFFlat (cuvsMultiGpuIvfFlatIndexParams).
// The zero value is a sharded index with cuVS's IVF-Flat defaults.
type IVFFlatIndexParams struct {
	Mode Mode
	// Base: nil means ivfflat.DefaultIndexParams. NLists applies to each
	// device's shard.
	Base *ivfflat.IndexParams
}

// IVFFlatSearchParams configures IVFFlatIndex.Search
// (cuvsMultiGpuIvfFlatSearchParams). The zero value is cuVS's defaults.
type IVFFlatSearchParams struct {
	Distribution
	// Base: nil means cuVS's defaults, as for ivfflat.Index.Search.
	Base *ivfflat.SearchParams
}

// IVFPQIndexParams configures BuildIVFPQ (cuvsMultiGpuIvfPqIndexParams).
// The zero value is a sharded index with cuVS's IVF-PQ defaults.
type IVFPQIndexParams struct {
	Mode Mode
	// Base: nil means ivfpq.DefaultIndexParams.
	Base *ivfpq.IndexParams
}

// IVFPQSearchParams configures IVFPQIndex.Search
// (cuvsMultiGpuIvfPqSearchParams). The zero value is cuVS's defaults.
type IVFPQSearchParams struct {
	Distribution
	// Base: nil means cuVS's defaults, as for ivfpq.Index.Search.
	Base *ivfpq.SearchParams
}

// Defaults are what cuVS's multi-GPU params Create functions set besides
// the base algorithm's params.
type Defaults struct {
	Mode         Mode
	SearchMode   SearchMode
	MergeMode    MergeMode
	RowsPerBatch int64
}

// DefaultDistribution reads the multi-GPU defaults from the library
// (cuvsMultiGpuIvfFlatIndexParamsCreate/Destroy,
// cuvsMultiGpuIvfFlatSearchParamsCreate/Destroy; the three algorithms'
// Create functions set the same values): Sharded, LoadBalancer, TreeMerge,
// 2^20 rows per batch in cuVS 26.06 and 26.08.
func DefaultDistribution() (Defaults, error) {
	const op = "multigpu.DefaultDistribution"
	var ip generated.CuvsMultiGpuIvfFlatIndexParams_t
	if err := generated.CuvsMultiGpuIvfFlatIndexParamsCreate(&ip); err != nil {
		return Defaults{}, kit.Wrap(op, err)
	}
	d := Defaults{Mode: modeOf(ip.Ref().Mode)}
	if err := generated.CuvsMultiGpuIvfFlatIndexParamsDestroy(ip); err != nil {
		return Defaults{}, kit.Wrap(op, err)
	}
	var sp generated.CuvsMultiGpuIvfFlatSearchParams_t
	if err := generated.CuvsMultiGpuIvfFlatSearchParamsCreate(&sp); err != nil {
		return Defaults{}, kit.Wrap(op, err)
	}
	d.SearchMode, d.MergeMode, d.RowsPerBatch = SearchMode(sp.Ref().SearchMode), mergeOf(sp.Ref().MergeMode), sp.Ref().NRowsPerBatch
	return d, kit.Wrap(op, generated.CuvsMultiGpuIvfFlatSearchParamsDestroy(sp))
}

// baseArg renames an argument error of a base package's params
// ("params.NLists") after the field it sits in here ("params.Base.NLists").
func baseArg(err error) error {
	var ae *safe.ArgError
	if errors.As(err, &ae) && strings.HasPrefix(ae.Arg, "params.") {
		c := *ae
		c.Arg = "params.Base." + strings.TrimPrefix(ae.Arg, "params.")
		return &c
	}
	return err
}
