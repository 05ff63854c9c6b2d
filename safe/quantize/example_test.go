package quantize_test

import (
	"fmt"
	"log"
	"math"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/quantize"
)

// Quantize rows to int8 with a scalar quantizer of the range [-1, 1], and
// map the codes back; then pack the same rows into sign bits.
func Example() {
	if err := safe.Load(); err != nil {
		log.Fatal(err)
	}
	res, err := safe.NewResources()
	if err != nil {
		log.Fatal(err)
	}
	defer res.Close()

	rows := []float32{-1, -0.5, 0, 0.5, 1, 2, -3, 0.25}
	in, _ := dlpack.NewHostMatrix(rows, 2, 4)
	q, err := quantize.NewScalar(-1, 1)
	if err != nil {
		log.Fatal(err)
	}
	codes := make([]int8, len(rows))
	out, _ := dlpack.NewHostMatrix(codes, 2, 4)
	if err := q.Transform(res, in, out); err != nil {
		log.Fatal(err)
	}
	back := make([]float32, len(rows))
	bout, _ := dlpack.NewHostMatrix(back, 2, 4)
	if err := q.InverseTransform(res, out, bout); err != nil {
		log.Fatal(err)
	}
	fmt.Println(codes)
	fmt.Printf("%.3f\n", back)

	bits := make([]uint8, 2*quantize.BinaryCols(4))
	bm, _ := dlpack.NewHostMatrix(bits, 2, quantize.BinaryCols(4))
	if err := quantize.BinaryTransform(res, in, bm); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%04b %04b\n", bits[0], bits[1])
	// Output:
	// [-128 -64 -1 63 127 127 -128 31]
	// [-1.000 -0.498 -0.004 0.498 1.000 1.000 -1.000 0.247]
	// 1000 1011
}

// Train a scalar quantizer on the rows themselves: DefaultScalarParams
// returns a value, TrainScalar takes a pointer (nil: the defaults). With
// Quantile 1 the range is the data's own, from its least to its largest
// value.
func ExampleTrainScalar() {
	if err := safe.Load(); err != nil {
		log.Fatal(err)
	}
	res, err := safe.NewResources()
	if err != nil {
		log.Fatal(err)
	}
	defer res.Close()

	rows := []float32{-1, -0.5, 0, 0.5, 1, 2, -3, 0.25}
	in, _ := dlpack.NewHostMatrix(rows, 2, 4)
	p, err := quantize.DefaultScalarParams()
	if err != nil {
		log.Fatal(err)
	}
	p.Quantile = 1
	q, err := quantize.TrainScalar(res, in, &p)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(math.Abs(q.Min()+3) < 0.1, math.Abs(q.Max()-2) < 0.1)
	// Output:
	// true true
}
