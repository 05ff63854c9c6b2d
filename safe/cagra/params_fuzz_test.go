package cagra

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/cuvs-go/cuvs/safe"
)

// FuzzSearchParams feeds arbitrary search parameters (a service may take
// them from its users) to the checks a search makes before any C call:
// they never panic, every refusal is an *ArgError naming a field of params,
// and what they accept is within the ranges cuVS checks.
func FuzzSearchParams(f *testing.F) {
	f.Add(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, float32(0), uint32(0), float32(0), float32(0), 0.0)
	f.Add(10, 64, 0, 1, 0, 1, 0, 256, 2, 8, float32(0.5), uint32(1), float32(2), float32(1), 0.01)
	f.Add(-1, 2000, 5, 7, 3, 2, 1, 100, 5, 30, float32(0.95), uint32(3), float32(-1), float32(2), math.NaN())
	f.Fuzz(func(t *testing.T, maxQueries, itopk, maxIter, algo, team, width, minIter, block, hashMode, bitlen int,
		fill float32, samplings uint32, lifetime, usage float32, exact float64) {
		p := SearchParams{MaxQueries: maxQueries, ITopKSize: itopk, MaxIterations: maxIter, Algo: SearchAlgo(algo),
			TeamSize: team, SearchWidth: width, MinIterations: minIter, ThreadBlockSize: block,
			HashmapMode: HashMode(hashMode), HashmapMinBitlen: bitlen, HashmapMaxFillRate: fill,
			NumRandomSamplings: samplings, PersistentLifetime: lifetime, PersistentDeviceUsage: usage,
			FilterExactBelow: exact}
		sp, err := p.withDefaults("fuzz")
		if err != nil {
			t.Fatalf("reading the defaults: %v", err)
		}
		err = sp.validate("fuzz")
		if err == nil {
			err = sp.checkFiltered("fuzz", true, 1)
		}
		if err != nil {
			var ae *safe.ArgError
			if !errors.As(err, &ae) || !strings.HasPrefix(ae.Arg, "params.") {
				t.Fatalf("refusal %v (%T) names no field of params", err, err)
			}
			return
		}
		if sp.ITopKSize < 1 || sp.SearchWidth < 1 || sp.HashmapMinBitlen > 20 ||
			!(sp.HashmapMaxFillRate >= 0.1 && sp.HashmapMaxFillRate < 0.9) ||
			!(sp.PersistentDeviceUsage > 0 && sp.PersistentDeviceUsage <= 1) ||
			sp.MaxQueries < 0 || sp.TeamSize < 0 || sp.MaxIterations < 0 || sp.MinIterations < 0 {
			t.Fatalf("accepted out-of-range params %+v", sp)
		}
		// What C receives is what was checked.
		c := sp.cValue()
		if int(c.ItopkSize) != sp.ITopKSize || c.HashmapMaxFillRate != sp.HashmapMaxFillRate {
			t.Fatalf("cValue %+v from %+v", c, sp)
		}
	})
}
