// Package lib is a synthetic safe/ package for the coverage report's test.
package lib

import (
	"github.com/cuvs-go/cuvs/gen/testdata/coverage/src/lib/internal/kit"
	"github.com/cuvs-go/cuvs/generated"
)

// Index is an exported type.
type Index struct{ h int }

// New reaches xCreate directly.
func New() (*Index, error) {
	if err := generated.XCreate(1); err != nil {
		return nil, err
	}
	return &Index{}, nil
}

// Build reaches 1.0's xBuild.
func Build() error { return generated.XBuild(1) }

// Rebuild reaches 1.2's xBuild (its variant) through an unexported helper.
func (x *Index) Rebuild() error { return rebuild(int64(x.h)) }

func rebuild(n int64) error { return generated.XBuild_v12(n) }

// Search reaches xSearch only through an unexported method.
func (x Index) Search() error { return x.search() }

func (x Index) search() error { return generated.XSearch(int32(x.h)) }

// Flush reaches xSync through the internal package.
func Flush() error { return kit.Sync() }

// added reaches xAdded through a package variable's function literal, which
// Added calls.
var added = func() error { return generated.XAdded(0) }

// Added calls the variable.
func Added() error { return added() }

type hidden struct{}

// Exported method of an unexported type: not an API by itself.
func (hidden) Use() error { return generated.XOrphan(0) }
