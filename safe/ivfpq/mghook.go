package ivfpq

import (
	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
	"github.com/cuvs-go/cuvs/safe/internal/mgparams"
)

// safe/multigpu's IVF-PQ params embed this package's (see package mgparams).
func init() {
	mgparams.IVFPQIndex = func(pa any, op string, dim int64) (generated.CuvsIvfPqIndexParams, error) {
		pd, err := kit.Or(pa.(*IndexParams), DefaultIndexParams)
		if err != nil {
			return generated.CuvsIvfPqIndexParams{}, err
		}
		if err := pd.validate(op, dim); err != nil {
			return generated.CuvsIvfPqIndexParams{}, err
		}
		c, err := pd.toC(op)
		if err != nil {
			return generated.CuvsIvfPqIndexParams{}, err
		}
		v := *c.Ref()
		return v, kit.Wrap(op, generated.CuvsIvfPqIndexParamsDestroy(c))
	}
	mgparams.IVFPQSearch = func(pa any, op string) (generated.CuvsIvfPqSearchParams, error) {
		r, err := pa.(*SearchParams).resolve(op)
		if err != nil {
			return generated.CuvsIvfPqSearchParams{}, err
		}
		return r.cValue(), nil
	}
}
