package safe

import (
	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/safe/internal/base"
)

// The algorithm packages reach a Resources' handle and a Filter's memory
// through safe/internal/kit, which calls these: nothing exported here hands
// out a C handle.
func init() {
	base.Lock = func(res any, op string) (generated.CuvsResources_t, error) { return res.(*Resources).lock(op) }
	base.Unlock = func(res any) { res.(*Resources).unlock() }
	base.Open = func(res any, op string) error { return res.(*Resources).open(op) }
	base.Params = func(res any, n uintptr) uintptr { return res.(*Resources).params(n) }
	base.CheckDevice = func(res any, op, arg string, dev dlpack.Device) error {
		return res.(*Resources).checkDevice(op, arg, dev)
	}
	base.DeviceID = func(res any, op string) (int32, error) { return res.(*Resources).deviceID(op) }
	base.InRelease = inRelease
	base.Argf = argf
	base.Wrap = wrap
	base.BindFilter = func(f any, op string, c dlpack.Call, rows, nQueries int64) (generated.CuvsFilter, error) {
		return f.(*Filter).bind(op, c, rows, nQueries)
	}
	base.Retain = func(res any, op string) (func(), error) { return res.(*Resources).retain(op) }
	base.FilterHostWords = func(f any, op string, res any) ([]uint32, error) {
		return f.(*Filter).hostWords(op, res.(*Resources))
	}
	base.HoldFilter = func(f any, op string) error { return f.(*Filter).hold(op) }
	base.ReleaseFilter = func(f any) { f.(*Filter).release() }
	base.NewBatchBitmap = func(res any, maxQueries, rows int64) (any, any, error) {
		f, err := newBatchBitmap(res.(*Resources), maxQueries, rows)
		if err != nil {
			return nil, nil, err
		}
		return f, f.batchWords(), nil
	}
	base.SetBatchQueries = func(f any, perQuery []int64) { f.(*Filter).setBatchQueries(perQuery) }
}
