// Package toy is the API of a package under safe/ that check_test.go's
// tables are checked against.
package toy

import "io"

type Index struct{}

func Build(dataset []float32) (*Index, error)         { return nil, nil }
func Deserialize(path string) (*Index, error)         { return nil, nil }
func DeserializeFrom(r io.Reader) (*Index, error)     { return nil, nil }
func SearchSlice(idx *Index, queries []float32) error { return nil }
func (*Index) Search() error                          { return nil }
func (*Index) Serialize(path string) error            { return nil }
func (*Index) SerializeTo(w io.Writer) (int64, error) { return 0, nil }
func (*Index) Close() error                           { return nil }
func (*Index) Rows() int                              { return 0 }
func (*Index) unexported()                            {}

type Model struct{}

func Fit(data []float32) (*Model, error) { return nil, nil }
func (*Model) Transform() error          { return nil }

// Pairwise takes neither type: it needs a row of the package's functions.
func Pairwise(x, y []float32) error { return nil }
