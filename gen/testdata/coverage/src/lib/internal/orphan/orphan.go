// Package orphan: nobody outside imports it.
package orphan

import g "github.com/cuvs-go/cuvs/generated"

// MG references the multi-GPU build; no exported API reaches it.
func MG() error { return g.XMgBuild(0) }
