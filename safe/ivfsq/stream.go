package ivfsq

import (
	"io"

	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
)

// SerializeTo writes the index to w in the format Serialize writes to a
// file, and returns the bytes written. cuVS writes only to file names:
// cuvsIvfSqSerialize writes into a named pipe in a private temporary
// directory while a goroutine copies it to w, so nothing reaches the disk.
// If w fails, the rest of cuVS's output is dropped and w's error returned.
func (idx *Index) SerializeTo(res *safe.Resources, w io.Writer) (int64, error) {
	return kit.SerializeTo("ivfsq.Index.SerializeTo", w, func(path string) error { return idx.Serialize(res, path) })
}

// DeserializeFrom reads an index written by Serialize or SerializeTo from
// r, to its end. cuVS reads only file names: r is first copied into a
// file in a private temporary directory ($TMPDIR; as much disk as the
// index, until DeserializeFrom returns), which Deserialize then reads.
func DeserializeFrom(res *safe.Resources, r io.Reader) (*Index, error) {
	return kit.DeserializeFrom("ivfsq.DeserializeFrom", r, func(path string) (*Index, error) { return Deserialize(res, path) })
}
