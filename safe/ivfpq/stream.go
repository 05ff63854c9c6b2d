package ivfpq

import (
	"fmt"
	"io"

	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
	"github.com/cuvs-go/cuvs/safe/internal/npy"
)

// SerializeTo writes the index to w in the format Serialize writes to a
// file, and returns the bytes written. cuVS writes only to file names:
// cuvsIvfPqSerialize writes into a named pipe in a private temporary
// directory while a goroutine copies it to w, so nothing reaches the disk.
// If w fails, the rest of cuVS's output is dropped and w's error returned.
func (idx *Index) SerializeTo(res *safe.Resources, w io.Writer) (int64, error) {
	return kind.SerializeTo(idx, res, w)
}

// DeserializeFrom reads an index written by Serialize or SerializeTo from
// r, to its end, and checks it as Deserialize does. cuVS reads only file
// names (cuvsIvfPqDeserialize): r is copied into an anonymous in-memory file
// (memfd_create, opened by cuVS as /proc/self/fd/N; nothing reaches the
// disk, and the index's size in memory until DeserializeFrom returns;
// only where memfd_create or /proc is missing, a file in a private
// temporary directory under $TMPDIR). safe.MaxBytes bounds the stream: a
// longer one is refused, naming the limit, after at most limit+1 bytes.
func DeserializeFrom(res *safe.Resources, r io.Reader, opts ...safe.DeserializeOption) (*Index, error) {
	return kind.DeserializeFrom(res, r, opts)
}

// pqLayout checks the sequence of a cuVS IVF-PQ file's .npy items
// (ivf_pq_serialize.cuh at v26.06.00): ten scalars (version 4, size, dim,
// pq_bits, pq_dim, conservative allocation, metric, codebook kind, codes
// layout, n_lists), the four arrays of centres and rotation, the list
// sizes, then per list its size and, when not 0, its codes and ids. It has
// no dtype tag, so another whole index after one would otherwise pass as
// items.
type pqLayout struct {
	items  int    // items seen
	nLists uint64 // from the tenth scalar
	list   uint64 // lists seen
	arrays int    // arrays still due for the current list
}

func (l *pqLayout) visit(i int, it npy.Item) error {
	if i >= 0 {
		l.items = i + 1
	}
	switch {
	case i < 0: // the end of the file, after whole items
		if l.items < 15 || l.list < l.nLists || l.arrays > 0 {
			return fmt.Errorf("%w: the file ends within the index (%d items, %d of %d lists): truncated", npy.ErrFormat, l.items, l.list, l.nLists)
		}
	case i == 0:
		if !it.Scalar || it.Value != 4 {
			return fmt.Errorf("%w: not an IVF-PQ index of format version 4 (%s %d)", npy.ErrFormat, it.Descr, it.Value)
		}
	case i < 10:
		if !it.Scalar {
			return fmt.Errorf("%w: header item %d is not a scalar", npy.ErrFormat, i)
		}
		if i == 9 {
			l.nLists = it.Value
		}
	case i < 15:
		if it.Scalar {
			return fmt.Errorf("%w: item %d should be an array", npy.ErrFormat, i)
		}
	case l.arrays > 0:
		if it.Scalar {
			return fmt.Errorf("%w: list %d: item %d should be an array", npy.ErrFormat, l.list-1, i)
		}
		l.arrays--
	case l.list >= l.nLists:
		return fmt.Errorf("%w: item %d after the last of %d lists: bytes after the index", npy.ErrFormat, i, l.nLists)
	default:
		if !it.Scalar {
			return fmt.Errorf("%w: list %d: item %d should be its size", npy.ErrFormat, l.list, i)
		}
		l.list++
		if it.Value != 0 {
			l.arrays = 2
		}
	}
	return nil
}

// loaded reads from the file's header what the C API has no getter for:
// the list allocation (the sixth scalar), the metric (the seventh), the
// codebook kind (the eighth) and the codes layout (the ninth).
func (idx *Index) loaded(op, path string) error {
	h, err := readHeader(path)
	if err != nil {
		return kit.Corrupt(op, err)
	}
	idx.metric, idx.layout, idx.layoutKnown = h.metric, h.layout, true
	idx.codebook, idx.cma = h.codebook, h.cma
	return nil
}

// header is what loaded reads from an IVF-PQ file's header.
type header struct {
	metric   safe.Metric
	layout   CodesLayout
	codebook CodebookKind
	cma      bool
}

// readHeader reads an IVF-PQ file's ten header scalars (pqLayout).
func readHeader(path string) (header, error) {
	v, err := npy.ReadHeader(path, "an IVF-PQ index", false, 10)
	if err != nil {
		return header{}, err
	}
	m, l := safe.Metric(v[6]), CodesLayout(v[8])
	if !metricOK(m) || (l != Flat && l != Interleaved) {
		return header{}, fmt.Errorf("%w: not an IVF-PQ index of this library (metric %d, codes layout %d)", npy.ErrFormat, v[6], v[8])
	}
	return header{metric: m, layout: l, codebook: CodebookKind(v[7]), cma: v[5] != 0}, nil
}
