package dlpack_test

import (
	"testing"
	"unsafe"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/internal/race"
)

// deviceMatrix stands for the safe layer's device buffer: an Owner and raw
// device memory, viewed through FromRawParts on every call.
type deviceMatrix struct {
	owner      dlpack.Owner
	ptr        unsafe.Pointer
	rows, cols int64
	dtype      dlpack.DataType
}

func (d *deviceMatrix) View() (dlpack.View, error) {
	v, err := dlpack.FromRawParts(d.ptr, cuda0, []int64{d.rows, d.cols}, nil, d.dtype)
	return v.WithOwner(&d.owner), err
}

func (d *deviceMatrix) ViewMut() (dlpack.ViewMut, error) {
	m, err := dlpack.FromRawPartsMut(d.ptr, cuda0, []int64{d.rows, d.cols}, nil, d.dtype)
	return m.WithOwner(&d.owner), err
}

// search is what a safe-layer search does with its three tensors: take the
// views, bind them to one call, make the call, end it.
func search(tb testing.TB, queries dlpack.Tensor, neighbors, distances dlpack.TensorMut) {
	q, err := queries.View()
	if err != nil {
		tb.Fatal(err)
	}
	n, err := neighbors.ViewMut()
	if err != nil {
		tb.Fatal(err)
	}
	d, err := distances.ViewMut()
	if err != nil {
		tb.Fatal(err)
	}
	c := dlpack.Begin("bench.Search")
	qt, err := c.In(&q)
	if err != nil {
		tb.Fatal(err)
	}
	nt, err := c.Out(&n)
	if err != nil {
		tb.Fatal(err)
	}
	dt, err := c.Out(&d)
	if err != nil {
		tb.Fatal(err)
	}
	if qt == nil || nt == nil || dt == nil {
		tb.Fatal("nil tensor")
	}
	c.End()
}

// BenchmarkCall3Views measures the safe layer's hot path: three views
// materialized for one C call and released (the C call itself excluded).
func BenchmarkCall3Views(b *testing.B) {
	b.Run("device", func(b *testing.B) {
		q := &deviceMatrix{ptr: fakePtr(fakeBase), rows: 100, cols: 128, dtype: dlpack.Float32}
		n := &deviceMatrix{ptr: fakePtr(fakeBase + 1<<20), rows: 100, cols: 10, dtype: dlpack.Int64}
		d := &deviceMatrix{ptr: fakePtr(fakeBase + 2<<20), rows: 100, cols: 10, dtype: dlpack.Float32}
		b.ReportAllocs()
		for b.Loop() {
			search(b, q, n, d)
		}
	})
	b.Run("host", func(b *testing.B) { // Go memory: pinned for each call
		q, _ := dlpack.NewHostMatrix(make([]float32, 100*128), 100, 128)
		n, _ := dlpack.NewHostMatrix(make([]int64, 100*10), 100, 10)
		d, _ := dlpack.NewHostMatrix(make([]float32, 100*10), 100, 10)
		b.ReportAllocs()
		for b.Loop() {
			search(b, q, n, d)
		}
	})
	b.Run("bind-only", func(b *testing.B) { // views made once; binding stamps, so bind copies
		q0, _ := (&deviceMatrix{ptr: fakePtr(fakeBase), rows: 100, cols: 128, dtype: dlpack.Float32}).View()
		n0, _ := (&deviceMatrix{ptr: fakePtr(fakeBase + 1<<20), rows: 100, cols: 10, dtype: dlpack.Int64}).ViewMut()
		d0, _ := (&deviceMatrix{ptr: fakePtr(fakeBase + 2<<20), rows: 100, cols: 10, dtype: dlpack.Float32}).ViewMut()
		b.ReportAllocs()
		for b.Loop() {
			q, n, d := q0, n0, d0
			c := dlpack.Begin("bench.Search")
			_, err1 := c.In(&q)
			_, err2 := c.Out(&n)
			_, err3 := c.Out(&d)
			if err1 != nil || err2 != nil || err3 != nil {
				b.Fatal(err1, err2, err3)
			}
			c.End()
		}
	})
	b.Run("device-parallel", func(b *testing.B) { // shared queries, own outputs
		q := &deviceMatrix{ptr: fakePtr(fakeBase), rows: 100, cols: 128, dtype: dlpack.Float32}
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			n := &deviceMatrix{ptr: fakePtr(fakeBase + 1<<20), rows: 100, cols: 10, dtype: dlpack.Int64}
			d := &deviceMatrix{ptr: fakePtr(fakeBase + 2<<20), rows: 100, cols: 10, dtype: dlpack.Float32}
			for pb.Next() {
				search(b, q, n, d)
			}
		})
	})
}

// TestCallAllocatesNothing holds the hot path to zero Go allocations.
func TestCallAllocatesNothing(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector makes sync.Pool drop items")
	}
	q := &deviceMatrix{ptr: fakePtr(fakeBase), rows: 100, cols: 128, dtype: dlpack.Float32}
	n := &deviceMatrix{ptr: fakePtr(fakeBase + 1<<20), rows: 100, cols: 10, dtype: dlpack.Int64}
	hq, _ := dlpack.NewHostMatrix(make([]float32, 100*128), 100, 128)
	hd, _ := dlpack.NewHostMatrix(make([]float32, 100*10), 100, 10)
	search(t, q, n, hd) // warm the pool
	if a := testing.AllocsPerRun(200, func() { search(t, q, n, hd) }); a > 0 {
		t.Errorf("device+host call: %v allocs/op", a)
	}
	if a := testing.AllocsPerRun(200, func() { search(t, hq, n, hd) }); a > 0 {
		t.Errorf("host call: %v allocs/op", a)
	}
}
