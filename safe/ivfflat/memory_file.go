package ivfflat

import (
	"fmt"
	"math"

	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
	"github.com/cuvs-go/cuvs/safe/internal/npy"
)

// fileNeed is the device memory the index in an IVF-Flat file of size
// bytes will hold, at least, from its header alone (its dtype tag, size,
// dim, n_lists and metric): Deserialize refuses the file before cuVS reads
// it when that does not fit. cuVS's deserialize (cpp/src/neighbors/
// ivf_flat/ivf_flat_serialize.cuh, v26.06.00 and v26.08.01) makes the
// index of n_lists lists (the centers, list sizes, pointers and center
// norms EstimateMemory counts: fixedBytes) and each list on the device at
// the capacity of its size (ivf_list.cuh deserialize_list; the file's rows
// pass through host memory). The list sizes are in the body, not the
// header: the lists are bounded by their rows and ids (size × (dim ×
// element + 8) bytes), their capacities' rounding left out (a list of n
// rows holds up to twice n under 1024, up to 1023 more above: see
// memest.ListCapacity), which the loaded index then counts.
func fileNeed(path string, size int64) (int64, error) {
	esz, v, err := npy.ReadTaggedHeader(path, "an IVF-Flat index", 7)
	if err != nil {
		return 0, err
	}
	rows, dim, nl := v[1], v[2], v[3]
	if rows < 0 || dim < 1 || dim > math.MaxUint32 || nl < 1 || nl > math.MaxUint32 {
		return 0, fmt.Errorf("%w: not an IVF-Flat index (%d rows of dimension %d in %d lists)", npy.ErrFormat, rows, dim, nl)
	}
	data := kit.Product(rows, dim*esz+8)
	if err := kit.FileHolds(size, "rows and ids", data); err != nil {
		return 0, err
	}
	if err := kit.FileHolds(size, "centers", kit.Product(nl, dim, 4)); err != nil {
		return 0, err
	}
	return fixedBytes(nl, dim, safe.Metric(v[4])) + data, nil
}
