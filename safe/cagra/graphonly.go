package cagra

import (
	"errors"

	"github.com/cuvs-go/cuvs/safe/internal/kit"
)

// ErrNoDataset is wrapped by the refusals of an index that holds a graph
// but no dataset: one deserialized from a file written with
// safe.WithoutDataset. cuVS keeps the empty dataset such a file leaves
// (cuvsCagraIndexGetDims then reports 0, so Dim is 0), and cannot search
// or extend it.
var ErrNoDataset = errors.New("cagra: the index holds no dataset (serialized without it)")

const noDatasetHelp = "to search it, make an index of its graph (Graph) and the dataset with IndexFromArgs, or deserialize a file written with its dataset"

// graphOnly reports whether the index holds a graph but no dataset: rows
// (the graph's) and dimension 0, which only a file written without its
// dataset gives (a build needs at least one column).
// On 26.08 cuvsCagraDeserializeGraph keeps the file's dimension, and
// noDataset says it instead.
func (idx *Index) graphOnly() bool {
	return idx.noDataset || (idx.c.Dim == 0 && idx.c.Rows.Load() > 0)
}

// refuseGraphOnly refuses, before any C call, what cuVS cannot do with an
// index that has no dataset.
func (idx *Index) refuseGraphOnly(op string) error {
	if !idx.graphOnly() {
		return nil
	}
	return kit.Argf(op, "index", "%w: %s", ErrNoDataset, noDatasetHelp)
}
