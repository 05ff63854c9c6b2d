package safe_test

import (
	"testing"

	"github.com/cuvs-go/cuvs/safe"
)

// The filter paths' names, and the zero value is FilterAuto.
func TestFilterPathString(t *testing.T) {
	var zero safe.FilterPath
	if zero != safe.FilterAuto {
		t.Errorf("the zero FilterPath is %v, want FilterAuto", zero)
	}
	for p, want := range map[safe.FilterPath]string{safe.FilterAuto: "auto", safe.FilterIndex: "index",
		safe.FilterExact: "exact", safe.FilterExact + 1: "FilterPath(3)", -1: "FilterPath(-1)"} {
		if p.String() != want {
			t.Errorf("%d.String() = %q, want %q", int(p), p.String(), want)
		}
	}
}
