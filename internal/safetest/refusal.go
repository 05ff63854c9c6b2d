package safetest

import (
	"errors"
	"strings"
	"testing"

	"github.com/cuvs-go/cuvs/safe"
)

// IsArg reports whether err is a *safe.ArgError naming arg.
func IsArg(err error, arg string) bool {
	var ae *safe.ArgError
	return errors.As(err, &ae) && ae.Arg == arg
}

// DeviceMemory returns the device allocations (cuvsRMMAlloc) the double
// holds now and its total count of them so far; ok is false in
// conformance mode, where nothing counts them.
func DeviceMemory() (live, acquired int64, ok bool) {
	if ctl == nil {
		return 0, 0, false
	}
	p := ctl.Counters()["rmm"]
	return p.Live(), p.Acquired, true
}

// Refused runs call, which must be refused with an *safe.ArgError naming
// arg (and, if not empty, saying why: a substring of the error) and, on
// the double, without allocating any device memory.
func Refused(t testing.TB, what, arg, why string, call func() error) {
	t.Helper()
	_, before, counted := DeviceMemory()
	err := call()
	if !IsArg(err, arg) {
		t.Errorf("%s: %v, want an *safe.ArgError naming %q", what, err, arg)
	} else if why != "" && !strings.Contains(err.Error(), why) {
		t.Errorf("%s: %v, want it to say %q", what, err, why)
	}
	if _, after, _ := DeviceMemory(); counted && after != before {
		t.Errorf("%s: refused after %d device allocations, want none", what, after-before)
	}
}
