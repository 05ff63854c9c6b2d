package bruteforce

import (
	"io"

	"github.com/cuvs-go/cuvs/safe"
)

// SerializeTo writes the index to w in the format Serialize writes to a
// file, with its dataset, and returns the bytes written. cuVS writes only to file names:
// cuvsBruteForceSerialize writes into a named pipe in a private temporary
// directory while a goroutine copies it to w, so nothing reaches the disk.
// If w fails, the rest of cuVS's output is dropped and w's error returned.
func (idx *Index) SerializeTo(res *safe.Resources, w io.Writer) (int64, error) {
	return kind.SerializeTo(idx, res, w)
}

// DeserializeFrom reads an index written by Serialize or SerializeTo from
// r, to its end, and checks it as Deserialize does. cuVS reads only file
// names (cuvsBruteForceDeserialize): r is copied into an anonymous in-memory file
// (memfd_create, opened by cuVS as /proc/self/fd/N; nothing reaches the
// disk, and the index's size in memory until DeserializeFrom returns;
// only where memfd_create or /proc is missing, a file in a private
// temporary directory under $TMPDIR). safe.MaxBytes bounds the stream: a
// longer one is refused, naming the limit, after at most limit+1 bytes.
func DeserializeFrom(res *safe.Resources, r io.Reader, opts ...safe.DeserializeOption) (*Index, error) {
	return kind.DeserializeFrom(res, r, opts)
}
