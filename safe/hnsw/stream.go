package hnsw

import (
	"io"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
)

// SerializeTo writes the index to w in the format Serialize writes to a
// file (hnswlib's) followed by its checksum trailer (Serialize's sidecar),
// and returns the bytes written: hnswlib itself reads the stream without
// its trailer (see integrity's format: the last 32 bytes say its length). cuVS writes only to file
// names: cuvsHnswSerialize writes into a named pipe in a private temporary
// directory while a goroutine copies it to w, so nothing reaches the disk.
func (idx *Index) SerializeTo(res *safe.Resources, w io.Writer) (int64, error) {
	return kind.SerializeTo(idx, res, w)
}

// DeserializeFrom reads an hnswlib index from r, to its end, and checks it
// as Deserialize does (dtype and metric given, as the format holds
// neither; the dimension is read), its checksum trailer too (opts as
// Deserialize's, and MaxBytes). cuVS reads only file names (cuvsHnswDeserialize): r is
// copied into an anonymous in-memory file (memfd_create; a file in a
// private temporary directory where that is missing). safe.MaxBytes bounds
// the stream.
func DeserializeFrom(res *safe.Resources, r io.Reader, dtype dlpack.DataType, metric safe.Metric, params *IndexParams, opts ...safe.DeserializeOption) (*Index, error) {
	return kit.DeserializeFrom("hnsw.DeserializeFrom", r, opts, func(path string) (*Index, error) {
		return load("hnsw.Deserialize", res, path, dtype, metric, params)
	})
}
