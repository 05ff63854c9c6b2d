package cagra

import (
	"fmt"
	"io"

	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
	"github.com/cuvs-go/cuvs/safe/internal/stream"
)

// SerializeTo writes the index to w in the format Serialize writes to a
// file (with its dataset when includeDataset is true), and returns the bytes
// written. cuVS writes only to file names: cuvsCagraSerialize writes into a
// named pipe in a private temporary directory while a goroutine copies it to
// w, so nothing reaches the disk. If w fails, the rest of cuVS's output is
// dropped and w's error returned.
func (idx *Index) SerializeTo(res *safe.Resources, w io.Writer, includeDataset bool) (int64, error) {
	const op = "cagra.Index.SerializeTo"
	if w == nil {
		return 0, kit.Argf(op, "w", "nil io.Writer")
	}
	var serr error
	n, err := stream.ToWriter(w, func(path string) error {
		serr = idx.Serialize(res, path, includeDataset)
		return serr
	})
	if err != nil && serr == nil {
		err = fmt.Errorf("%s: %w", op, err)
	}
	return n, err
}

// DeserializeFrom reads an index written by Serialize or SerializeTo from
// r, to its end. cuVS reads only file names, and cuvsCagraDeserialize opens
// the file twice: r is first copied into a file in a private temporary
// directory ($TMPDIR; as much disk as the index, until DeserializeFrom
// returns), which Deserialize then reads.
func DeserializeFrom(res *safe.Resources, r io.Reader) (*Index, error) {
	const op = "cagra.DeserializeFrom"
	if r == nil {
		return nil, kit.Argf(op, "r", "nil io.Reader")
	}
	var idx *Index
	var derr error
	_, err := stream.FromReader(r, func(path string) error {
		idx, derr = Deserialize(res, path)
		return derr
	})
	if err != nil {
		if derr == nil {
			err = fmt.Errorf("%s: %w", op, err)
		}
		return nil, err
	}
	return idx, nil
}
