package safe_test

import (
	"testing"

	"github.com/cuvs-go/cuvs/internal/safetest"
)

// The tests run against the ABI test double, never a real libcuvs_c.
func TestMain(m *testing.M) { safetest.Main(m) }
