package dtypetest

import (
	"errors"
	"strings"
	"testing"

	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/allneighbors"
	"github.com/cuvs-go/cuvs/safe/bruteforce"
	"github.com/cuvs-go/cuvs/safe/cagra"
	"github.com/cuvs-go/cuvs/safe/ivfpq"
	"github.com/cuvs-go/cuvs/safe/ivfsq"
	"github.com/cuvs-go/cuvs/safe/kmeans"
	"github.com/cuvs-go/cuvs/safe/nndescent"
)

// argRefused fails t unless err is an *safe.ArgError (refused before any
// C call) naming arg, whose text holds each of want.
func argRefused(t *testing.T, what string, err error, arg string, want ...string) {
	t.Helper()
	t.Logf("%s: %v", what, err)
	var ae *safe.ArgError
	if !errors.As(err, &ae) || ae.Arg != arg {
		t.Errorf("%s: %v, want an *safe.ArgError naming %s", what, err, arg)
		return
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%s: %q does not say %q", what, err.Error(), w)
		}
	}
}

// cRefused fails t unless err is a *safe.Error (cuVS's own refusal) whose
// reason holds want.
func cRefused(t *testing.T, what string, err error, want string) {
	t.Helper()
	t.Logf("%s: %v", what, err)
	var ce *safe.Error
	if !errors.As(err, &ce) {
		t.Errorf("%s: %v, want cuVS's refusal (*safe.Error) saying %q", what, err, want)
		return
	}
	if !strings.Contains(ce.Reason, want) {
		t.Errorf("%s: cuVS said %q, want %q", what, ce.Reason, want)
	}
}

// What cuVS does not take for 8-bit integers, by its C sources (both
// releases): brute force (cuvsBruteForceBuild: float32 and float16 only),
// IVF-SQ (cuvsIvfSqBuild: float32 and float16), all-neighbours
// (cuvsAllNeighborsBuild: float32) and k-means, balanced included
// (cuvsKMeansFit: float32 and float64) refuse int8/uint8 datasets
// ("Unsupported dataset DLtensor dtype: 0 and bits: 8"); the safe layer
// refuses them first, naming the argument and the types taken. The exact
// paths of filtered searches are brute force, so they refuse 8-bit data
// too; queries of another type than the index's are refused.
func TestRefusals(t *testing.T) { forTypes(t, testRefusals[int8], testRefusals[uint8]) }

func testRefusals[T elem](t *testing.T, d *data[T]) {
	safetest.Check(t)
	res := safetest.Resources(t)
	host := hostMatrix(t, d.rows, rows, dim)
	name := d.dtype.String()

	_, err := bruteforce.Build(res, host, nil)
	argRefused(t, "bruteforce.Build", err, "dataset", "dtype "+name, "float32", "float16")

	sp, err := ivfsq.DefaultIndexParams()
	must(t, err)
	_, err = ivfsq.Build(res, host, &sp)
	argRefused(t, "ivfsq.Build", err, "dataset", "dtype "+name, "float32", "float16")

	ap, err := allneighbors.DefaultIndexParams()
	must(t, err)
	ind := hostMatrix(t, make([]int64, rows*k), rows, k)
	argRefused(t, "allneighbors.Build", allneighbors.Build(res, host, ind, nil, &ap), "dataset", "dtype "+name, "float32")

	for _, balanced := range []bool{false, true} {
		kp, err := kmeans.DefaultParams()
		must(t, err)
		kp.Clusters, kp.Balanced = 8, balanced
		cent := devMatrix(t, res, make([]float32, 8*dim), 8, dim)
		_, err = kmeans.Fit(res, &kp, devMatrix(t, res, d.rows, rows, dim), nil, cent)
		argRefused(t, "kmeans.Fit", err, "x", "dtype "+name, "float32")
	}

	// CAGRA: the exact path of a filtered search is brute force
	ci, err := cagra.Build(res, host, cagraParams(t, safe.L2Expanded))
	must(t, err)
	safetest.Close(t, ci)
	_, allowed := allowEvery(10, 0)
	f, err := safe.NewBitsetFilterAllowing(res, rows, allowed)
	must(t, err)
	safetest.Close(t, f)
	_, err = cagra.SearchSlice(res, ci, &cagra.SearchParams{FilterPath: safe.FilterExact}, d.queries, k, f)
	argRefused(t, "cagra FilterExact", err, "params.FilterPath", "brute force (the exact path) takes float32 or float16 data, the index holds "+name)
	// queries of another type
	_, err = cagra.SearchSlice(res, ci, nil, make([]float32, nq*dim), k, nil)
	argRefused(t, "cagra float32 queries", err, "queries", "float32")

	// IVF-PQ: NewFiltered's dataset feeds its exact path (brute force)
	pi, err := ivfpq.Build(res, host, ivfPqParams(t, safe.L2Expanded))
	must(t, err)
	safetest.Close(t, pi)
	_, err = pi.NewFiltered(res, nil, f, devMatrix(t, res, d.rows, rows, dim), nq, k)
	argRefused(t, "ivfpq.NewFiltered with the dataset", err, "dataset", "dtype "+name, "brute force", "float32 or float16")
	_, err = ivfpq.SearchSlice(res, pi, nil, make([]float32, nq*dim), k)
	argRefused(t, "ivfpq float32 queries", err, "queries", "float32")
}

// BitwiseHamming needs 8-bit rows: NN-Descent's safe layer refuses float
// rows itself ("Data type needs to be int8 or uint8 for NN Descent to run
// with BitwiseHamming distance" is cuVS's check); CAGRA's build leaves it
// to cuVS, whose reasons (validate_cagra_knn_graph_build_constraints,
// both releases) the double gives too: float rows, and an IVF-PQ graph
// build (checked first).
func TestHammingRefusals(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	fl := hostMatrix(t, safetest.Random(3, 200, dim), 200, dim)
	p, err := nndescent.DefaultIndexParams()
	must(t, err)
	p.Metric, p.GraphDegree, p.IntermediateGraphDegree = safe.BitwiseHamming, 16, 32
	_, err = nndescent.Build(res, fl, &p)
	argRefused(t, "nndescent float32 BitwiseHamming", err, "params.Metric", "BitwiseHamming needs int8 or uint8 data, got float32")

	cp := cagraParams(t, safe.BitwiseHamming)
	cp.GraphDegree, cp.IntermediateGraphDegree = 16, 32
	cp.BuildAlgo = cagra.NNDescent
	_, err = cagra.Build(res, fl, cp)
	cRefused(t, "cagra float32 BitwiseHamming", err, "BitwiseHamming distance is only supported for int8_t and uint8_t data types")
	cp.BuildAlgo = cagra.IVFPQ
	u := hostMatrix(t, uint8Data.rows[:200*dim], 200, dim)
	_, err = cagra.Build(res, u, cp)
	cRefused(t, "cagra uint8 BitwiseHamming, IVF-PQ graph build", err, "IVF_PQ for CAGRA graph build does not support BitwiseHamming as a metric")
}
