package ivfflat

import (
	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
	"github.com/cuvs-go/cuvs/safe/internal/mgparams"
)

// safe/multigpu's IVF-Flat params embed this package's (see package mgparams).
func init() {
	mgparams.IVFFlatIndex = func(pa any, op string, rows, dim int64) (generated.CuvsIvfFlatIndexParams, error) {
		pd, err := kit.Or(pa.(*IndexParams), DefaultIndexParams)
		if err != nil {
			return generated.CuvsIvfFlatIndexParams{}, err
		}
		if err := pd.validate(op, rows, dim); err != nil {
			return generated.CuvsIvfFlatIndexParams{}, err
		}
		return pd.cValue(), nil
	}
	mgparams.IVFFlatSearch = func(pa any, op string) (generated.CuvsIvfFlatSearchParams, error) {
		r, err := pa.(*SearchParams).resolve(op)
		if err != nil {
			return generated.CuvsIvfFlatSearchParams{}, err
		}
		return generated.CuvsIvfFlatSearchParams{NProbes: r.NProbes}, nil
	}
}
