package bruteforce

import (
	"bufio"
	"os"

	"github.com/cuvs-go/cuvs/safe/internal/kit"
	"github.com/cuvs-go/cuvs/safe/internal/memest"
	"github.com/cuvs-go/cuvs/safe/internal/npy"
)

// fileNeed is the device memory the index in a brute-force file of size
// bytes will hold, from its header (dtype, rows, dim, metric, and whether
// the rows are included): Deserialize refuses the file before cuVS reads
// it when that does not fit. cuVS's deserialize
// (cpp/src/neighbors/brute_force_serialize.cu, v26.06.00 and v26.08.01)
// reads the rows into host memory and the index copies them to the
// device, with a float norm a row for the expanded metrics: what held
// counts once it is loaded. The norms are counted where the file can hold
// them (cuVS's files do; a header that claims more rows than its file
// holds is refused as damaged).
func fileNeed(path string, size int64) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	r := bufio.NewReader(f)
	h, err := parseHeader(r)
	if err != nil {
		return 0, err
	}
	// metric_arg, then cuVS's include_dataset; the test double's format
	// has its own body there, and always holds the rows
	included := true
	if _, err := npy.ReadItem(r, nil); err == nil && npy.AtItem(r) {
		it, err := npy.ReadItem(r, nil)
		if err != nil {
			return 0, err
		}
		included = it.Value != 0
	}
	var need int64
	if included {
		rows := kit.Product(h.rows, h.dim, memest.ElemSize(h.dtype))
		if err := kit.FileHolds(size, "rows", rows); err != nil {
			return 0, err
		}
		need = memest.Round(rows)
	}
	if norms := kit.Product(h.rows, 4); expanded(h.metric) && norms <= size {
		need += memest.Round(norms)
	}
	return need, nil
}
