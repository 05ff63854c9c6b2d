package kmeans_test

import (
	"errors"
	"os"
	"os/exec"
	"testing"

	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/internal/cuvsdouble"
	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/kmeans"
)

const fallbackEnv = "KMEANS_TEST_V1_CHILD"

// A 26.06 library without the _v2 functions is served through the older
// cuvsKMeansParams and cuvsKMeansFit/Predict. The test runs itself again
// on a double built without the _v2 symbols.
func TestV1Fallback(t *testing.T) {
	if os.Getenv(fallbackEnv) != "" {
		v1Child(t)
		return
	}
	safetest.Double(t, "a second build of the double")
	path := cuvsdouble.Build(t, cuvsdouble.Release(cuvsdouble.Release2606),
		cuvsdouble.Omit("cuvsKMeansParamsCreate_v2", "cuvsKMeansParamsDestroy_v2", "cuvsKMeansFit_v2", "cuvsKMeansPredict_v2"))
	cmd := exec.Command(os.Args[0], "-test.run=^TestV1Fallback$", "-test.count=1")
	cmd.Env = append(os.Environ(), fallbackEnv+"=1", safetest.LibraryEnv+"="+path)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("child on the library without _v2: %v\n%s", err, out)
	}
}

func v1Child(t *testing.T) {
	if safe.Release() != "26.06" {
		t.Fatalf("release %s", safe.Release())
	}
	var v2 generated.CuvsKMeansParams_v2_t
	if err := generated.CuvsKMeansParamsCreate_v2(&v2); !errors.Is(err, generated.ErrMissingSymbol) {
		t.Fatalf("cuvsKMeansParamsCreate_v2 on the library without it: %v", err)
	}
	res := safetest.Resources(t)
	const k = 3
	data, truth, _ := blobs(8, k, 20)
	p, err := kmeans.DefaultParams()
	if err != nil {
		t.Fatal(err)
	}
	p.Clusters, p.NInit = k, 3
	m, err := kmeans.FitSlice(res, &p, data, dim, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	labels, _, err := m.Predict(res, data, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	checkPartition(t, labels, truth, k)
}
