package cagra

import (
	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/safe/internal/cagraref"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
)

// The packages that convert a CAGRA index (safe/hnsw) reach its handle
// through safe/internal/cagraref, inside a shared use of the index.
func init() {
	cagraref.Use = func(x any, op, arg string, f func(h generated.CuvsCagraIndex_t, info cagraref.Info) error) error {
		idx, _ := x.(*Index)
		if idx == nil {
			return kit.Argf(op, arg, "nil *cagra.Index")
		}
		if err := idx.c.Life.Enter(op); err != nil {
			return err
		}
		defer idx.c.Life.Leave()
		return f(idx.c.H, cagraref.Info{
			Rows: idx.c.Rows.Load(), Dim: idx.c.Dim, Degree: idx.degree.Load(), DType: idx.dtype,
			Metric: idx.metric, MetricKnown: idx.metricKnown, OnDisk: idx.onDisk, GraphOnly: idx.graphOnly(),
			Device: idx.c.Dev,
		})
	}
}
