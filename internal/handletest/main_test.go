package handletest

import (
	"testing"

	"github.com/cuvs-go/cuvs/internal/safetest"
)

func TestMain(m *testing.M) { safetest.Main(m) }
