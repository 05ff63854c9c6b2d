package integrity

import (
	"os"
	"strconv"
)

// benchMB is the benchmarks' size in MiB: CUVS_GO_INTEGRITY_MB, else 256.
func benchMB() int {
	if n, err := strconv.Atoi(os.Getenv("CUVS_GO_INTEGRITY_MB")); err == nil && n > 0 {
		return n
	}
	return 256
}
