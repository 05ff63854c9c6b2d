package lib

import "github.com/cuvs-go/cuvs/generated"

// Tests do not count.
func useUnused() error { return generated.XUnused(0) }
