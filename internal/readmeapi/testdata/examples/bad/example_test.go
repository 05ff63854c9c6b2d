package bad_test

import (
	"fmt"
	"log"

	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
)

func Example() {
	res, err := safe.NewResources()
	fmt.Println(res, err)
}

func ExampleIndex() {
	fmt.Println("no library yet")
	p, err := kit.Something()
	fmt.Println(p, err)
}

// Load after the first use is too late.
func ExampleLate() {
	var x int
	fmt.Println(x)
	res, _ := safe.NewResources()
	if err := safe.Load(); err != nil {
		log.Fatal(err)
	}
	fmt.Println(res)
}

// A helper of the test files that uses the library counts as a use.
func ExampleHelper() {
	res := newResources()
	fmt.Println(res)
}
