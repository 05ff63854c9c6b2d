package kit

import (
	"fmt"
	"slices"
	"strings"

	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/safe"
)

// InRelease refuses, before any other work, a call of the C function
// cName that the loaded library's release does not have, with an error
// wrapping safe.ErrNotInRelease that names the releases that have it.
func InRelease(op, cName string) error {
	in := generated.FunctionReleases(cName)
	rel := generated.Release()
	if slices.Contains(in, rel) {
		return nil
	}
	if rel == "" {
		return fmt.Errorf("%s: %w", op, safe.ErrNotLoaded)
	}
	return fmt.Errorf("%s: %w: %s is in cuVS %s, the loaded library is cuVS %s",
		op, safe.ErrNotInRelease, cName, strings.Join(in, ", "), rel)
}
