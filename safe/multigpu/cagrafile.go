package multigpu

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"os"

	"github.com/cuvs-go/cuvs/safe/internal/npy"
)

// errNotCagra is readCagraRows' refusal of a file it cannot read.
var errNotCagra = errors.New("not a CAGRA index file of a known format")

// cagraRank reads the header of one CAGRA index as cuVS's cagra::serialize
// writes it (the 4-byte NumPy dtype, then .npy scalars: version, on
// version 6 (26.08) and later the serialized dataset kind, then rows and
// dim) and, when skip is not nil, passes the rest of it (arrays' data by skip,
// which seeks: the data is not read): the .npy items up
// to the next index's dtype tag or the file's end (graph, content map,
// dataset, source indices; in the test double's files, its own payload).
func cagraRank(r *bufio.Reader, skip func(n int64) error) (rows, dim int64, err error) {
	var tag [4]byte
	if _, err := io.ReadFull(r, tag[:]); err != nil {
		return 0, 0, err
	}
	if tag[0] != '<' && tag[0] != '|' && tag[0] != '>' {
		return 0, 0, errNotCagra
	}
	v, err := npy.ReadScalar(r)
	if err != nil {
		return 0, 0, err
	}
	if v.Int >= 6 {
		if _, err := npy.ReadScalar(r); err != nil { // the dataset kind
			return 0, 0, err
		}
	}
	n, err := npy.ReadScalar(r)
	if err != nil {
		return 0, 0, err
	}
	d, err := npy.ReadScalar(r)
	if err != nil {
		return 0, 0, err
	}
	if n.Int < 0 || d.Int < 1 {
		return 0, 0, errNotCagra
	}
	for skip != nil && npy.AtItem(r) {
		if _, err := npy.ReadItem(r, skip); err != nil {
			return 0, 0, err
		}
	}
	return n.Int, d.Int, nil
}

// readCagraRows reads the rows of every rank of the CAGRA index file at
// path (the C API has no getter for them): a multi-GPU file
// (cuvsMultiGpuCagraSerialize: the dtype, .npy mode and rank count, then
// each rank's CAGRA index), or, multi false, a single-GPU one
// (cuvsCagraSerialize, or the test double's own format): one rank. It
// returns the rows of each rank and the dimension.
func readCagraRows(path string, size int64, multi bool) (shards []int64, dim int64, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	r := bufio.NewReader(f)
	if !multi {
		if head, _ := r.Peek(32); len(head) == 32 && bytes.HasPrefix(head, []byte("CVDBLCG")) {
			// the test double's single-GPU CAGRA format: an 8-byte magic,
			// dtype code, bits and lanes, metric, then int64 rows and dim
			n, d := int64(binary.LittleEndian.Uint64(head[16:])), int64(binary.LittleEndian.Uint64(head[24:]))
			if n < 0 || d < 1 {
				return nil, 0, errNotCagra
			}
			return []int64{n}, d, nil
		}
		n, d, err := cagraRank(r, nil)
		if err != nil {
			return nil, 0, err
		}
		return []int64{n}, d, nil
	}
	if _, err := r.Discard(4); err != nil {
		return nil, 0, err
	}
	if _, err := npy.ReadScalar(r); err != nil { // mode
		return nil, 0, err
	}
	k, err := npy.ReadScalar(r)
	if err != nil {
		return nil, 0, err
	}
	if k.Int < 1 || k.Int > 1<<16 {
		return nil, 0, errNotCagra
	}
	shards = make([]int64, k.Int)
	for i := range shards {
		n, d, err := cagraRank(r, npy.SkipIn(f, r))
		if err != nil {
			return nil, 0, err
		}
		if i > 0 && d != dim {
			return nil, 0, errNotCagra
		}
		shards[i], dim = n, d
	}
	if at, err := f.Seek(0, io.SeekCurrent); err != nil || at-int64(r.Buffered()) != size {
		return nil, 0, errNotCagra // not the data's end (size: before its checksum trailer)
	}
	return shards, dim, nil
}
