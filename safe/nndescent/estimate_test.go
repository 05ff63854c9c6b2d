package nndescent_test

import (
	"testing"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/nndescent"
)

// ndMemCase builds the graph of rows × d random float32 vectors with p,
// from a Go slice.
func ndMemCase(t *testing.T, name string, rows, d int, p nndescent.IndexParams) safetest.MemoryCase {
	t.Helper()
	data := safetest.Random(19, rows, d)
	est, err := nndescent.EstimateMemory(safe.MemoryShape{Rows: rows, Dim: d, DType: dlpack.Float32, HostDataset: true}, &p)
	must(t, err)
	return safetest.MemoryCase{Name: name, Estimate: est, CFunc: "cuvsNNDescentBuild", Tol: 0,
		Build: func(res *safe.Resources) (interface{ Close() error }, error) {
			hm, err := dlpack.NewHostMatrix(data, rows, d)
			if err != nil {
				return nil, err
			}
			return nndescent.Build(res, hm, &p)
		}}
}

func ndParams(t *testing.T) nndescent.IndexParams {
	t.Helper()
	p, err := nndescent.DefaultIndexParams()
	must(t, err)
	p.GraphDegree, p.IntermediateGraphDegree = 16, 32
	p.ReturnDistances = false
	return p
}

func TestEstimateMemoryAgainstDouble(t *testing.T) {
	p := ndParams(t)
	dist := p
	dist.ReturnDistances = true
	complete := p
	complete.GraphDegree, complete.IntermediateGraphDegree = 49, 49
	for _, c := range []safetest.MemoryCase{
		ndMemCase(t, "graph", 2000, 16, p),
		ndMemCase(t, "graph and distances", 2000, 16, dist),
		ndMemCase(t, "complete graph", 50, 16, complete),
	} {
		t.Run(c.Name, func(t *testing.T) { safetest.CheckMemoryEstimate(t, c) })
	}
}

func TestBuildRefusedOverMemoryLimit(t *testing.T) {
	safetest.CheckMemoryLimit(t, ndMemCase(t, "graph", 2000, 16, ndParams(t)))
}

func TestBuildRefusedOverPoolCap(t *testing.T) {
	safetest.CheckPoolCap(t, ndMemCase(t, "graph", 2000, 16, ndParams(t)), 1<<20, 50)
}
