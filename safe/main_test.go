package safe_test

import (
	"testing"

	"github.com/cuvs-go/cuvs/internal/safetest"
)

// The tests run against the ABI test double, or against the libcuvs_c that
// $CUVS_TEST_LIBRARY names (internal/safetest); what needs the double skips
// there.
func TestMain(m *testing.M) { safetest.Main(m) }
