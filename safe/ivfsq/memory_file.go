package ivfsq

import (
	"fmt"
	"math"

	"github.com/cuvs-go/cuvs/safe/internal/kit"
	"github.com/cuvs-go/cuvs/safe/internal/npy"
)

// fileNeed is the device memory the index in an IVF-SQ file of size bytes
// will hold, at least, from its header alone (size, dim, n_lists):
// Deserialize refuses the file before cuVS reads it when that does not
// fit. cuVS's deserialize (cpp/src/neighbors/ivf_sq/ivf_sq_serialize.cuh,
// v26.06.00 and v26.08.01) makes the index of n_lists lists (the centers,
// quantizer, list sizes and pointers EstimateMemory counts: fixedBytes)
// and each list on the device at the capacity of its size (ivf_list.cuh
// deserialize_list): a one-byte code a dimension and an int64 id a row.
// The list sizes are in the body, not the header: the lists are bounded by
// their rows (size × (dim + 8) bytes), their capacities' rounding left out,
// and so are the center norms, which the file holds only when the index
// had them.
func fileNeed(path string, size int64) (int64, error) {
	_, v, err := npy.ReadTaggedHeader(path, "an IVF-SQ index", 6)
	if err != nil {
		return 0, err
	}
	rows, dim, nl := v[1], v[2], v[3]
	if rows < 0 || dim < 1 || dim > math.MaxUint32 || nl < 1 || nl > math.MaxUint32 {
		return 0, fmt.Errorf("%w: not an IVF-SQ index (%d rows of dimension %d in %d lists)", npy.ErrFormat, rows, dim, nl)
	}
	data := kit.Product(rows, dim+8)
	if err := kit.FileHolds(size, "codes and ids", data); err != nil {
		return 0, err
	}
	if err := kit.FileHolds(size, "centers", kit.Product(nl, dim, 4)); err != nil {
		return 0, err
	}
	return fixedBytes(nl, dim) + data, nil
}
