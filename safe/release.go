package safe

import "github.com/cuvs-go/cuvs/generated"

// Releases lists the cuVS releases these bindings serve ("26.06",
// "26.08"): Load accepts a libcuvs_c of any of them, and the safe API is the
// same on each. A call that only a later release has (the package docs say
// which) returns an error wrapping ErrNotInRelease on an earlier one.
func Releases() []string { return generated.Releases() }

// Release returns the release of the library Load opened ("26.06",
// "26.08"), or "" before Load.
func Release() string { return generated.Release() }
