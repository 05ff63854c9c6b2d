// Package mgparams carries the single-GPU algorithm packages' parameters
// into safe/multigpu: cuVS's multi-GPU params embed the single-GPU C
// structs, and safe/multigpu reuses the Go types of safe/cagra,
// safe/ivfflat and safe/ivfpq for them. Each of those packages sets its
// hooks in an init (mghook.go) with its own validation and C conversion, so
// the multi-GPU params are checked and filled exactly as the single-GPU
// ones; nothing else may set them.
package mgparams

import "github.com/cuvs-go/cuvs/generated"

// Hooks, set by the packages' inits. p is the package's *IndexParams or
// *SearchParams; nil means cuVS's defaults.
var (
	// CagraIndex validates p for a build over rows rows (the fewest a
	// device builds on: cuVS lowers the degrees to fit them, as
	// cagra.Build does, and refuses only what it cannot build) and
	// materializes it as a C cuvsCagraIndexParams of the loaded release
	// (one of c06, c08 set), made by cuvsCagraIndexParamsCreate with its
	// nested objects; release frees them, whatever happens.
	CagraIndex func(p any, op string, rows int64) (c06 generated.CuvsCagraIndexParams_t, c08 generated.CuvsCagraIndexParams_t_v2608, release func(), err error)
	// CagraSearch resolves p's defaults, validates and converts it.
	CagraSearch func(p any, op string) (generated.CuvsCagraSearchParams, error)
	// IVFFlatIndex validates p for rows × dim (rows: the fewest rows a
	// device builds on) and converts it.
	IVFFlatIndex func(p any, op string, rows, dim int64) (generated.CuvsIvfFlatIndexParams, error)
	// IVFFlatSearch resolves p's defaults, validates and converts it.
	IVFFlatSearch func(p any, op string) (generated.CuvsIvfFlatSearchParams, error)
	// IVFPQIndex validates p for dimension dim and converts it; rows is
	// returned as n_lists for the caller's rows check.
	IVFPQIndex func(p any, op string, dim int64) (generated.CuvsIvfPqIndexParams, error)
	// IVFPQSearch resolves p's defaults, validates and converts it.
	IVFPQSearch func(p any, op string) (generated.CuvsIvfPqSearchParams, error)
)
