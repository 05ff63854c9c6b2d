package kit

import "github.com/cuvs-go/cuvs/safe/internal/base"

// InRelease refuses, before any other work, a call of the C function
// cName that the loaded library's release does not have, with an error
// wrapping safe.ErrNotInRelease that names the releases that have it.
func InRelease(op, cName string) error { return base.InRelease(op, cName) }
