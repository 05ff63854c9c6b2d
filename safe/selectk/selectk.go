// Package selectk selects the k smallest values of a row on the GPU
// (cuvsSelectK, cuVS 26.08 and later): the top-k step of a search whose
// distances were computed elsewhere (safe/distance, a model's scores).
//
//	if err := safe.Load(); err != nil { ... }
//	res, _ := safe.NewResources()
//	defer res.Close()
//	vals, pos, err := selectk.SelectSortedSlice(res, scores, 10) // []float32 in Go memory
//	// vals: the 10 smallest, smallest first; pos: their int64 positions in scores
//
// cuVS 26.08's C function takes one row at a time (a batch of 1): a float32
// row of n values in device memory, and writes the k smallest with their
// positions in the row (int64), in no particular order: it has no params
// and passes sorted=false to cuVS's C++ select_k
// (c/src/selection/select_k.cpp). The names say the order:
// SelectUnsorted (tensors) returns cuVS's order, SelectSortedSlice (Go
// slices) sorts the k results, smallest first. On a 26.06 library every
// call returns an error wrapping safe.ErrNotInRelease.
package selectk

import (
	"cmp"
	"slices"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
)

const cFunc = "cuvsSelectK"

var (
	inRule  = kit.Rule{Arg: "in", Memory: kit.DeviceMemory, DTypes: []dlpack.DataType{dlpack.Float32}, Rank: 2, RowMajor: true}
	valRule = kit.Rule{Arg: "values", Memory: kit.DeviceMemory, DTypes: []dlpack.DataType{dlpack.Float32}, Rank: 2, RowMajor: true}
	idxRule = kit.Rule{Arg: "indices", Memory: kit.DeviceMemory, DTypes: []dlpack.DataType{dlpack.Int64}, Rank: 2, RowMajor: true}
)

// SelectUnsorted writes the k smallest values of in (1 × n float32,
// device memory) into values (1 × k float32) and their positions in in
// (0..n-1) into indices (1 × k int64), k being the columns of values,
// 1 <= k <= n, in no particular order: cuVS does not sort them, and the
// order may differ between GPUs and releases (SelectSortedSlice sorts).
// The results are ready once res's stream is synchronized (res.Sync).
// Every shape, dtype and memory mistake is an *safe.ArgError naming the
// argument, checked before the C call (cuVS checks the same, later).
//
// C calls: cuvsSelectK (cuVS 26.08 and later).
func SelectUnsorted(res *safe.Resources, in dlpack.Tensor, values, indices dlpack.TensorMut) error {
	const op = "selectk.SelectUnsorted"
	if err := kit.InRelease(op, cFunc); err != nil {
		return err
	}
	if in == nil {
		return kit.Argf(op, "in", "nil")
	}
	if values == nil {
		return kit.Argf(op, "values", "nil")
	}
	if indices == nil {
		return kit.Argf(op, "indices", "nil")
	}
	iv, err := in.View()
	if err != nil {
		return kit.Argf(op, "in", "%w", err)
	}
	vv, err := values.ViewMut()
	if err != nil {
		return kit.Argf(op, "values", "%w", err)
	}
	xv, err := indices.ViewMut()
	if err != nil {
		return kit.Argf(op, "indices", "%w", err)
	}
	if err := inRule.CheckOn(op, res, &iv); err != nil {
		return err
	}
	if err := valRule.CheckMut(op, &vv); err != nil {
		return err
	}
	if err := idxRule.CheckMut(op, &xv); err != nil {
		return err
	}
	if err := kit.CheckDevice(res, op, "values", vv.Device()); err != nil {
		return err
	}
	if err := kit.CheckDevice(res, op, "indices", xv.Device()); err != nil {
		return err
	}
	switch n, k := iv.Dim(1), vv.Dim(1); {
	case iv.Dim(0) != 1:
		return kit.Argf(op, "in", "%d rows: cuVS selects from one row at a time", iv.Dim(0))
	case vv.Dim(0) != 1:
		return kit.Argf(op, "values", "%d rows, want 1", vv.Dim(0))
	case xv.Dim(0) != 1 || xv.Dim(1) != k:
		return kit.Argf(op, "indices", "shape %v, values is 1 × %d", xv.Shape(), k)
	case k < 1:
		return kit.Argf(op, "values", "k = %d columns, want at least 1", k)
	case k > n:
		return kit.Argf(op, "values", "k = %d exceeds the %d values of in", k, n)
	}
	c := dlpack.Begin(op)
	defer c.End()
	a, err := c.In(&iv)
	if err != nil {
		return kit.Argf(op, "in", "%w", err)
	}
	b, err := c.Out(&vv)
	if err != nil {
		return kit.Argf(op, "values", "%w", err)
	}
	x, err := c.Out(&xv)
	if err != nil {
		return kit.Argf(op, "indices", "%w", err)
	}
	h, err := kit.Lock(res, op)
	if err != nil {
		return err
	}
	defer kit.Unlock(res)
	return kit.Wrap(op, generated.CuvsSelectK(h, a, b, x))
}

// SelectSortedSlice selects the k smallest of values (Go memory) on the GPU
// and returns them with their positions, sorted: smallest first, ties by
// position (cuVS returns them unsorted: this function sorts them). It
// uploads values to device memory it allocates for the call, and waits.
// NaN values are refused (an *safe.ArgError naming the first).
//
// C calls: cuvsRMMAlloc/Free, cuvsMatrixCopy, cuvsSelectK, cuvsStreamSync.
func SelectSortedSlice(res *safe.Resources, values []float32, k int) ([]float32, []int64, error) {
	const op = "selectk.SelectSortedSlice"
	if err := kit.InRelease(op, cFunc); err != nil {
		return nil, nil, err
	}
	n := len(values)
	if n == 0 {
		return nil, nil, kit.Argf(op, "values", "empty")
	}
	if k < 1 || k > n {
		return nil, nil, kit.Argf(op, "k", "%d, want 1..%d (the number of values)", k, n)
	}
	for i, v := range values {
		if v != v {
			return nil, nil, kit.Argf(op, "values", "value %d is NaN", i)
		}
	}
	if err := kit.Open(res, op); err != nil {
		return nil, nil, err
	}
	in, err := safe.DeviceMatrixFrom(res, values, 1, n)
	if err != nil {
		return nil, nil, err
	}
	defer in.Close()
	dv, err := safe.NewDeviceMatrix[float32](res, 1, k)
	if err != nil {
		return nil, nil, err
	}
	defer dv.Close()
	dx, err := safe.NewDeviceMatrix[int64](res, 1, k)
	if err != nil {
		return nil, nil, err
	}
	defer dx.Close()
	if err := SelectUnsorted(res, in, dv, dx); err != nil {
		return nil, nil, err
	}
	vals, err := dv.ToHost(res)
	if err != nil {
		return nil, nil, err
	}
	idx, err := dx.ToHost(res)
	if err != nil {
		return nil, nil, err
	}
	order := make([]int, k)
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		return cmp.Or(cmp.Compare(vals[a], vals[b]), cmp.Compare(idx[a], idx[b]))
	})
	sv, sx := make([]float32, k), make([]int64, k)
	for i, j := range order {
		sv[i], sx[i] = vals[j], idx[j]
	}
	return sv, sx, nil
}
