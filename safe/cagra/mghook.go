package cagra

import (
	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
	"github.com/cuvs-go/cuvs/safe/internal/mgparams"
)

// safe/multigpu's CAGRA params embed this package's (see package mgparams).
func init() {
	mgparams.CagraIndex = func(pa any, op string, rows int64) (generated.CuvsCagraIndexParams_t, generated.CuvsCagraIndexParams_t_v2608, func(), error) {
		pd, err := kit.Or(pa.(*IndexParams), DefaultIndexParams)
		if err != nil {
			return 0, 0, func() {}, err
		}
		if err := pd.validate(op); err != nil {
			return 0, 0, func() {}, err
		}
		if err := pd.checkRows(op, "dataset", rows); err != nil {
			return 0, 0, func() {}, err
		}
		cp, err := pd.toC(op)
		if err != nil {
			cp.release()
			return 0, 0, func() {}, err
		}
		return cp.p.p06, cp.p.p08, cp.release, nil
	}
	mgparams.CagraSearch = func(pa any, op string) (generated.CuvsCagraSearchParams, error) {
		s := pa.(*SearchParams)
		if s == nil {
			s = &SearchParams{}
		}
		r, err := s.withDefaults(op)
		if err != nil {
			return generated.CuvsCagraSearchParams{}, err
		}
		if err := r.validate(op); err != nil {
			return generated.CuvsCagraSearchParams{}, err
		}
		return r.cValue(), nil
	}
}
