// Package cagraref lets the packages built on a CAGRA index (safe/hnsw)
// use a *cagra.Index's C handle inside one of the index's shared uses,
// without package cagra exporting the handle. Package cagra sets Use in its
// init; nothing else may.
package cagraref

import (
	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/safe"
)

// Info is what the user of a CAGRA index may need to know of it.
type Info struct {
	Rows, Dim   int64
	Degree      int64
	DType       dlpack.DataType
	Metric      safe.Metric
	MetricKnown bool
	OnDisk      bool // an ACE build that left the index on disk
	GraphOnly   bool // deserialized without its dataset
	Device      dlpack.Device
}

// Use runs f with idx's handle (idx a *cagra.Index) inside a shared use of
// idx (Close waits for it; Extend waits or is waited for). A nil or closed
// index is refused with an error for op naming arg.
var Use func(idx any, op, arg string, f func(h generated.CuvsCagraIndex_t, info Info) error) error
