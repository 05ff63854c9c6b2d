// Package kit is internal: its exported functions are not the API.
package kit

import "github.com/cuvs-go/cuvs/generated"

// Sync is reached by lib.Flush.
func Sync() error { return generated.XSync(0) }
