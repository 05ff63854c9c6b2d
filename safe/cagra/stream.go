package cagra

import (
	"io"

	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
)

// SerializeTo writes the index to w in the format Serialize writes to a
// file (with its dataset unless safe.WithoutDataset), checksum trailer
// included, and returns the bytes written. cuVS writes only to file names:
// cuvsCagraSerialize writes into a named pipe in a private temporary
// directory while a goroutine copies it to w, so nothing reaches the disk.
// If w fails, the rest of cuVS's output is dropped and w's error returned.
func (idx *Index) SerializeTo(res *safe.Resources, w io.Writer, opts ...safe.SerializeOption) (int64, error) {
	// Not kind.SerializeTo: Serialize takes options.
	op := kind.Op.SerializeTo
	if _, err := kind.Of(idx, op); err != nil { // a zero index says so, before its arguments are checked
		return 0, err
	}
	s, err := kit.SerializeSettings(op, opts)
	if err != nil {
		return 0, err
	}
	return kit.SerializeSealed(op, w, func(path string) error { return idx.serialize(kind.Op.Serialize, res, path, !s.WithoutDataset) })
}

// DeserializeFrom reads an index written by Serialize or SerializeTo from
// r, to its end, and checks it as Deserialize does (the checksum trailer
// too; opts as Deserialize's, and MaxBytes). cuVS reads only file
// names (cuvsCagraDeserialize): r is copied into an anonymous in-memory file
// (memfd_create, opened by cuVS as /proc/self/fd/N; nothing reaches the
// disk, and the index's size in memory until DeserializeFrom returns;
// only where memfd_create or /proc is missing, a file in a private
// temporary directory under $TMPDIR). safe.MaxBytes bounds the stream: a
// longer one is refused, naming the limit, after at most limit+1 bytes.
func DeserializeFrom(res *safe.Resources, r io.Reader, opts ...safe.DeserializeOption) (*Index, error) {
	// Not kind.DeserializeFrom: Deserialize is CAGRA's own (see it).
	return kit.DeserializeFrom(kind.Op.DeserializeFrom, r, opts, func(path string) (*Index, error) { return Deserialize(res, path) })
}
