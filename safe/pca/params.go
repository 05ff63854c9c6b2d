package pca

import (
	"math"
	"strconv"

	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
)

// Solver is how the covariance's eigenvectors are found (cuvsPcaSolver).
type Solver int32

// Solvers.
const (
	// CovEigDQ is the divide-and-conquer symmetric eigensolver.
	CovEigDQ = Solver(generated.CuvsPcaSolver_CUVS_PCA_COV_EIG_DQ)
	// CovEigJacobi is the Jacobi eigensolver (Params.Tol, Params.Iterations).
	CovEigJacobi = Solver(generated.CuvsPcaSolver_CUVS_PCA_COV_EIG_JACOBI)
)

// String returns "CovEigDQ" or "CovEigJacobi".
func (s Solver) String() string {
	switch s {
	case CovEigDQ:
		return "CovEigDQ"
	case CovEigJacobi:
		return "CovEigJacobi"
	}
	return "Solver(" + strconv.Itoa(int(s)) + ")"
}

// Params configures Fit and FitTransform (cuvsPcaParams). Start from
// DefaultParams, which reads cuVS's defaults from the library; nil params
// mean those. The zero Params is refused: Components must be at least 1.
type Params struct {
	// Components is the number of principal components kept, 1..columns.
	Components int
	// Whiten scales each transformed component to unit variance
	// (see Model.Transform for how cuVS counts the rows).
	Whiten bool
	// Solver selects the eigensolver.
	Solver Solver
	// Tol and Iterations steer the Jacobi solver (Tol >= 0, Iterations >= 1).
	Tol        float32
	Iterations int
	// FlipSignsBasedOnU makes each component's sign follow its projection
	// of the data (the largest-magnitude projected value is positive)
	// rather than the component itself (its largest-magnitude entry is
	// positive).
	FlipSignsBasedOnU bool
}

var defaults = kit.Defaults[Params]{Read: readDefaults}

// DefaultParams returns cuVS's defaults, read from the loaded library
// (cuvsPcaParamsCreate/Destroy): one component, no whitening, the
// divide-and-conquer solver, tol 0, 15 iterations, in v26.06 and v26.08.
func DefaultParams() (Params, error) {
	p, err := defaults.Get()
	if err != nil {
		return Params{}, err
	}
	return *p, nil
}

func readDefaults() (Params, error) {
	const op = "pca.DefaultParams"
	var c generated.CuvsPcaParams_t
	if err := generated.CuvsPcaParamsCreate(&c); err != nil {
		return Params{}, kit.Wrap(op, err)
	}
	p := Params{Components: int(c.Ref().NComponents), Whiten: c.Ref().Whiten, Solver: Solver(c.Ref().Algorithm), Tol: c.Ref().Tol, Iterations: int(c.Ref().NIterations)}
	return p, kit.Wrap(op, generated.CuvsPcaParamsDestroy(c))
}

func (p *Params) validate(op string) error {
	switch {
	case p == nil:
		return kit.Argf(op, "params", "nil")
	case p.Components < 1 || p.Components > math.MaxInt32:
		return kit.Argf(op, "params.Components", "%d, want at least 1", p.Components)
	case p.Solver != CovEigDQ && p.Solver != CovEigJacobi:
		return kit.Argf(op, "params.Solver", "%s is not a Solver", p.Solver)
	case !(p.Tol >= 0) || math.IsInf(float64(p.Tol), 0):
		return kit.Argf(op, "params.Tol", "%v, want a finite tolerance of at least 0", p.Tol)
	case p.Iterations < 0 || p.Iterations > math.MaxInt32 || (p.Solver == CovEigJacobi && p.Iterations < 1):
		return kit.Argf(op, "params.Iterations", "%d, want at least 1 for the Jacobi solver (0 or more otherwise)", p.Iterations)
	}
	return nil
}

// withC runs f with p (and k components) in a cuvsPcaParams of the
// library's.
func withC(op string, p *Params, k int, f func(c generated.CuvsPcaParams_t) error) error {
	var c generated.CuvsPcaParams_t
	if err := generated.CuvsPcaParamsCreate(&c); err != nil {
		return kit.Wrap(op, err)
	}
	c.Ref().NComponents = int32(k)
	c.Ref().Copy = true // cuVS does not read it: the input is always changed and restored
	c.Ref().Whiten = p.Whiten
	c.Ref().Algorithm = generated.CuvsPcaSolver(p.Solver)
	c.Ref().Tol = p.Tol
	c.Ref().NIterations = int32(p.Iterations)
	err := f(c)
	if derr := kit.Wrap(op, generated.CuvsPcaParamsDestroy(c)); err == nil {
		err = derr
	}
	return err
}
