package safe_test

import (
	"fmt"
	"log"

	"github.com/cuvs-go/cuvs/safe"
)

// One Resources per GPU, each bound to its device: every call made on one
// runs with its device current, from any goroutine. (No Output: the device
// count depends on the machine.)
func ExampleOnDevice() {
	if err := safe.Load(); err != nil {
		log.Fatal(err)
	}
	n, err := safe.DeviceCount()
	if err != nil {
		log.Fatal(err)
	}
	for d := 0; d < n; d++ {
		res, err := safe.NewResources(safe.OnDevice(d))
		if err != nil {
			log.Fatal(err)
		}
		m, err := safe.DeviceMatrixFrom(res, []float32{1, 2, 3, 4}, 2, 2)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println("matrix on", m.Device())
		m.Close()
		res.Close()
	}
}
