package bruteforce_test

import (
	"io"
	"testing"

	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/bruteforce"
	"github.com/cuvs-go/cuvs/safe/internal/serialtest"
)

// FuzzDeserializeFrom reads damaged and mutated streams of a small index
// (serialtest.Fuzz): never a panic or a hang; a searchable index, or
// safe.ErrCorruptIndex. Its corpus is kept in testdata/fuzz.
func FuzzDeserializeFrom(f *testing.F) {
	res := serialtest.Resources(f)
	data := serialtest.Data(f, res)
	idx, err := bruteforce.Build(res, data, nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { idx.Close() })
	valid := serialtest.Stream(f, func(w io.Writer) (int64, error) { return idx.SerializeTo(res, w) })
	serialtest.Fuzz(f, "bruteforce.DeserializeFrom", valid, func(r io.Reader, o ...safe.DeserializeOption) (*bruteforce.Index, error) {
		return bruteforce.DeserializeFrom(res, r, o...)
	}, func(idx *bruteforce.Index) error {
		q := serialtest.Query(idx.DType(), idx.Dim(), idx.Rows())
		if q == nil {
			return nil
		}
		_, err := bruteforce.SearchSlice(res, idx, q, 1, nil)
		return err
	})
}
