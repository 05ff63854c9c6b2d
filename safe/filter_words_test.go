package safe_test

import (
	"slices"
	"testing"

	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
)

// WordsToHost gives back a bitset's words exactly as uploaded, and
// refuses a bitmap, a destination of the wrong length and a nil Filter.
func TestFilterWordsToHost(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	words := []uint32{0xdeadbeef, 0x12345678, 0x7}
	f, err := safe.NewBitsetFilter(res, 67, words)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, f)
	got := make([]uint32, 3)
	if err := f.WordsToHost(res, got); err != nil || !slices.Equal(got, words) {
		t.Errorf("WordsToHost = %x, %v; want %x", got, err, words)
	}
	if err := f.WordsToHost(res, make([]uint32, 2)); !safetest.IsArg(err, "dst") {
		t.Errorf("2 words for 3: %v", err)
	}
	bm, err := safe.NewBitmapFilter(res, 2, 16, []uint32{1})
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, bm)
	if err := bm.WordsToHost(res, make([]uint32, 1)); !safetest.IsArg(err, "f") {
		t.Errorf("a bitmap: %v", err)
	}
	var nilF *safe.Filter
	if err := nilF.WordsToHost(res, got); !safetest.IsArg(err, "f") {
		t.Errorf("nil Filter: %v", err)
	}
}
