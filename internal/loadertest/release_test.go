package loadertest

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/cuvs-go/cuvs/generated"
)

func TestReleasesWindow(t *testing.T) {
	if got := generated.Releases(); !slices.Equal(got, []string{"26.06", "26.08"}) {
		t.Fatalf("Releases() = %v", got)
	}
	if generated.HeaderVersion("26.06") != "v26.06.00" || generated.HeaderVersion("26.08") != "v26.08.01" || generated.HeaderVersion("26.10") != "" {
		t.Error("HeaderVersion is wrong")
	}
	if generated.Release() != "" {
		t.Errorf("Release() before Load = %q", generated.Release())
	}
	for name, want := range map[string][]string{
		"cuvsCagraBuild":                   {"26.06", "26.08"}, // two signatures
		"cuvsCagraSerialize":               {"26.06"},
		"cuvsRMMAsyncMemoryResourceEnable": {"26.08"},
		"cuvsVersionGet":                   {"26.06", "26.08"},
		"noSuchFunction":                   nil,
	} {
		if got := generated.FunctionReleases(name); !slices.Equal(got, want) {
			t.Errorf("FunctionReleases(%s) = %v, want %v", name, got, want)
		}
	}
	if n := strings.Count(strings.Join(generated.Functions(), " ")+" ", "cuvsCagraBuild "); n != 1 {
		t.Errorf("Functions() lists cuvsCagraBuild %d times", n)
	}
}

func notInRelease(t *testing.T, err error, release string, in []string, variant string) {
	t.Helper()
	var nr *generated.NotInReleaseError
	if !errors.As(err, &nr) || !errors.Is(err, generated.ErrNotInRelease) || errors.Is(err, generated.ErrMissingSymbol) {
		t.Fatalf("got %v, want a *NotInReleaseError", err)
	}
	if nr.Release != release || !slices.Equal(nr.In, in) || nr.Variant != variant {
		t.Errorf("got %+v, want release %s, in %v, variant %q", nr, release, in, variant)
	}
	for _, s := range append([]string{release, nr.Symbol, variant}, in...) {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("%q does not name %q", err, s)
		}
	}
}

func TestRelease2606(t *testing.T) {
	load(t, lib)
	if generated.Release() != "26.06" {
		t.Fatalf("Release() = %q", generated.Release())
	}
	var p generated.CuvsCagraIndexParams_t
	if err := generated.CuvsCagraIndexParamsCreate(&p); err != nil {
		t.Fatal(err)
	}
	if p.Ref().IntermediateGraphDegree != 106 || p.Ref().GraphDegree != 206 {
		t.Errorf("params %d, %d", p.Ref().IntermediateGraphDegree, p.Ref().GraphDegree)
	}
	var p8 generated.CuvsCagraIndexParams_t_v2608
	notInRelease(t, generated.CuvsCagraIndexParamsCreate_v2608(&p8), "26.06", []string{"26.08"}, "CuvsCagraIndexParamsCreate")
	// One symbol, two signatures: the Go function of the loaded release
	// reaches it.
	if err := generated.CuvsCagraBuild(0, p, nil, 0); err == nil || !strings.Contains(err.Error(), "26.06 build from a DLManagedTensor") {
		t.Errorf("CuvsCagraBuild: %v", err)
	}
	notInRelease(t, generated.CuvsCagraBuild_v2608(0, 0, 0, 0), "26.06", []string{"26.08"}, "CuvsCagraBuild")
	notInRelease(t, generated.CuvsRMMAsyncMemoryResourceEnable(), "26.06", []string{"26.08"}, "")
	if generated.Has("cuvsRMMAsyncMemoryResourceEnable") {
		t.Error("Has: a 26.08 function on a 26.06 library")
	}
	// In 26.06 but absent from this library: still a missing symbol.
	var idx generated.CuvsCagraIndex_t
	if err := generated.CuvsCagraIndexCreate(&idx); !errors.Is(err, generated.ErrMissingSymbol) || errors.Is(err, generated.ErrNotInRelease) {
		t.Errorf("absent function of the release: %v", err)
	}
}

func TestRelease2608(t *testing.T) {
	load(t, libs["26.08"])
	if generated.Release() != "26.08" {
		t.Fatalf("Release() = %q", generated.Release())
	}
	// cuvsCagraIndexParams has another layout in 26.08: the 26.06 binding
	// refuses and names the one to call.
	var p generated.CuvsCagraIndexParams_t
	notInRelease(t, generated.CuvsCagraIndexParamsCreate(&p), "26.08", []string{"26.06"}, "CuvsCagraIndexParamsCreate_v2608")
	if p != 0 {
		t.Error("the refused call wrote its output")
	}
	var p8 generated.CuvsCagraIndexParams_t_v2608
	if err := generated.CuvsCagraIndexParamsCreate_v2608(&p8); err != nil {
		t.Fatal(err)
	}
	if p8.Ref().IntermediateGraphDegree != 108 || p8.Ref().GraphDegree != 208 {
		t.Errorf("params %d, %d", p8.Ref().IntermediateGraphDegree, p8.Ref().GraphDegree)
	}
	if err := generated.CuvsRMMAsyncMemoryResourceEnable(); err != nil {
		t.Errorf("26.08-only function: %v", err)
	}
	if err := generated.CuvsCagraBuild_v2608(0, p8, 0, 0); err == nil || !strings.Contains(err.Error(), "26.08 build from a cuvsDataset_t") {
		t.Errorf("CuvsCagraBuild_v2608: %v", err)
	}
	notInRelease(t, generated.CuvsCagraBuild(0, 0, nil, 0), "26.08", []string{"26.06"}, "CuvsCagraBuild_v2608")
	if !generated.Has("cuvsRMMAsyncMemoryResourceEnable") || !generated.Has("cuvsCagraIndexParamsCreate") {
		t.Error("Has is wrong")
	}
	// Gone in 26.08.
	notInRelease(t, generated.CuvsCagraSerialize(0, nil, 0, false), "26.08", []string{"26.06"}, "")
	// Common to both, absent here.
	if err := generated.CuvsSelectK(0, nil, nil, nil); !errors.Is(err, generated.ErrMissingSymbol) {
		t.Errorf("absent 26.08 function: %v", err)
	}
	// The shared functions still work.
	var major, minor, patch uint16
	if err := generated.CuvsVersionGet(&major, &minor, &patch); err != nil || major != 26 || minor != 8 || patch != 1 {
		t.Errorf("version %d.%d.%d, %v", major, minor, patch, err)
	}
}

func TestReleaseOutsideWindow(t *testing.T) {
	for name, version := range map[string]string{"26.10": "26.10.00", "25.12": "25.12.00", "noversion": ""} {
		err := generated.Load(libs[name])
		if err == nil {
			generated.Unload()
			t.Fatalf("%s: loaded", name)
		}
		var re *generated.ReleaseError
		if !errors.As(err, &re) || !errors.Is(err, generated.ErrUnsupportedRelease) {
			t.Fatalf("%s: got %v, want a *ReleaseError", name, err)
		}
		if re.Version != version || re.Library != libs[name] {
			t.Errorf("%s: %+v", name, re)
		}
		for _, s := range []string{"26.06", "26.08", libs[name], version} {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("%q does not name %q", err, s)
			}
		}
		if generated.Loaded() || generated.Release() != "" {
			t.Errorf("%s: loaded after a refusal", name)
		}
	}
	// The library can be loaded after a refusal.
	load(t, lib)
	generated.Unload()
}

func TestLoadUncheckedTakesTheNearestRelease(t *testing.T) {
	for name, want := range map[string]string{"26.10": "26.08", "25.12": "26.06", "26.08": "26.08"} {
		if err := generated.LoadUnchecked(libs[name]); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got := generated.Release()
		generated.Unload()
		if got != want {
			t.Errorf("%s loaded as %s, want %s", name, got, want)
		}
	}
}
