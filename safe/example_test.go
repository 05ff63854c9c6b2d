package safe_test

import (
	"errors"
	"fmt"
	"log"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/safe"
)

// Load the library, make a Resources (one per goroutine that calls cuVS),
// and move a matrix to the device and back. (The outputs shown are those of
// the test binary, which runs on the ABI test double; on a GPU they are the
// same.)
func Example() {
	// libcuvs_c from $CUVS_LIBRARY, the loader's path or $CONDA_PREFIX/lib,
	// version-checked, with the device memory pool on (process-wide).
	if err := safe.Load(); err != nil {
		log.Fatal(err)
	}
	res, err := safe.NewResources()
	if err != nil {
		log.Fatal(err)
	}
	defer res.Close()

	m, err := safe.DeviceMatrixFrom(res, []float32{1, 2, 3, 4, 5, 6}, 2, 3)
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	v, err := m.View() // what cuVS functions are handed
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(v)

	back, err := m.ToHost(res) // waits for the copy
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(back)
	// Output:
	// float32 cuda:0 [2 3] row-major
	// [1 2 3 4 5 6]
}

// Arguments are checked before any C call; a refusal names the argument.
func ExampleArgError() {
	if err := safe.Load(); err != nil {
		log.Fatal(err)
	}
	res, err := safe.NewResources()
	if err != nil {
		log.Fatal(err)
	}
	defer res.Close()
	_, err = safe.DeviceMatrixFrom(res, []float32{1, 2, 3}, 2, 2)
	var ae *safe.ArgError
	fmt.Println(errors.As(err, &ae), ae.Arg)
	fmt.Println(errors.Is(err, safe.ErrInvalidArgument))
	fmt.Println(err)
	// Output:
	// true data
	// true
	// safe.DeviceMatrixFrom: data: len 3 does not hold 2×2 elements
}

// Memory that something borrows refuses to be freed, and says who holds
// it; Close succeeds once the borrow ends.
func ExampleDeviceMatrix_Close() {
	if err := safe.Load(); err != nil {
		log.Fatal(err)
	}
	res, err := safe.NewResources()
	if err != nil {
		log.Fatal(err)
	}
	defer res.Close()
	m, err := safe.NewDeviceMatrix[float32](res, 100, 8)
	if err != nil {
		log.Fatal(err)
	}
	v, _ := m.View()
	r, err := v.Retain("my index") // as an index keeps its dataset
	if err != nil {
		log.Fatal(err)
	}
	err = m.Close()
	fmt.Println(errors.Is(err, dlpack.ErrBorrowed))
	fmt.Println(err)
	r.End()
	fmt.Println(m.Close())
	// Output:
	// true
	// dlpack: cannot close DeviceMatrix[float32] 100×8: still borrowed by "my index" (retained)
	// <nil>
}

// A bitset filter for an index of 70 rows that lets rows 0, 33 and 69
// through: sized for the index's rows, uploaded once, reusable.
func ExampleNewBitsetFilterAllowing() {
	if err := safe.Load(); err != nil {
		log.Fatal(err)
	}
	res, err := safe.NewResources()
	if err != nil {
		log.Fatal(err)
	}
	defer res.Close()
	f, err := safe.NewBitsetFilterAllowing(res, 70, []int64{0, 33, 69})
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	fmt.Println(f.Kind(), f.Rows(), f.Allowed())
	// Output:
	// bitset 70 3
}
