// Package zerotest checks one rule for every exported type of dlpack,
// safe and the safe/* packages: every method of the zero value gives an
// error (or is a harmless no-op, as Close is), never a panic or a hang;
// and every pointer-receiver method of a typed nil pointer gives an error
// or a zero value (refused as a tensor by View and ViewMut, a no-op
// Close). Value types (View, params, error structs) are called by value
// only: a nil pointer to one is not one of its values.
package zerotest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/allneighbors"
	"github.com/cuvs-go/cuvs/safe/batch"
	"github.com/cuvs-go/cuvs/safe/bruteforce"
	"github.com/cuvs-go/cuvs/safe/cagra"
	"github.com/cuvs-go/cuvs/safe/distance"
	"github.com/cuvs-go/cuvs/safe/hnsw"
	"github.com/cuvs-go/cuvs/safe/ivfflat"
	"github.com/cuvs-go/cuvs/safe/ivfpq"
	"github.com/cuvs-go/cuvs/safe/ivfsq"
	"github.com/cuvs-go/cuvs/safe/kmeans"
	"github.com/cuvs-go/cuvs/safe/multigpu"
	"github.com/cuvs-go/cuvs/safe/nndescent"
	"github.com/cuvs-go/cuvs/safe/pca"
	"github.com/cuvs-go/cuvs/safe/quantize"
	"github.com/cuvs-go/cuvs/safe/tiered"
	"github.com/cuvs-go/cuvs/safe/vamana"
)

func TestMain(m *testing.M) { safetest.Main(m) }

// skipped names the methods not called, with why.
var skipped = map[string]string{
	"dlpack.View.Dim":       "an index out of range panics, as a slice's does",
	"dlpack.View.Stride":    "an index out of range panics, as a slice's does",
	"dlpack.ViewMut.Dim":    "an index out of range panics, as a slice's does",
	"dlpack.ViewMut.Stride": "an index out of range panics, as a slice's does",
}

// call runs f, reporting a panic or a hang.
func call(f func() []reflect.Value) (out []reflect.Value, panicked any, hung bool) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() { panicked = recover() }()
		out = f()
	}()
	select {
	case <-done:
		return out, panicked, false
	case <-time.After(10 * time.Second):
		return nil, nil, true
	}
}

// args makes a method's arguments: real resources and a background
// context where it takes them, zero values elsewhere (nil tensors, nil
// params, zero counts).
func args(t reflect.Type, res *safe.Resources, skipRecv bool) []reflect.Value {
	return makeArgs(t, res, skipRecv, false)
}

// plausibleArgs is args with arguments that pass the usual checks where it
// can make them: a small float32 host matrix for a tensor, a count of 1, a
// path, a writer and a reader; so that a method's refusal of its receiver
// is seen even where it checks its arguments first.
func plausibleArgs(t reflect.Type, res *safe.Resources, skipRecv bool, dir string) []reflect.Value {
	in := makeArgs(t, res, skipRecv, true)
	start := 0
	if skipRecv {
		start = 1
	}
	m, _ := dlpack.NewHostMatrix(make([]float32, 2*8), 2, 8)
	tensor := reflect.TypeOf((*dlpack.Tensor)(nil)).Elem()
	tensorMut := reflect.TypeOf((*dlpack.TensorMut)(nil)).Elem()
	writer := reflect.TypeOf((*io.Writer)(nil)).Elem()
	reader := reflect.TypeOf((*io.Reader)(nil)).Elem()
	for i := range in {
		p := t.In(i + start)
		switch {
		case p == tensor || p == tensorMut:
			in[i] = reflect.ValueOf(m)
		case p == writer:
			in[i] = reflect.ValueOf(io.Discard)
		case p == reader:
			in[i] = reflect.ValueOf(strings.NewReader("not an index"))
		case p.Kind() == reflect.String:
			in[i] = reflect.ValueOf(filepath.Join(dir, "file")).Convert(p)
		case p.Kind() >= reflect.Int && p.Kind() <= reflect.Uint64:
			in[i] = reflect.ValueOf(1).Convert(p)
		}
	}
	return in
}

func makeArgs(t reflect.Type, res *safe.Resources, skipRecv, _ bool) []reflect.Value {
	var in []reflect.Value
	start := 0
	if skipRecv {
		start = 1
	}
	for i := start; i < t.NumIn(); i++ {
		p := t.In(i)
		switch {
		case t.IsVariadic() && i == t.NumIn()-1:
			continue
		case p == reflect.TypeOf(res):
			in = append(in, reflect.ValueOf(res))
		case p == reflect.TypeOf((*context.Context)(nil)).Elem():
			in = append(in, reflect.ValueOf(context.Background()))
		default:
			in = append(in, reflect.Zero(p))
		}
	}
	return in
}

// TestZeroValues calls every exported method of the zero value and of the
// typed nil pointer of every exported type.
func TestZeroValues(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	types := []struct {
		name  string
		v     any // a pointer to the zero value
		skip  string
		value bool // a value type (used by value, as View or a params struct): its typed nil pointer is not one of its values, and is not called
	}{
		{name: "dlpack.BorrowedError", v: new(dlpack.BorrowedError), value: true},
		{name: "dlpack.Call", v: new(dlpack.Call), value: true},
		{name: "dlpack.DataType", v: new(dlpack.DataType), value: true},
		{name: "dlpack.Device", v: new(dlpack.Device), value: true},
		{name: "dlpack.DeviceType", v: new(dlpack.DeviceType), value: true},
		{name: "dlpack.Error", v: new(dlpack.Error), value: true},
		{name: "dlpack.HostMatrix", v: new(dlpack.HostMatrix[float32])},
		{name: "dlpack.HostVector", v: new(dlpack.HostVector[float32])},
		{name: "dlpack.Imported", v: new(dlpack.Imported)},
		{name: "dlpack.Layout", v: new(dlpack.Layout), value: true},
		{name: "dlpack.Owner", v: new(dlpack.Owner)},
		{name: "dlpack.Retention", v: new(dlpack.Retention)},
		{name: "dlpack.TypeCode", v: new(dlpack.TypeCode), value: true},
		{name: "dlpack.View", v: new(dlpack.View), value: true},
		{name: "dlpack.ViewMut", v: new(dlpack.ViewMut), value: true},
		{name: "safe.ArgError", v: new(safe.ArgError), value: true},
		{name: "safe.DeviceMatrix", v: new(safe.DeviceMatrix[float32])},
		{name: "safe.DeviceVector", v: new(safe.DeviceVector[float32])},
		{name: "safe.Error", v: new(safe.Error), value: true},
		{name: "safe.Filter", v: new(safe.Filter)},
		{name: "safe.FilterKind", v: new(safe.FilterKind), value: true},
		{name: "safe.Metric", v: new(safe.Metric), value: true},
		{name: "safe.PinnedMatrix", v: new(safe.PinnedMatrix[float32])},
		{name: "safe.Resources", v: new(safe.Resources)},
		{name: "safe.Results", v: new(safe.Results)},
		{name: "safe.Stream", v: new(safe.Stream), value: true},
		{name: "safe.Version", v: new(safe.Version), value: true},
		{name: "bruteforce.BuildParams", v: new(bruteforce.BuildParams), value: true},
		{name: "bruteforce.Index", v: new(bruteforce.Index)},
		{name: "bruteforce.Prepared", v: new(bruteforce.Prepared)},
		{name: "cagra.ACEParams", v: new(cagra.ACEParams), value: true},
		{name: "cagra.CompressionParams", v: new(cagra.CompressionParams), value: true},
		{name: "cagra.ExtendParams", v: new(cagra.ExtendParams), value: true},
		{name: "cagra.GraphBuildAlgo", v: new(cagra.GraphBuildAlgo), value: true},
		{name: "cagra.HashMode", v: new(cagra.HashMode), value: true},
		{name: "cagra.Heuristic", v: new(cagra.Heuristic), value: true},
		{name: "cagra.IVFPQGraphParams", v: new(cagra.IVFPQGraphParams), value: true},
		{name: "cagra.Index", v: new(cagra.Index)},
		{name: "cagra.IndexParams", v: new(cagra.IndexParams), value: true},
		{name: "cagra.Prepared", v: new(cagra.Prepared)},
		{name: "cagra.SearchAlgo", v: new(cagra.SearchAlgo), value: true},
		{name: "cagra.SearchParams", v: new(cagra.SearchParams), value: true},
		{name: "hnsw.ACEParams", v: new(hnsw.ACEParams), value: true},
		{name: "hnsw.ExtendParams", v: new(hnsw.ExtendParams), value: true},
		{name: "hnsw.Hierarchy", v: new(hnsw.Hierarchy), value: true},
		{name: "hnsw.Index", v: new(hnsw.Index)},
		{name: "hnsw.IndexParams", v: new(hnsw.IndexParams), value: true},
		{name: "hnsw.SearchParams", v: new(hnsw.SearchParams), value: true},
		{name: "ivfflat.Index", v: new(ivfflat.Index)},
		{name: "ivfflat.IndexParams", v: new(ivfflat.IndexParams), value: true},
		{name: "ivfflat.Prepared", v: new(ivfflat.Prepared)},
		{name: "ivfflat.SearchParams", v: new(ivfflat.SearchParams), value: true},
		{name: "ivfsq.Index", v: new(ivfsq.Index)},
		{name: "nndescent.Index", v: new(nndescent.Index)},
		{name: "vamana.Index", v: new(vamana.Index)},
		{name: "vamana.IndexParams", v: new(vamana.IndexParams), value: true},
		{name: "vamana.Graph", v: new(vamana.Graph), value: true},
		{name: "allneighbors.Algo", v: new(allneighbors.Algo), value: true},
		{name: "allneighbors.IndexParams", v: new(allneighbors.IndexParams), value: true},
		{name: "allneighbors.IVFPQParams", v: new(allneighbors.IVFPQParams), value: true},
		{name: "allneighbors.NNDescentParams", v: new(allneighbors.NNDescentParams), value: true},
		{name: "nndescent.IndexParams", v: new(nndescent.IndexParams), value: true},
		{name: "nndescent.DistCompDType", v: new(nndescent.DistCompDType), value: true},
		{name: "ivfsq.IndexParams", v: new(ivfsq.IndexParams), value: true},
		{name: "ivfsq.Prepared", v: new(ivfsq.Prepared)},
		{name: "ivfsq.SearchParams", v: new(ivfsq.SearchParams), value: true},
		{name: "tiered.Backend", v: new(tiered.Backend), value: true},
		{name: "tiered.CAGRAParams", v: new(tiered.CAGRAParams), value: true},
		{name: "tiered.CAGRASearchParams", v: new(tiered.CAGRASearchParams), value: true},
		{name: "tiered.IVFFlatParams", v: new(tiered.IVFFlatParams), value: true},
		{name: "tiered.IVFPQParams", v: new(tiered.IVFPQParams), value: true},
		{name: "tiered.IVFSearchParams", v: new(tiered.IVFSearchParams), value: true},
		{name: "tiered.Index", v: new(tiered.Index)},
		{name: "tiered.IndexParams", v: new(tiered.IndexParams), value: true},
		{name: "tiered.SearchParams", v: new(tiered.SearchParams), value: true},
		{name: "tiered.Searcher", v: new(tiered.Searcher)},
		{name: "ivfpq.CUDAType", v: new(ivfpq.CUDAType), value: true},
		{name: "ivfpq.CodebookKind", v: new(ivfpq.CodebookKind), value: true},
		{name: "ivfpq.CodesLayout", v: new(ivfpq.CodesLayout), value: true},
		{name: "ivfpq.Index", v: new(ivfpq.Index)},
		{name: "ivfpq.IndexParams", v: new(ivfpq.IndexParams), value: true},
		{name: "ivfpq.Prepared", v: new(ivfpq.Prepared)},
		{name: "ivfpq.SearchParams", v: new(ivfpq.SearchParams), value: true},
		{name: "kmeans.FitResult", v: new(kmeans.FitResult), value: true},
		{name: "kmeans.InitMethod", v: new(kmeans.InitMethod), value: true},
		{name: "kmeans.Model", v: new(kmeans.Model[float32])},
		{name: "kmeans.Params", v: new(kmeans.Params), value: true},
		{name: "pca.Model", v: new(pca.Model)},
		{name: "pca.Params", v: new(pca.Params), value: true},
		{name: "pca.Solver", v: new(pca.Solver), value: true},
		{name: "quantize.Binary", v: new(quantize.Binary)},
		{name: "quantize.BinaryParams", v: new(quantize.BinaryParams), value: true},
		{name: "quantize.KMeansType", v: new(quantize.KMeansType), value: true},
		{name: "quantize.PQ", v: new(quantize.PQ)},
		{name: "quantize.PQParams", v: new(quantize.PQParams), value: true},
		{name: "quantize.Scalar", v: new(quantize.Scalar), value: true},
		{name: "quantize.ScalarParams", v: new(quantize.ScalarParams), value: true},
		{name: "quantize.Threshold", v: new(quantize.Threshold), value: true},
		{name: "multigpu.Resources", v: new(multigpu.Resources)},
		{name: "multigpu.CagraIndex", v: new(multigpu.CagraIndex)},
		{name: "multigpu.IVFFlatIndex", v: new(multigpu.IVFFlatIndex)},
		{name: "multigpu.IVFPQIndex", v: new(multigpu.IVFPQIndex)},
		{name: "multigpu.CagraIndexParams", v: new(multigpu.CagraIndexParams), value: true},
		{name: "multigpu.CagraSearchParams", v: new(multigpu.CagraSearchParams), value: true},
		{name: "multigpu.IVFFlatIndexParams", v: new(multigpu.IVFFlatIndexParams), value: true},
		{name: "multigpu.IVFFlatSearchParams", v: new(multigpu.IVFFlatSearchParams), value: true},
		{name: "multigpu.IVFPQIndexParams", v: new(multigpu.IVFPQIndexParams), value: true},
		{name: "multigpu.IVFPQSearchParams", v: new(multigpu.IVFPQSearchParams), value: true},
		{name: "multigpu.Distribution", v: new(multigpu.Distribution), value: true},
		{name: "multigpu.Defaults", v: new(multigpu.Defaults), value: true},
		{name: "multigpu.Mode", v: new(multigpu.Mode), value: true},
		{name: "multigpu.SearchMode", v: new(multigpu.SearchMode), value: true},
		{name: "multigpu.MergeMode", v: new(multigpu.MergeMode), value: true},
		{name: "batch.Batcher", v: new(batch.Batcher[float32, int64])},
		{name: "batch.Options", v: new(batch.Options), value: true},
		{name: "batch.Stats", v: new(batch.Stats), value: true},
	}
	for _, c := range types {
		t.Run(c.name, func(t *testing.T) {
			if c.skip != "" {
				t.Skip(c.skip)
			}
			pt := reflect.TypeOf(c.v)
			var bad []string
			for _, recv := range []struct {
				what string
				v    reflect.Value
			}{{"zero value", reflect.ValueOf(c.v)}, {"typed nil", reflect.Zero(pt)}} {
				if recv.what == "typed nil" && c.value {
					continue
				}
				typedNil := recv.what == "typed nil"
				for i := 0; i < pt.NumMethod(); i++ {
					m := pt.Method(i)
					if why, ok := skipped[c.name+"."+m.Name]; ok {
						t.Logf("%s not called: %s", m.Name, why)
						continue
					}
					// Value-receiver methods of a typed nil panic in Go's
					// own dereference, before any code of ours runs: only
					// pointer-receiver methods are ours to make safe.
					if typedNil && !pointerMethod(pt.Elem(), m.Name) {
						continue
					}
					for _, plausible := range []bool{false, true} {
						in := append([]reflect.Value{recv.v}, args(m.Type, res, true)...)
						if plausible {
							in = append([]reflect.Value{recv.v}, plausibleArgs(m.Type, res, true, t.TempDir())...)
						}
						out, p, hung := call(func() []reflect.Value { return m.Func.Call(in) })
						switch {
						case hung:
							bad = append(bad, fmt.Sprintf("%s of the %s hangs", m.Name, recv.what))
						case p != nil:
							bad = append(bad, fmt.Sprintf("%s of the %s panics: %v", m.Name, recv.what, p))
						default:
							// A thing never built says so, whatever the
							// arguments: not a message about them, or
							// about a dimension or type it does not have
							// (a function the release lacks is refused
							// before anything else, the family's rule).
							if err := errorOut(out); built[c.name] && !typedNil && err != nil && !neverBuilt.MatchString(err.Error()) && !errors.Is(err, safe.ErrNotInRelease) {
								bad = append(bad, fmt.Sprintf("%s of the %s (arguments plausible: %v) does not say it was never built: %v", m.Name, recv.what, plausible, err))
							}
							closeOut(out)
						}
					}
				}
			}
			if len(bad) > 0 {
				t.Error(strings.Join(bad, "\n"))
			}
		})
	}
}

// built names the types whose zero value is a thing never built (an
// index, a prepared search, a model): every method's error says so.
// (kmeans.Model's say "not a fitted model".)
var built = map[string]bool{
	"bruteforce.Index": true, "bruteforce.Prepared": true,
	"cagra.Index": true, "cagra.Prepared": true,
	"hnsw.Index":    true,
	"ivfflat.Index": true, "ivfflat.Prepared": true,
	"ivfsq.Index": true, "ivfsq.Prepared": true,
	"ivfpq.Index": true, "ivfpq.Prepared": true,
	"nndescent.Index": true,
	"vamana.Index":    true,
	"tiered.Index":    true, "tiered.Searcher": true,
	"multigpu.CagraIndex": true, "multigpu.IVFFlatIndex": true, "multigpu.IVFPQIndex": true,
	"quantize.PQ": true, "quantize.Binary": true,
	"pca.Model": true,
}

// neverBuilt matches the errors of a thing never built.
var neverBuilt = regexp.MustCompile(`never built|zero value|not a fitted`)

// errorOut returns a method's error result, if any.
func errorOut(out []reflect.Value) error {
	for _, o := range out {
		if o.IsValid() && o.CanInterface() {
			if e, ok := o.Interface().(error); ok && e != nil {
				return e
			}
		}
	}
	return nil
}

// pointerMethod reports whether T's method name has a pointer receiver
// (it is not in T's own, value, method set).
func pointerMethod(t reflect.Type, name string) bool {
	_, ok := t.MethodByName(name)
	return !ok
}

// closeOut closes whatever a method made (a view's owner stays).
func closeOut(out []reflect.Value) {
	for _, o := range out {
		if !o.IsValid() || !o.CanInterface() {
			continue
		}
		if c, ok := o.Interface().(interface{ Close() error }); ok && o.Kind() == reflect.Pointer && !o.IsNil() {
			_ = c.Close()
		}
	}
}

// TestTypedNilTensors passes a typed nil of every tensor type of dlpack
// and safe where a tensor is taken: an error naming the argument, never a
// panic.
func TestTypedNilTensors(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	tensors := map[string]interface {
		dlpack.Tensor
		dlpack.TensorMut
	}{
		"*dlpack.HostMatrix": (*dlpack.HostMatrix[float32])(nil),
		"*dlpack.HostVector": (*dlpack.HostVector[float32])(nil),
		"*safe.DeviceMatrix": (*safe.DeviceMatrix[float32])(nil),
		"*safe.DeviceVector": (*safe.DeviceVector[float32])(nil),
		"*safe.PinnedMatrix": (*safe.PinnedMatrix[float32])(nil),
	}
	for name, tn := range tensors {
		t.Run(name, func(t *testing.T) {
			ops := map[string]func() error{
				"View":              func() error { _, err := tn.View(); return err },
				"ViewMut":           func() error { _, err := tn.ViewMut(); return err },
				"bruteforce.Build":  func() error { _, err := bruteforce.Build(res, tn, nil); return err },
				"cagra.Build":       func() error { _, err := cagra.Build(res, tn, nil); return err },
				"ivfflat.Build":     func() error { _, err := ivfflat.Build(res, tn, nil); return err },
				"ivfsq.Build":       func() error { _, err := ivfsq.Build(res, tn, nil); return err },
				"ivfpq.Build":       func() error { _, err := ivfpq.Build(res, tn, nil); return err },
				"distance.Pairwise": func() error { return distance.Pairwise(res, tn, tn, tn, safe.L2Expanded, 2) },
				"kmeans.Fit": func() error {
					p, err := kmeans.DefaultParams()
					if err != nil {
						return err
					}
					_, err = kmeans.Fit(res, &p, tn, nil, tn)
					return err
				},
				"nndescent.Build":     func() error { _, err := nndescent.Build(res, tn, nil); return err },
				"nndescent.BuildInto": func() error { return nndescent.BuildInto(res, tn, tn, nil) },
				"safe.Copy": func() error {
					dst, _ := dlpack.NewHostMatrix(make([]float32, 4), 2, 2)
					v, err := tn.View()
					if err != nil {
						return err
					}
					dm, _ := dst.ViewMut()
					return safe.Copy(res, &v, &dm)
				},
			}
			ops["quantize.TrainScalar"] = func() error { _, err := quantize.TrainScalar(res, tn, nil); return err }
			ops["quantize.TrainBinary"] = func() error { _, err := quantize.TrainBinary(res, tn, nil); return err }
			ops["quantize.BuildPQ"] = func() error { _, err := quantize.BuildPQ(res, tn, nil); return err }
			ops["quantize.BinaryTransform"] = func() error { return quantize.BinaryTransform(res, tn, tn) }
			for op, f := range ops {
				var err error
				_, p, hung := call(func() []reflect.Value { err = f(); return nil })
				switch {
				case hung:
					t.Errorf("%s with a typed-nil %s hangs", op, name)
				case p != nil:
					t.Errorf("%s with a typed-nil %s panics: %v", op, name, p)
				case err == nil:
					t.Errorf("%s with a typed-nil %s: no error", op, name)
				}
			}
		})
	}
}

// The two cases, with arguments that are right for a built
// index: a zero index says it was never built (safe.ErrClosed), not that
// it takes no element type or has dimension 0.
func TestZeroIndexSaysNeverBuilt(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	q, _ := dlpack.NewHostMatrix(make([]float32, 2*8), 2, 8)
	nb, _ := dlpack.NewHostMatrix(make([]int64, 2*4), 2, 4)
	ds, _ := dlpack.NewHostMatrix(make([]float32, 2*4), 2, 4)
	dq, err := safe.DeviceMatrixFrom(res, make([]float32, 2*8), 2, 8)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, dq)
	for name, err := range map[string]error{
		"cagra.Index.Search":         (&cagra.Index{}).Search(res, nil, q, nb, ds, nil),
		"cagra.Index.Search, device": (&cagra.Index{}).Search(res, nil, dq, nb, ds, nil),
		"tiered.Index.Extend":        (&tiered.Index{}).Extend(res, dq),
		"ivfpq.Index.Extend":         (&ivfpq.Index{}).Extend(res, dq, nil),
		"hnsw.Index.Extend":          (&hnsw.Index{}).Extend(res, q, nil),
		"cagra.SearchSlice":          second(cagra.SearchSlice(res, &cagra.Index{}, nil, make([]float32, 8), 1, nil)),
		"bruteforce.SearchSlice":     second(bruteforce.SearchSlice(res, &bruteforce.Index{}, make([]float32, 8), 1, nil)),
		"ivfflat.SearchSlice":        second(ivfflat.SearchSlice(res, &ivfflat.Index{}, nil, make([]float32, 8), 1, nil)),
		"ivfsq.SearchSlice":          second(ivfsq.SearchSlice(res, &ivfsq.Index{}, nil, make([]float32, 8), 1, nil)),
		"ivfpq.SearchSlice":          second(ivfpq.SearchSlice(res, &ivfpq.Index{}, nil, make([]float32, 8), 1)),
		"tiered.SearchSlice":         second(tiered.SearchSlice(res, &tiered.Index{}, nil, make([]float32, 8), 1, nil)),
		"hnsw.FromCagra":             second(hnsw.FromCagra(res, &cagra.Index{}, nil)),
		"cagra.Merge":                second(cagra.Merge(res, nil, []*cagra.Index{{}, {}}, nil)),
		"tiered.Merge":               second(tiered.Merge(res, nil, &tiered.Index{}, &tiered.Index{})),
		"hnsw.SearchSlice":           second(hnsw.SearchSlice(res, &hnsw.Index{}, nil, make([]float32, 8), 1, nil)),
	} {
		if !errors.Is(err, safe.ErrClosed) || !strings.Contains(err.Error(), "never built") {
			t.Errorf("%s of a zero index: %v", name, err)
		}
	}
}

func second[R any](_ R, err error) error { return err }
