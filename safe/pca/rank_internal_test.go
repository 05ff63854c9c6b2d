package pca

import (
	"strings"
	"testing"

	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/internal/safetest"
)

// cuvsPcaFit converts noise_vars to a device_scalar_view, whose extents are
// rank 1 (static extent 1): a rank-0 tensor is refused, a one-value vector
// taken. The real 26.06 library refused this package's former rank-0
// noise_vars with the message below.
func TestNoiseVarsRank(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	const rows, dim, k = 6, 3, 2
	x := []float32{1, 2, 0, 3, 1, 1, 0, 4, 2, 5, 2, 1, 2, 0, 3, 1, 1, 4}
	p, err := DefaultParams()
	if err != nil {
		t.Fatal(err)
	}
	p.Components = k
	for _, c := range []struct {
		rank int
		want string // "" for success
	}{{0, "ndim mismatch between return mdspan and DLTensor"}, {2, "ndim mismatch"}, {1, ""}} {
		specs := []struct{ rank, rows, cols int }{
			{2, rows, dim}, {2, k, dim}, {1, 1, k}, {1, 1, k}, {1, 1, k}, {1, 1, dim}, {c.rank, 1, 1},
		}
		var ds []*dev
		for _, s := range specs {
			d, err := alloc(res, s.rank, s.rows, s.cols, colMajor() && s.rank == 2)
			if err != nil {
				t.Fatal(err)
			}
			defer d.close()
			ds = append(ds, d)
		}
		if err := ds[0].put(res, x); err != nil {
			t.Fatal(err)
		}
		err := call("test", res, &p, k, ds, func(h generated.CuvsResources_t, cp generated.CuvsPcaParams_t, ts []*generated.DLManagedTensor) error {
			return generated.CuvsPcaFit(h, cp, ts[0], ts[1], ts[2], ts[3], ts[4], ts[5], ts[6], false)
		})
		switch {
		case c.want == "" && err != nil:
			t.Errorf("noise_vars of rank %d: %v", c.rank, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("noise_vars of rank %d: %v, want an error with %q", c.rank, err, c.want)
		}
	}
}
