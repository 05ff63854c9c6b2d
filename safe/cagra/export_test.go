package cagra

// SetPlanITopK makes the policy's graph path search with top-k itopk (0:
// the policy's own), so that tests can make queries come back short.
func SetPlanITopK(itopk int) { testPlanITopK = int64(itopk) }
