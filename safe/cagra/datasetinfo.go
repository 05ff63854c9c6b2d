package cagra

import (
	"fmt"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
)

// DatasetInfo describes the cuVS dataset (cuvsDataset_t) an index
// references on cuVS 26.08, as the library reports it.
type DatasetInfo struct {
	DType  dlpack.DataType // the rows' element type
	Device bool            // the rows are in device memory (else host memory)
	Padded bool            // cuVS's padded layout: each row padded to a multiple of 16 bytes (else standard)
	Owning bool            // the dataset owns its rows (a copy the library made); else it views rows someone else owns
}

// DatasetInfo reports what the dataset the index references is (cuVS 26.08:
// an index always references a cuvsDataset_t; see the package
// documentation): a view of your device rows after Build from padded
// device memory (Owning false: the index borrows them), the library's own
// padded copy after Build from anything else (Owning true), and after
// Extend a view of the concatenation this package allocated for the index
// (or the library's copy of it when its rows are not 16-byte multiples). It is refused with ErrNoDataset when the index references none (a
// graph-only file), and with safe.ErrNotInRelease on cuVS 26.06, whose
// indexes own their rows and have no dataset object.
//
// C calls: cuvsDatasetGetDtype, cuvsDatasetGetMemType,
// cuvsDatasetGetLayout, cuvsDatasetGetIsOwning.
func (idx *Index) DatasetInfo() (DatasetInfo, error) {
	const op = "cagra.Index.DatasetInfo"
	if _, err := kind.Of(idx, op); err != nil { // a zero index says so, before its arguments are checked
		return DatasetInfo{}, err
	}
	if err := kit.InRelease(op, "cuvsDatasetGetIsOwning"); err != nil {
		return DatasetInfo{}, err
	}
	if err := idx.c.Life.Enter(op); err != nil {
		return DatasetInfo{}, err
	}
	defer idx.c.Life.Leave()
	if idx.ds == nil || idx.ds.ds == 0 {
		return DatasetInfo{}, fmt.Errorf("%s: %w", op, ErrNoDataset)
	}
	ds := idx.ds.ds
	var (
		dt     generated.DLDataType
		mem    generated.CuvsDatasetMemType_t
		layout generated.CuvsDatasetLayout_t
		owning bool
	)
	if err := generated.CuvsDatasetGetDtype(ds, &dt); err != nil {
		return DatasetInfo{}, kit.Wrap(op, err)
	}
	if err := generated.CuvsDatasetGetMemType(ds, &mem); err != nil {
		return DatasetInfo{}, kit.Wrap(op, err)
	}
	if err := generated.CuvsDatasetGetLayout(ds, &layout); err != nil {
		return DatasetInfo{}, kit.Wrap(op, err)
	}
	if err := generated.CuvsDatasetGetIsOwning(ds, &owning); err != nil {
		return DatasetInfo{}, kit.Wrap(op, err)
	}
	return DatasetInfo{
		DType:  dlpack.DataType{Code: dlpack.TypeCode(dt.Code), Bits: dt.Bits, Lanes: dt.Lanes},
		Device: mem == generated.CuvsDatasetMemType_t_CUVS_DATASET_MEM_TYPE_DEVICE,
		Padded: layout == generated.CuvsDatasetLayout_t_CUVS_DATASET_LAYOUT_PADDED,
		Owning: owning,
	}, nil
}
