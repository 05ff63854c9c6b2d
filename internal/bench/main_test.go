package bench_test

import (
	"testing"

	"github.com/cuvs-go/cuvs/internal/safetest"
)

// TestMain loads the ABI test double (internal/cuvsdouble) in place of
// libcuvs_c; the benchmarks turn its instant mode on around their loops. In
// conformance mode ($CUVS_TEST_LIBRARY, internal/safetest) they skip: they
// measure the bindings against the double's floor, not a GPU.
func TestMain(m *testing.M) { safetest.Main(m) }
