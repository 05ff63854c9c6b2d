package vamana

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"

	"github.com/cuvs-go/cuvs/safe"
)

// checkDataFile checks that cuVS wrote the dataset file: cuVS swallows the
// failure (a log line) when it cannot.
// The error is a *safe.Error naming cuvsVamanaSerialize.
func (idx *Index) checkDataFile(op, path string) error {
	fail := func(format string, args ...any) error {
		r := fmt.Sprintf(format, args...)
		return &safe.Error{Op: op, Func: "cuvsVamanaSerialize", Reason: r, Text: r}
	}
	f, err := os.Open(path)
	if err != nil {
		return fail("cuVS did not write the dataset file (it only logs that): %v", err)
	}
	defer f.Close()
	var hdr [2]int32
	if err := binary.Read(f, binary.LittleEndian, &hdr); err != nil {
		return fail("dataset file %s: %v", path, err)
	}
	st, err := f.Stat()
	if err != nil {
		return fail("dataset file %s: %v", path, err)
	}
	want := 8 + idx.rows*idx.dim*idx.dtype.ElemSize()
	if int64(hdr[0]) != idx.rows || int64(hdr[1]) != idx.dim || st.Size() != want {
		return fail("dataset file %s holds %d × %d in %d bytes, want %d × %d in %d", path, hdr[0], hdr[1], st.Size(), idx.rows, idx.dim, want)
	}
	return nil
}

// Graph is a Vamana graph as Serialize writes it (DiskANN's in-memory
// index format). The medoid is a random row (cuVS's own TODO says so), and
// unfilled neighbour slots are left out of the file: rows have up to
// GraphDegree neighbours. A row may name the same neighbour more than
// once: cuVS's RobustPrune drops a repeat only when its two merged lists
// meet it head to head, writes a merge no longer than GraphDegree without
// pruning, and overwrites only its result's slots, leaving an older tail
// behind.
type Graph struct {
	FileSize  uint64     // the header's file size
	MaxDegree uint32     // the header's largest degree
	Medoid    uint32     // the entry point of a search
	Frozen    uint64     // frozen points (cuVS writes 0)
	Adjacency [][]uint32 // each row's neighbours
}

// ReadGraph reads a graph file written by Serialize (DiskANN's in-memory
// index format), checking the header against the contents: for tests and
// tools that inspect what cuVS wrote. It reads no dataset file. A file
// that does not hold what its header says gives an error wrapping
// safe.ErrCorruptIndex.
func ReadGraph(r io.Reader) (*Graph, error) {
	const op = "vamana.ReadGraph"
	var g Graph
	var hdr struct {
		Size      uint64
		MaxDegree uint32
		Medoid    uint32
		Frozen    uint64
	}
	if err := binary.Read(r, binary.LittleEndian, &hdr); err != nil {
		return nil, fmt.Errorf("%s: %w: header: %w", op, safe.ErrCorruptIndex, err)
	}
	g.FileSize, g.MaxDegree, g.Medoid, g.Frozen = hdr.Size, hdr.MaxDegree, hdr.Medoid, hdr.Frozen
	read := uint64(24)
	var maxSeen uint32
	for read < hdr.Size {
		var n uint32
		if err := binary.Read(r, binary.LittleEndian, &n); err != nil {
			return nil, fmt.Errorf("%s: %w: row %d: %w", op, safe.ErrCorruptIndex, len(g.Adjacency), err)
		}
		if n > hdr.MaxDegree || uint64(n)*4+4 > hdr.Size-read {
			return nil, fmt.Errorf("%s: %w: row %d: degree %d does not fit the header (largest %d, %d bytes left)", op, safe.ErrCorruptIndex, len(g.Adjacency), n, hdr.MaxDegree, hdr.Size-read)
		}
		ids := make([]uint32, n)
		if err := binary.Read(r, binary.LittleEndian, ids); err != nil {
			return nil, fmt.Errorf("%s: %w: row %d: %w", op, safe.ErrCorruptIndex, len(g.Adjacency), err)
		}
		g.Adjacency = append(g.Adjacency, ids)
		maxSeen = max(maxSeen, n)
		read += 4 + 4*uint64(n)
	}
	if extra, _ := io.Copy(io.Discard, r); extra != 0 {
		return nil, fmt.Errorf("%s: %w: %d bytes after the %d the header announces", op, safe.ErrCorruptIndex, extra, hdr.Size)
	}
	if maxSeen != hdr.MaxDegree {
		return nil, fmt.Errorf("%s: %w: largest degree %d, the header says %d", op, safe.ErrCorruptIndex, maxSeen, hdr.MaxDegree)
	}
	for i, row := range g.Adjacency {
		for _, id := range row {
			if uint64(id) >= uint64(len(g.Adjacency)) {
				return nil, fmt.Errorf("%s: %w: row %d: id %d of %d rows", op, safe.ErrCorruptIndex, i, id, len(g.Adjacency))
			}
		}
	}
	if len(g.Adjacency) > 0 && uint64(g.Medoid) >= uint64(len(g.Adjacency)) {
		return nil, fmt.Errorf("%s: %w: medoid %d of %d rows", op, safe.ErrCorruptIndex, g.Medoid, len(g.Adjacency))
	}
	return &g, nil
}
