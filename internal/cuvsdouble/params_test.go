package cuvsdouble_test

import (
	"testing"
	"unsafe"

	"github.com/cuvs-go/cuvs/internal/cuvsdouble/internal/capi"
)

// The defaults are cuVS v26.06.00's (c/src/neighbors/*.cpp and the C++
// structs they copy): the safe layer reads them from the library.
func TestParamDefaults(t *testing.T) {
	f := newFixture(t)
	defer f.close()

	p := capi.Must(f.lib.ParamsCreate("CagraIndexParams"))
	ip := capi.GetCagraIndexParams(p)
	if ip.Metric != capi.L2Expanded || ip.IntermediateGraphDegree != 128 || ip.GraphDegree != 64 ||
		ip.BuildAlgo != capi.IvfPq || ip.NNDescentNiter != 20 || ip.Compression != nil || ip.GraphBuildParams == nil {
		t.Errorf("cagra index params %+v", ip)
	}
	if g := capi.GetIvfPqParams(ip.GraphBuildParams); g.BuildParams != nil || g.SearchParams != nil || g.RefinementRate != 1 {
		t.Errorf("graph_build_params %+v", g)
	}
	if c := f.ctl.Counters(); c["cagra_index_params"].Live() != 1 || c["cagra_ivf_pq_params"].Live() != 1 {
		t.Errorf("counters %v", c)
	}
	f.must(f.lib.ParamsDestroy("CagraIndexParams", p))

	p = capi.Must(f.lib.ParamsCreate("CagraCompressionParams"))
	if c := capi.GetCompressionParams(p); c != (capi.CompressionParams{PqBits: 8, KmeansNIters: 25}) {
		t.Errorf("compression params %+v", c)
	}
	f.must(f.lib.ParamsDestroy("CagraCompressionParams", p))

	p = capi.Must(f.lib.ParamsCreate("AceParams"))
	if a := capi.GetAceParams(p); a != (capi.AceParams{EfConstruction: 120, BuildDir: "/tmp/ace_build"}) {
		t.Errorf("ace params %+v", a)
	}
	f.must(f.lib.ParamsDestroy("AceParams", p))

	p = capi.Must(f.lib.ParamsCreate("CagraExtendParams"))
	if e := capi.GetExtendParams(p); e.MaxChunkSize != 0 {
		t.Errorf("extend params %+v", e)
	}
	f.must(f.lib.ParamsDestroy("CagraExtendParams", p))

	p = capi.Must(f.lib.ParamsCreate("CagraSearchParams"))
	want := capi.SearchParams{ItopkSize: 64, SearchWidth: 1, HashmapMaxFillRate: 0.5, NumRandomSamplings: 1,
		RandXorMask: 0x128394, PersistentLifetime: 2, PersistentDeviceUsage: 1}
	if s := capi.GetSearchParams(p); s != want {
		t.Errorf("search params %+v, want %+v", s, want)
	}
	f.must(f.lib.ParamsDestroy("CagraSearchParams", p))

	p = capi.Must(f.lib.ParamsCreate("IvfPqIndexParams"))
	wantPQ := capi.IvfPqIndexParams{Metric: capi.L2Expanded, MetricArg: 2, AddDataOnBuild: true, NLists: 1024,
		KmeansNIters: 20, KmeansTrainsetFraction: 0.5, PqBits: 8, MaxTrainPointsPerPqCode: 256, CodesLayout: 1}
	if g := capi.GetIvfPqIndexParams(p); g != wantPQ {
		t.Errorf("ivf-pq index params %+v", g)
	}
	f.must(f.lib.ParamsDestroy("IvfPqIndexParams", p))

	p = capi.Must(f.lib.ParamsCreate("IvfPqSearchParams"))
	if g := capi.GetIvfPqSearchParams(p); g != (capi.IvfPqSearchParams{NProbes: 20, MaxInternalBatchSize: 4096, PreferredShmemCarveout: 1}) {
		t.Errorf("ivf-pq search params %+v", g)
	}
	f.must(f.lib.ParamsDestroy("IvfPqSearchParams", p))

	p = capi.Must(f.lib.ParamsCreate("NNDescentIndexParams"))
	wantNND := capi.NNDescentParams{Metric: capi.L2Expanded, MetricArg: 2, GraphDegree: 64, IntermediateGraphDegree: 96,
		MaxIterations: 20, TerminationThreshold: 0.0001, ReturnDistances: true}
	if g := capi.GetNNDescentParams(p); g != wantNND {
		t.Errorf("nn-descent params %+v", g)
	}
	f.must(f.lib.ParamsDestroy("NNDescentIndexParams", p))

	// destroying NULL is fine, as `delete nullptr` in cuVS
	f.must(f.lib.ParamsDestroy("CagraSearchParams", nil))
	f.must(f.lib.ParamsDestroy("AceParams", nil))
}

// cuvsCagraIndexParamsDestroy frees graph_build_params by build_algo.
func TestIndexParamsDestroyTrap(t *testing.T) {
	f := newFixture(t)
	defer f.close()
	setAlgo := func(p unsafe.Pointer, algo int, g unsafe.Pointer) {
		v := capi.GetCagraIndexParams(p)
		v.BuildAlgo, v.GraphBuildParams = algo, g
		capi.SetCagraIndexParams(p, v)
	}

	// switching to ACE with the IVF-PQ object still there: undefined
	// behaviour in cuVS (the double frees the object as what it is)
	p := capi.Must(f.lib.ParamsCreate("CagraIndexParams"))
	setAlgo(p, capi.Ace, capi.GetCagraIndexParams(p).GraphBuildParams)
	f.must(f.lib.ParamsDestroy("CagraIndexParams", p))
	f.expectViolations("reads it as cuvsAceParams")

	// the safe way to use ACE: keep the IVF-PQ object aside, restore it
	// before Destroy, destroy the ACE params separately
	p = capi.Must(f.lib.ParamsCreate("CagraIndexParams"))
	ivf := capi.GetCagraIndexParams(p).GraphBuildParams
	ace := capi.Must(f.lib.ParamsCreate("AceParams"))
	setAlgo(p, capi.Ace, ace)
	// (a build would run here)
	setAlgo(p, capi.IvfPq, ivf)
	f.must(f.lib.ParamsDestroy("CagraIndexParams", p))
	f.must(f.lib.ParamsDestroy("AceParams", ace))
	if u := f.ctl.Counters().Unbalanced(); len(u) != 1 || u["resources"].Live() != 1 {
		t.Fatalf("unbalanced:\n%v", u)
	}

	// switching to NN-Descent: the IVF-PQ object leaks, and C offers no
	// other way to free it
	p = capi.Must(f.lib.ParamsCreate("CagraIndexParams"))
	setAlgo(p, capi.NNDescent, capi.GetCagraIndexParams(p).GraphBuildParams)
	f.must(f.lib.ParamsDestroy("CagraIndexParams", p))
	f.expectViolations("leaks graph_build_params")
	f.allowLeak("cagra_ivf_pq_params", 1)
}

func TestFromHnswParams(t *testing.T) {
	f := newFixture(t)
	defer f.close()
	p := capi.Must(f.lib.ParamsCreate("CagraIndexParams"))
	defer func() {
		// FromHnswParams set NN_DESCENT: restore IVF_PQ so Destroy frees the object
		v := capi.GetCagraIndexParams(p)
		v.BuildAlgo = capi.IvfPq
		capi.SetCagraIndexParams(p, v)
		f.must(f.lib.ParamsDestroy("CagraIndexParams", p))
	}()

	// small dataset: NN-Descent; the metric argument is not copied (cuVS)
	f.must(f.lib.FromHnswParams(p, 1000, 64, 16, 200, 0, capi.InnerProduct))
	v := capi.GetCagraIndexParams(p)
	if v.Metric != capi.L2Expanded || v.GraphDegree != 2+16*2/3 || v.IntermediateGraphDegree != 16+16*200/256 ||
		v.BuildAlgo != capi.NNDescent || v.NNDescentNiter != 5+200/16 {
		t.Fatalf("similar-search heuristic: %+v", v)
	}
	f.must(f.lib.FromHnswParams(p, 1000, 64, 16, 200, 1, capi.L2Expanded))
	if v = capi.GetCagraIndexParams(p); v.GraphDegree != 32 || v.IntermediateGraphDegree != 48 {
		t.Fatalf("same-footprint heuristic: %+v", v)
	}

	// large dataset: IVF-PQ settings written through the two pointers, which
	// Create leaves NULL: an error and a violation here, a crash in cuVS
	v.BuildAlgo = capi.IvfPq
	capi.SetCagraIndexParams(p, v)
	if err := f.lib.FromHnswParams(p, 2_000_000, 96, 16, 200, 0, capi.L2Expanded); err == nil {
		t.Fatal("accepted NULL ivf_pq_build_params")
	}
	f.expectViolations("must be set")

	bp := capi.Must(f.lib.ParamsCreate("IvfPqIndexParams"))
	defer f.lib.ParamsDestroy("IvfPqIndexParams", bp)
	sp := capi.Must(f.lib.ParamsCreate("IvfPqSearchParams"))
	defer f.lib.ParamsDestroy("IvfPqSearchParams", sp)
	capi.SetIvfPqParams(v.GraphBuildParams, capi.IvfPqParams{BuildParams: bp, SearchParams: sp, RefinementRate: 1})
	f.must(f.lib.FromHnswParams(p, 2_000_000, 96, 16, 200, 0, capi.InnerProduct))
	if v = capi.GetCagraIndexParams(p); v.BuildAlgo != capi.IvfPq || v.Metric != capi.L2Expanded {
		t.Fatalf("%+v", v)
	}
	b := capi.GetIvfPqIndexParams(bp)
	if b.Metric != capi.InnerProduct || b.NLists != 1000 || b.KmeansNIters != 10 || b.PqBits != 4 || b.PqDim != 64 {
		t.Fatalf("ivf-pq build params %+v", b)
	}
	// clamp(1/sqrt(2e6*1e-5), 32*1000/2e6, 1) = 1/sqrt(20)
	if d := b.KmeansTrainsetFraction - 0.22360679774997896; d > 1e-12 || d < -1e-12 {
		t.Fatalf("trainset fraction %v", b.KmeansTrainsetFraction)
	}
	s := capi.GetIvfPqSearchParams(sp)
	// round(2 + sqrt(1000)/20 + 200/16) = round(2 + 1.58 + 12) = 16
	if s.NProbes != 16 || s.LutDtype != 2 || s.InternalDistanceDtype != 2 || s.CoarseSearchDtype != 0 {
		t.Fatalf("ivf-pq search params %+v", s)
	}
	capi.SetIvfPqParams(v.GraphBuildParams, capi.IvfPqParams{RefinementRate: 1})
}
