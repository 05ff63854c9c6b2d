package dlpack_test

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/generated"
)

// cSearch stands for a raw C function such as generated.CuvsCagraSearch: it
// reads the queries and writes the neighbors.
func cSearch(queries, neighbors *generated.DLManagedTensor) {
	q := queries.DlTensor
	rows := unsafe.Slice(q.Shape, q.Ndim)[0]
	out := unsafe.Slice((*int64)(neighbors.DlTensor.Data), rows)
	for i := range out {
		out[i] = int64(i) * 10
	}
}

// A search as the safe layer does it: lend Go slices to one C call, then
// find the views expired and the buffers free again.
func Example() {
	queries, _ := dlpack.NewHostMatrix([]float32{1, 2, 3, 4, 5, 6}, 3, 2)
	neighbors := dlpack.NewHostVector(make([]int64, 3))

	q, _ := queries.View()
	n, _ := neighbors.ViewMut()
	fmt.Println("queries:", q)

	c := dlpack.Begin("example.Search")
	qt, err := c.In(&q)
	if err != nil {
		panic(err)
	}
	nt, err := c.Out(&n)
	if err != nil {
		panic(err)
	}
	// While the call is in flight, the neighbors cannot be freed.
	fmt.Println(neighbors.Close())
	cSearch(qt, nt)
	c.End()

	fmt.Println("neighbors:", neighbors.Data())
	fmt.Println("expired:", errors.Is(q.Err(), dlpack.ErrExpired))
	fmt.Println("close:", neighbors.Close())
	// Output:
	// queries: float32 cpu:0 [3 2] row-major
	// dlpack: cannot close host vector [3]int64: still borrowed by call "example.Search" (writing)
	// neighbors: [0 10 20]
	// expired: true
	// close: <nil>
}

// A buffer type of your own lends itself through FromRawParts and keeps an
// Owner, so that it refuses to be freed while borrowed.
type gpuBuffer struct {
	owner dlpack.Owner
	ptr   unsafe.Pointer // device memory, from cudaMalloc or the safe layer
	n     int64
}

func (b *gpuBuffer) View() (dlpack.View, error) {
	// The safety contract: ptr holds n float32 on device 0 while b is open.
	v, err := dlpack.FromRawParts(b.ptr, dlpack.Device{Type: dlpack.CUDA, ID: 0}, []int64{b.n}, nil, dlpack.Float32)
	return v.WithOwner(&b.owner), err
}

func (b *gpuBuffer) Free() error {
	if err := b.owner.Close(); err != nil {
		return err // still borrowed: do not free
	}
	// cudaFree(b.ptr) here.
	return nil
}

func ExampleTensor() {
	buf := &gpuBuffer{ptr: fakePtr(fakeBase), n: 1000}
	buf.owner.SetLabel("gpu buffer")
	var t dlpack.Tensor = buf

	v, _ := t.View()
	index, _ := v.Retain("my index") // as an index that keeps its dataset
	fmt.Println(buf.Free())
	index.End()
	fmt.Println(buf.Free())
	// Output:
	// dlpack: cannot close gpu buffer: still borrowed by "my index" (retained)
	// <nil>
}
