package kit_test

import (
	"math"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/x448/float16"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
)

func TestMain(m *testing.M) { safetest.Main(m) }

// FirstNonFinite finds the first NaN or infinity of each float type, and
// nothing in finite data (the largest finite values included) or in
// integers.
func TestFirstNonFinite(t *testing.T) {
	nan32, inf32 := float32(math.NaN()), float32(math.Inf(1))
	for _, c := range []struct {
		name string
		p    unsafe.Pointer
		n    int
		dt   dlpack.DataType
		at   int
		what string
	}{
		{"float32 finite", unsafe.Pointer(&[]float32{0, -0, math.MaxFloat32, -math.MaxFloat32, math.SmallestNonzeroFloat32}[0]), 5, dlpack.Float32, -1, ""},
		{"float32 NaN", unsafe.Pointer(&[]float32{1, 2, nan32, inf32}[0]), 4, dlpack.Float32, 2, "NaN"},
		{"float32 -Inf", unsafe.Pointer(&[]float32{1, -inf32}[0]), 2, dlpack.Float32, 1, "-Inf"},
		{"float64 +Inf", unsafe.Pointer(&[]float64{math.MaxFloat64, math.Inf(1)}[0]), 2, dlpack.Float64, 1, "+Inf"},
		{"float16 finite", unsafe.Pointer(&[]float16.Float16{float16.Fromfloat32(65504), float16.Fromfloat32(-1)}[0]), 2, dlpack.Float16, -1, ""},
		{"float16 NaN", unsafe.Pointer(&[]float16.Float16{0, float16.NaN()}[0]), 2, dlpack.Float16, 1, "NaN"},
		{"float16 -Inf", unsafe.Pointer(&[]float16.Float16{float16.Inf(-1)}[0]), 1, dlpack.Float16, 0, "-Inf"},
		{"int8", unsafe.Pointer(&[]int8{-1, 127}[0]), 2, dlpack.Int8, -1, ""},
		{"uint32 bits of NaN", unsafe.Pointer(&[]uint32{0x7fc00000}[0]), 1, dlpack.Uint32, -1, ""},
	} {
		at, what := kit.FirstNonFinite(c.p, c.n, c.dt)
		if at != c.at || what != c.what {
			t.Errorf("%s: %d %q, want %d %q", c.name, at, what, c.at, c.what)
		}
	}
}

// CheckFinite names the row of the first bad value in row-major and
// strided (column-major) host views, and does not read device memory.
func TestCheckFinite(t *testing.T) {
	data := make([]float32, 12) // 4 rows × 3 columns
	data[7] = float32(math.NaN())
	rm, err := dlpack.FromRawParts(unsafe.Pointer(&data[0]), dlpack.Device{Type: dlpack.CPU}, []int64{4, 3}, nil, dlpack.Float32)
	if err != nil {
		t.Fatal(err)
	}
	if err := kit.CheckFinite("op", "dataset", &rm); !safetest.IsArg(err, "dataset") || !strings.Contains(err.Error(), "row 2 holds NaN (column 1)") {
		t.Errorf("row-major: %v", err)
	}
	// The same memory read as 3 rows × 4 columns, column-major: element
	// 7 is row 1, column 2.
	cm, err := dlpack.FromRawParts(unsafe.Pointer(&data[0]), dlpack.Device{Type: dlpack.CPU}, []int64{3, 4}, []int64{1, 3}, dlpack.Float32)
	if err != nil {
		t.Fatal(err)
	}
	if err := kit.CheckFinite("op", "dataset", &cm); !safetest.IsArg(err, "dataset") || !strings.Contains(err.Error(), "row 1 holds NaN (column 2)") {
		t.Errorf("column-major: %v", err)
	}
	dev, err := dlpack.FromRawParts(unsafe.Pointer(&data[0]), dlpack.Device{Type: dlpack.CUDA}, []int64{4, 3}, nil, dlpack.Float32)
	if err != nil {
		t.Fatal(err)
	}
	if err := kit.CheckFinite("op", "dataset", &dev); err != nil {
		t.Errorf("device memory is not read: %v", err)
	}
	if err := kit.CheckFiniteSlice("op", "queries", data, 3); !safetest.IsArg(err, "queries") || !strings.Contains(err.Error(), "row 2") {
		t.Errorf("CheckFiniteSlice: %v", err)
	}
}

// Rule.Take, which every Build and Extend uses for its data, refuses host
// data holding a NaN or an infinity, naming the argument and the row.
func TestTakeRefusesNonFinite(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	r := kit.Rule{Arg: "dataset", Memory: kit.AnyMemory, DTypes: []dlpack.DataType{dlpack.Float32, dlpack.Float16}, Rank: 2, RowMajor: true}
	data := safetest.Random(1, 5, 4)
	data[13] = float32(math.Inf(1))
	m, err := dlpack.NewHostMatrix(data, 5, 4)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Take("op", res, m); !safetest.IsArg(err, "dataset") || !strings.Contains(err.Error(), "row 3 holds +Inf") {
		t.Errorf("float32: %v", err)
	}
	h := make([]float16.Float16, 20)
	h[19] = float16.NaN()
	hm, err := dlpack.NewHostMatrix(h, 5, 4)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Take("op", res, hm); !safetest.IsArg(err, "dataset") || !strings.Contains(err.Error(), "row 4 holds NaN") {
		t.Errorf("float16: %v", err)
	}
	data[13] = 0
	if _, err := r.Take("op", res, m); err != nil {
		t.Errorf("finite data: %v", err)
	}
}

// Unfilled turns every unfilled slot into its type's sentinel with +Inf
// (an infinite distance, math.MaxInt64, or CAGRA's 2^31-1 at
// math.MaxFloat32) and leaves the others alone.
func TestUnfilled(t *testing.T) {
	inf := float32(math.Inf(1))
	ids := []int64{1, 2, 0x7FFFFFFF, 5, 0, math.MaxInt64, 0x7FFFFFFF}
	d := []float32{0.5, float32(math.Inf(-1)), math.MaxFloat32, math.MaxFloat32, inf, 3, 2}
	kit.Unfilled(ids, d)
	if want := []int64{1, safe.SentinelID64, safe.SentinelID64, 5, safe.SentinelID64, safe.SentinelID64, 0x7FFFFFFF}; !slices.Equal(ids, want) {
		t.Errorf("ids %v, want %v", ids, want)
	}
	if want := []float32{0.5, inf, inf, math.MaxFloat32, inf, inf, 2}; !slices.Equal(d, want) {
		t.Errorf("distances %v, want %v", d, want)
	}
	u := []uint32{4, 0x7FFFFFFF, 9}
	ud := []float32{1, math.MaxFloat32, inf}
	kit.Unfilled(u, ud)
	if !slices.Equal(u, []uint32{4, safe.SentinelID32, safe.SentinelID32}) || !slices.Equal(ud, []float32{1, inf, inf}) {
		t.Errorf("uint32: %v %v", u, ud)
	}
}
