package kit

import "github.com/cuvs-go/cuvs/safe"

// CheckFilterPath refuses a SearchParams.FilterPath that is none of
// safe's filter paths, naming the valid ones.
func CheckFilterPath(op string, p safe.FilterPath) error {
	if p < safe.FilterAuto || p > safe.FilterExact {
		return Argf(op, "params.FilterPath", "%d, want FilterAuto, FilterIndex or FilterExact", int(p))
	}
	return nil
}
