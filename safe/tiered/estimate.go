package tiered

import (
	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/bruteforce"
	"github.com/cuvs-go/cuvs/safe/cagra"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
	"github.com/cuvs-go/cuvs/safe/internal/memest"
	"github.com/cuvs-go/cuvs/safe/internal/release"
	"github.com/cuvs-go/cuvs/safe/ivfflat"
	"github.com/cuvs-go/cuvs/safe/ivfpq"
)

// EstimateMemory estimates the device memory of a Build with p (nil:
// DefaultIndexParams) over s.Rows × s.Dim float32 vectors, of the built
// index, and of a search of s.Batch queries for s.K neighbours with sp
// (nil: defaults) right after the build. Build refuses, before copying
// the rows, a build whose BuildPeak exceeds what the device can still give
// (safe.MemoryError); an Extend that rebuilds the ANN tier and a Merge
// check, before cuVS is called, what cuVS's tiered index will take (the
// ANN build, its storage grown or made anew) and count it.
//
// What the index holds (Index):
//   - the package's copy of the rows (rows × dim float32; Dataset stays 0:
//     rows in host memory are copied straight into it);
//   - over more than p.MinANNRows rows, cuVS's tiered index
//     (cpp/src/neighbors/detail/tiered_index.cuh, index_state and
//     brute_force_storage; cpp/src/neighbors/tiered_index.cu;
//     c/src/neighbors/tiered_index.cpp; v26.06.00 and v26.08.01): the
//     backend's ANN index (cagra, ivfflat or ivfpq.EstimateMemory with the
//     parameters the package gives cuVS; CAGRA references the rows, except
//     26.06's copy padded to 16 bytes of rows whose width is not a multiple
//     of 16 bytes, and 26.08 copies nothing), and its storage of
//     rows + rows/16 rows, with norms (L2Expanded, L2SqrtExpanded,
//     CosineExpanded). cuVS sizes that storage's device_uvector<T> with
//     rows·dim·sizeof(T) elements where it means bytes: it takes four
//     times the rows' bytes (16 bytes a float), and 16 bytes a norm;
//   - otherwise the fresh tier's brute force (bruteforce.EstimateMemory:
//     its norms).
//
// BuildPeak: the copy, plus the ANN build's peak or the ANN index with
// cuVS's storage (allocated after the ANN build), whichever is larger.
//
// Search: right after the build, a one-call search: the backend's search
// scratch (or brute force's over the rows). A composed search (a filter,
// deletions, rows in both tiers) adds 12 bytes per candidate (up to 2·K a
// query) of device buffer, kept with the index (at most 32 idle sets), and
// as much pinned host memory.
//
// Left out: what the backends' estimates leave out; the ANN rows' brute
// force a selective filter builds (its norms, made on first use); deleted
// rows until a compaction; what an Extend adds (its ANN rebuild and
// cuVS's grown storage are checked and counted by Extend itself); the
// composed search's per-filter bitsets; 26.08's norms of the rows CAGRA
// computes for CosineExpanded.
func EstimateMemory(s safe.MemoryShape, p *IndexParams, sp *SearchParams) (safe.MemoryEstimate, error) {
	const op = "tiered.EstimateMemory"
	if err := s.Check(op); err != nil {
		return safe.MemoryEstimate{}, err
	}
	if s.DType != dlpack.Float32 {
		return safe.MemoryEstimate{}, kit.Argf(op, "shape.DType", "%s: the tiered index takes float32", s.DType)
	}
	pd, err := kit.Or(p, DefaultIndexParams)
	if err != nil {
		return safe.MemoryEstimate{}, err
	}
	if err := pd.validate(op); err != nil {
		return safe.MemoryEstimate{}, err
	}
	if err := pd.checkANNRows(op, "shape.Rows", int64(s.Rows)); err != nil {
		return safe.MemoryEstimate{}, err
	}
	rows, dim := int64(s.Rows), int64(s.Dim)
	cp := memest.Round(rows * dim * 4)
	var e safe.MemoryEstimate
	if rows <= pd.MinANNRows {
		be, err := bruteforce.EstimateMemory(safe.MemoryShape{Rows: s.Rows, Dim: s.Dim, DType: dlpack.Float32, Batch: s.Batch, K: s.K}, &bruteforce.BuildParams{Metric: pd.Metric, MetricArg: 2})
		if err != nil {
			return safe.MemoryEstimate{}, kit.Wrap(op, err)
		}
		return safe.MemoryEstimate{BuildPeak: cp + be.BuildPeak, Index: cp + be.Index, Search: be.Search}, nil
	}
	ae, err := annEstimate(op, s, pd, sp)
	if err != nil {
		return safe.MemoryEstimate{}, err
	}
	store := storageBytes(rows+rows/16, dim, pd.Metric)
	e.Index = cp + ae.Index + store
	e.BuildPeak = cp + max(ae.BuildPeak, ae.Index+store)
	e.Search = ae.Search
	return e, nil
}

// storageBytes is cuVS's brute_force_storage of rows rows: its
// device_uvector<float> of rows·dim·sizeof(float) elements, and of
// rows·sizeof(float) norms for the expanded metrics (each element four
// bytes: four times what the rows need).
func storageBytes(rows, dim int64, m safe.Metric) int64 {
	b := memest.Round(rows * dim * 4 * 4)
	switch m {
	case safe.L2Expanded, safe.L2SqrtExpanded, safe.CosineExpanded:
		b += memest.Round(rows * 4 * 4)
	}
	return b
}

// annEstimate is the backend's estimate for s (its rows on the device),
// with the parameters newCParams gives cuVS.
func annEstimate(op string, s safe.MemoryShape, p *IndexParams, sp *SearchParams) (safe.MemoryEstimate, error) {
	s.HostDataset, s.DType = false, dlpack.Float32
	var e safe.MemoryEstimate
	var err error
	switch p.Backend {
	case CAGRA:
		var cp cagra.IndexParams
		if cp, err = cagra.DefaultIndexParams(); err != nil {
			return e, kit.Wrap(op, err)
		}
		cp.Metric = p.Metric
		if p.CAGRA.GraphDegree != 0 {
			cp.GraphDegree = int(p.CAGRA.GraphDegree)
		}
		if p.CAGRA.IntermediateGraphDegree != 0 {
			cp.IntermediateGraphDegree = int(p.CAGRA.IntermediateGraphDegree)
		}
		var csp cagra.SearchParams
		if sp != nil {
			csp.ITopKSize = int(sp.CAGRA.ITopKSize)
		}
		if e, err = cagra.EstimateMemory(s, &cp, &csp); err != nil {
			return e, err
		}
		if w := int64(s.Dim) * 4; w%16 != 0 && release.Has(release.TieredParams2608) {
			// cagra.EstimateMemory counts 26.08's padded copy, made before
			// its build; the tiered index builds from a view of the rows
			copied := memest.Round(int64(s.Rows) * ((w + 15) / 16 * 16))
			e.Index -= copied
			e.BuildPeak -= copied
		}
	case IVFFlat:
		var fp ivfflat.IndexParams
		if fp, err = ivfflat.DefaultIndexParams(); err != nil {
			return e, kit.Wrap(op, err)
		}
		fp.Metric = p.Metric
		if p.IVFFlat.NLists != 0 {
			fp.NLists = p.IVFFlat.NLists
		}
		if p.IVFFlat.KMeansNIters != 0 {
			fp.KMeansNIters = p.IVFFlat.KMeansNIters
		}
		fp.AdaptiveCenters = p.IVFFlat.AdaptiveCenters
		var fsp *ivfflat.SearchParams
		if sp != nil && sp.IVFFlat.NProbes != 0 {
			if d, err := ivfflat.DefaultSearchParams(); err == nil {
				d.NProbes = sp.IVFFlat.NProbes
				fsp = &d
			}
		}
		e, err = ivfflat.EstimateMemory(s, &fp, fsp)
	case IVFPQ:
		var qp ivfpq.IndexParams
		if qp, err = ivfpq.DefaultIndexParams(); err != nil {
			return e, kit.Wrap(op, err)
		}
		qp.Metric = p.Metric
		if p.IVFPQ.NLists != 0 {
			qp.NLists = p.IVFPQ.NLists
		}
		if p.IVFPQ.KMeansNIters != 0 {
			qp.KMeansNIters = p.IVFPQ.KMeansNIters
		}
		if p.IVFPQ.PQBits != 0 {
			qp.PQBits = p.IVFPQ.PQBits
		}
		if p.IVFPQ.PQDim != 0 {
			qp.PQDim = p.IVFPQ.PQDim
		}
		var qsp *ivfpq.SearchParams
		if sp != nil && sp.IVFPQ.NProbes != 0 {
			if d, err := ivfpq.DefaultSearchParams(); err == nil {
				d.NProbes = sp.IVFPQ.NProbes
				qsp = &d
			}
		}
		e, err = ivfpq.EstimateMemory(s, &qp, qsp)
	}
	return e, err
}

// cTier is the device memory of cuVS's tiered index over rows rows, all
// under its ANN index, with its storage of alloc rows: the build's peak
// (the ANN build, or the ANN index with the storage, whichever is larger)
// and what it holds (the ANN index and the storage).
func cTier(op string, p *IndexParams, rows, alloc, dim int64) (peak, held int64, err error) {
	ae, err := annEstimate(op, safe.MemoryShape{Rows: int(rows), Dim: int(dim)}, p, nil)
	if err != nil {
		return 0, 0, err
	}
	store := storageBytes(alloc, dim, p.Metric)
	return max(ae.BuildPeak, ae.Index+store), ae.Index + store, nil
}

// reserveTier refuses (a *safe.MemoryError, before cuVS is called) a build
// of cuVS's tiered index needing need bytes beyond what is held when the
// device cannot give them, and otherwise counts need until done, and held
// until keep's release is called (the index's C part).
func reserveTier(op string, res *safe.Resources, need, held int64) (done func(), keep func() func(), err error) {
	done, err = kit.ReserveBuild(op, res, safe.MemoryEstimate{BuildPeak: need})
	if err != nil {
		return nil, nil, err
	}
	return done, func() func() { return kit.Charge(op, res, held) }, nil
}
