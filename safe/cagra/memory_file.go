package cagra

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"os"

	"github.com/cuvs-go/cuvs/safe/internal/kit"
	"github.com/cuvs-go/cuvs/safe/internal/memest"
	"github.com/cuvs-go/cuvs/safe/internal/npy"
)

// fileNeed is the device memory the index in a CAGRA file of size bytes
// will hold, from its header: Deserialize refuses the file before cuVS
// reads it when that does not fit. The graph, rows × graph degree uint32,
// goes to the device (update_graph); so do the rows when the file holds
// them in a device dataset: on 26.06 always (cuvsCagraDeserialize:
// detail/cagra/cagra_serialize.cuh deserialize, and
// detail/dataset_serialize.hpp: a strided dataset of rows × stride
// elements, or a VPQ dataset's codebooks and codes), on 26.08 for the
// device_padded and device_standard kinds the header names (the host kinds
// stay in host memory: cuvsCagraDeserializeGraphAndDataset,
// c/src/neighbors/cagra.cpp, and dataset_serialize.hpp
// deserialize_device_dense, rows × stride). The rows' stride is read where
// cuVS's format writes it (after the graph: the header's scalars, the
// graph skipped, a few more scalars); in the test double's format the
// rows are padded to 16 bytes as cuVS's CAGRA builds pad them (paddedRows).
// Left out: the source indices a file may hold (rows int32 on the device).
func fileNeed(path string, size int64) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	r := bufio.NewReader(f)
	if head, _ := r.Peek(48); len(head) == 48 && bytes.HasPrefix(head, []byte("CVDBLCG")) {
		return doubleFileNeed(head, size)
	}
	var tag [4]byte
	if _, err := io.ReadFull(r, tag[:]); err != nil {
		return 0, fmt.Errorf("%w: not a CAGRA index: %v", npy.ErrFormat, err)
	}
	esz, err := npy.TagBytes(tag)
	if err != nil {
		return 0, err
	}
	scalar := func() (int64, error) {
		it, err := npy.ReadItem(r, nil)
		if err == nil && !it.Scalar {
			err = fmt.Errorf("%w: not a CAGRA index (an array where a scalar is due)", npy.ErrFormat)
		}
		return int64(it.Value), err
	}
	ver, err := scalar()
	if err != nil {
		return 0, err
	}
	dsKind := int64(-1) // 26.06's files name no dataset kind: the rows go to the device
	if ver >= 6 {
		if dsKind, err = scalar(); err != nil {
			return 0, err
		}
	}
	var h [4]int64 // rows, dim, graph degree, metric
	for i := range h {
		if h[i], err = scalar(); err != nil {
			return 0, err
		}
	}
	rows, degree := h[0], h[2]
	if rows < 0 || h[1] < 0 || degree < 0 {
		return 0, fmt.Errorf("%w: not a CAGRA index (%d rows of dimension %d, degree %d)", npy.ErrFormat, rows, h[1], degree)
	}
	graph := kit.Product(rows, degree, 4)
	if err := kit.FileHolds(size, "graph", graph); err != nil {
		return 0, err
	}
	need := memest.Round(graph)
	if _, err := npy.ReadItem(r, npy.SkipIn(f, r)); err != nil || !npy.AtItem(r) {
		return need, err // the graph; then, in a whole file, the content map
	}
	// What follows the graph is read as cuVS's sources write it, not yet
	// checked against a file the real library wrote: a misreading must not
	// refuse a good file, so past the graph the bound falls back to the
	// graph alone (cuVS's own reader refuses a damaged file).
	content, err := scalar()
	if err != nil || content&1 == 0 {
		return need, nil
	}
	// the dataset's tag and dtype, then its scalars: a strided dataset's
	// rows, dim and stride; a VPQ dataset's (26.06) rows, dim, VQ centers,
	// PQ centers, pq_len and code bytes a row; an empty one's dimension
	var v [8]int64
	due := 2
	for i := 0; i < due; i++ {
		if v[i], err = scalar(); err != nil {
			return need, nil
		}
		switch {
		case i > 0:
		case v[0] == 2:
			due = 5
		case v[0] == 3:
			due = 8
		default: // empty: nothing on the device
			return need, nil
		}
	}
	if v[0] == 2 {
		if dsKind == 3 || dsKind == 4 { // 26.08's host_padded and host_standard
			return need, nil
		}
		n, dim, stride := v[2], v[3], v[4]
		if kit.FileHolds(size, "rows", kit.Product(n, dim, esz)) != nil || n < 0 || dim < 0 {
			return need, nil
		}
		// rows × stride elements; a stride past 16 elements of padding
		// (more than cuVS's 16 bytes) counts as that
		return need + memest.Round(kit.Product(n, max(dim, min(stride, dim+16)), esz)), nil
	}
	m := int64(4) // the VPQ codebooks' type: CUDA_R_32F (0), or CUDA_R_16F
	if v[1] != 0 {
		m = 2
	}
	for _, part := range [][]int64{{v[4], v[3], m}, {v[5], v[6], m}, {v[2], v[7]}} {
		b := kit.Product(part...)
		if kit.FileHolds(size, "compressed rows", b) != nil {
			return memest.Round(graph), nil
		}
		need += memest.Round(b)
	}
	return need, nil
}

// doubleFileNeed is fileNeed of the test double's CAGRA format: an 8-byte
// magic (CVDBLCG1 for 26.06, CVDBLCG6 for 26.08), the dtype's code, bits
// and lanes, the metric, int64 rows, dim and degree, then 26.06's
// has_dataset byte or 26.08's dataset kind (uint32, cuVS's numbering).
func doubleFileNeed(head []byte, size int64) (int64, error) {
	esz := int64(head[9]) / 8
	rows := int64(binary.LittleEndian.Uint64(head[16:]))
	dim := int64(binary.LittleEndian.Uint64(head[24:]))
	degree := int64(binary.LittleEndian.Uint64(head[32:]))
	if esz < 1 || esz > 4 || rows < 0 || dim < 0 || degree < 0 {
		return 0, fmt.Errorf("%w: not a CAGRA index (%d rows of dimension %d, degree %d, %d-bit elements)", npy.ErrFormat, rows, dim, degree, head[9])
	}
	graph := kit.Product(rows, degree, 4)
	if err := kit.FileHolds(size, "graph", graph); err != nil {
		return 0, err
	}
	dsKind := int64(binary.LittleEndian.Uint32(head[40:]))
	if head[7] == '1' {
		dsKind = int64(head[40]) // has_dataset: device padded rows
	}
	need := memest.Round(graph)
	if dsKind != 0 {
		if err := kit.FileHolds(size, "rows", kit.Product(rows, dim, esz)); err != nil {
			return 0, err
		}
	}
	switch dsKind {
	case 1:
		need += paddedRows(rows, dim, esz)
	case 2:
		need += memest.Round(rows * dim * esz)
	}
	return need, nil
}
