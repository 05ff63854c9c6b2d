package ivfpq

import (
	"fmt"
	"math"

	"github.com/cuvs-go/cuvs/safe/internal/kit"
	"github.com/cuvs-go/cuvs/safe/internal/npy"
)

// fileNeed is the device memory the index in an IVF-PQ file of size bytes
// will hold, at least, from its header alone (size, dim, pq_bits, pq_dim,
// codebook kind, codes layout, n_lists): Deserialize refuses the file
// before cuVS reads it when that does not fit. cuVS's deserialize
// (cpp/src/neighbors/ivf_pq/ivf_pq_serialize.cuh, v26.06.00 and
// v26.08.01) makes the index's codebooks, centers, rotated centers,
// rotation, list sizes and pointers (what EstimateMemory counts:
// fixedBytes) and each list on the device at the capacity of its size
// (ivf_list.cuh deserialize_list): a row's codes (flat: ceil(pq_dim ×
// pq_bits / 8) bytes; interleaved: 16-byte chunks of 128 / pq_bits codes)
// and its int64 id. The list sizes are in the body, not the header: the
// lists are bounded by their rows (size × (codes + 8) bytes), their
// capacities' rounding (and the interleaved layout's 32-row groups) left
// out.
func fileNeed(path string, size int64) (int64, error) {
	v, err := npy.ReadHeader(path, "an IVF-PQ index", false, 10)
	if err != nil {
		return 0, err
	}
	rows, dim, bits, pqDim, nl := v[1], v[2], v[3], v[4], v[9]
	if rows < 0 || dim < 1 || dim > math.MaxUint32 || bits < 4 || bits > 8 || pqDim < 1 || pqDim > math.MaxUint32 || nl < 1 || nl > math.MaxUint32 {
		return 0, fmt.Errorf("%w: not an IVF-PQ index (%d rows of dimension %d, pq_dim %d, pq_bits %d, %d lists)", npy.ErrFormat, rows, dim, pqDim, bits, nl)
	}
	g := pqGeometry(dim, pqDim, bits)
	flat := (pqDim*bits + 7) / 8
	books := pqDim
	if CodebookKind(v[7]) == PerCluster {
		books = nl
	}
	// what every file of the format holds, cuVS's or the test double's
	for _, part := range []struct {
		what  string
		bytes int64
	}{
		{"codes and ids", kit.Product(rows, flat+8)},
		{"centers", kit.Product(nl, g.dimExt, 4)},
		{"rotated centers", kit.Product(nl, g.rotDim, 4)},
		{"rotation", kit.Product(g.rotDim, dim, 4)},
		{"codebooks", kit.Product(books, g.pqLen, g.book, 4)},
	} {
		if err := kit.FileHolds(size, part.what, part.bytes); err != nil {
			return 0, err
		}
	}
	row := flat
	if CodesLayout(v[8]) != Flat {
		row = (pqDim + 128/bits - 1) / (128 / bits) * 16
	}
	return fixedBytes(g, nl, dim, CodebookKind(v[7])) + kit.Product(rows, row+8), nil
}
