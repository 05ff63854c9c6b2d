package safe

import (
	"fmt"
	"math"
	"math/bits"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/generated"
)

// FilterKind says how a Filter selects rows.
type FilterKind int

// Filter kinds.
const (
	// Bitset: one bit per index row, the same for every query.
	Bitset FilterKind = iota + 1
	// Bitmap: one bit per (query, index row) pair.
	Bitmap
)

// String returns "bitset" or "bitmap".
func (k FilterKind) String() string {
	if k == Bitmap {
		return "bitmap"
	}
	return "bitset"
}

// Filter restricts a search to some rows of an index. It lives in device
// memory, is uploaded once, and can be reused by any number of searches
// (also concurrently) until Close.
//
// A bitset holds ceil(rows/32) 32-bit words for the index's row count,
// whatever the largest allowed id: bit i of word i/32 set means row i may be
// returned. A bitmap is one flat bitset of queries×rows bits: bit q*rows+i
// set means query q may return row i.
//
// A filter knows how many rows it lets through (Allowed): brute force
// refuses a search whose k is larger, since cuVS then returns garbage.
// A bitset that a search filters on the host (cagra's post-filter path)
// keeps a host copy of its words, Rows()/8 bytes, from that search on.
type Filter struct {
	kind     FilterKind
	rows     int64   // index rows the filter is for
	queries  int64   // for a bitmap
	allowed  int64   // bitset: rows let through; bitmap: the fewest any query sees
	perQuery []int64 // bitmap: rows each query sees
	words    *DeviceVector[uint32]

	holds atomic.Int64 // requests queued or searching with it (hold), and closedHold once closed

	hostMu sync.Mutex               // held while the host copy is made
	host   atomic.Pointer[[]uint32] // a bitset's words on the host, copied on first use (hostWords)
}

// wordsFor returns the number of 32-bit words a bitset for rows rows holds.
func wordsFor(rows int64) int64 { return (rows + 31) / 32 }

// NewBitsetFilter uploads a bitset for an index of n rows; words must
// hold exactly (n+31)/32 words, and bits past row n-1 must be zero.
func NewBitsetFilter(res *Resources, n int, words []uint32) (*Filter, error) {
	const op = "safe.NewBitsetFilter"
	rows := int64(n)
	if err := checkWords(op, rows, 1, words); err != nil {
		return nil, err
	}
	return uploadFilter(op, res, Bitset, rows, 0, words)
}

// NewBitsetFilterAllowing builds and uploads a bitset for an index of n
// rows that lets exactly the ids in allowed through.
func NewBitsetFilterAllowing(res *Resources, n int, allowed []int64) (*Filter, error) {
	const op = "safe.NewBitsetFilterAllowing"
	rows := int64(n)
	if rows < 1 {
		return nil, argf(op, "rows", "%d, want at least 1", rows)
	}
	words := make([]uint32, wordsFor(rows))
	for _, id := range allowed {
		if id < 0 || id >= rows {
			return nil, argf(op, "allowed", "id %d is not a row of an index of %d rows", id, rows)
		}
		words[id/32] |= 1 << (id % 32)
	}
	return uploadFilter(op, res, Bitset, rows, 0, words)
}

// NewBitmapFilter uploads a bitmap for nQueries queries over an index of n
// rows: (nQueries*n+31)/32 words, bit q*n+i for query q and row i
// (brute force only).
func NewBitmapFilter(res *Resources, nQueries, n int, words []uint32) (*Filter, error) {
	const op = "safe.NewBitmapFilter"
	queries, rows := int64(nQueries), int64(n)
	if queries < 1 {
		return nil, argf(op, "queries", "%d, want at least 1", queries)
	}
	if rows < 1 {
		return nil, argf(op, "rows", "%d, want at least 1", rows)
	}
	if rows > math.MaxInt64/queries {
		return nil, argf(op, "queries", "%d×%d bits overflow", queries, rows)
	}
	if err := checkWords(op, queries*rows, 1, words); err != nil {
		return nil, err
	}
	return uploadFilter(op, res, Bitmap, rows, queries, words)
}

func checkWords(op string, rows, sets int64, words []uint32) error {
	if rows < 1 {
		return argf(op, "rows", "%d, want at least 1", rows)
	}
	if want := sets * wordsFor(rows); int64(len(words)) != want {
		return argf(op, "words", "%d words, want %d for %d rows", len(words), want, rows)
	}
	if tail := rows % 32; tail != 0 {
		for s := int64(0); s < sets; s++ {
			if w := words[(s+1)*wordsFor(rows)-1]; w>>tail != 0 {
				return argf(op, "words", "bits set past row %d", rows-1)
			}
		}
	}
	return nil
}

func uploadFilter(op string, res *Resources, kind FilterKind, rows, queries int64, words []uint32) (*Filter, error) {
	if err := res.open(op); err != nil {
		return nil, err
	}
	f := &Filter{kind: kind, rows: rows, queries: queries}
	if kind == Bitmap {
		f.perQuery = make([]int64, queries)
		for q := range f.perQuery {
			n := countBits(words, int64(q)*rows, int64(q+1)*rows)
			f.perQuery[q] = n
			if q == 0 || n < f.allowed {
				f.allowed = n
			}
		}
	} else {
		f.allowed = countBits(words, 0, rows)
	}
	v, err := DeviceVectorFrom(res, words)
	if err != nil {
		return nil, err
	}
	v.Owner().SetLabel(kind.String() + " filter")
	f.words = v
	return f, nil
}

// countBits counts the bits set in words from bit lo up to bit hi.
func countBits(words []uint32, lo, hi int64) int64 {
	var n int
	for lo < hi {
		w := words[lo/32] >> (lo % 32)
		take := 32 - lo%32
		if hi-lo < take {
			take = hi - lo
			w &= 1<<take - 1
		}
		n += bits.OnesCount32(w)
		lo += take
	}
	return int64(n)
}

// Kind returns the filter's kind.
func (f *Filter) Kind() FilterKind {
	if f == nil {
		return 0
	}
	return f.kind
}

// Rows returns the index row count the filter is for.
func (f *Filter) Rows() int {
	if f == nil {
		return 0
	}
	return int(f.rows)
}

// Queries returns the number of queries a bitmap is for (0 for a bitset).
func (f *Filter) Queries() int {
	if f == nil {
		return 0
	}
	return int(f.queries)
}

// Allowed returns how many rows the filter lets through: for a bitset, the
// bits set; for a bitmap, the fewest any one query may return (see
// AllowedFor). A search for more neighbors than that cannot be filled.
func (f *Filter) Allowed() int {
	if f == nil {
		return 0
	}
	return int(f.allowed)
}

// AllowedFor returns how many rows query q may return: the bitset's count
// for every q; for a bitmap, query q's (0 for a q out of range).
func (f *Filter) AllowedFor(q int) int {
	if f == nil {
		return 0
	}
	if f.kind != Bitmap {
		return int(f.allowed)
	}
	if q < 0 || q >= len(f.perQuery) {
		return 0
	}
	return int(f.perQuery[q])
}

// WordsToHost copies a bitset's words (Rows()+31)/32 of them) into dst
// and waits for the copy (cuvsMatrixCopy, cuvsStreamSync).
func (f *Filter) WordsToHost(res *Resources, dst []uint32) error {
	const op = "safe.Filter.WordsToHost"
	if f == nil || f.words == nil {
		return argf(op, "f", "a zero or nil Filter")
	}
	if f.kind != Bitset {
		return argf(op, "f", "a %s: only a bitset's words are per row", f.kind)
	}
	if int64(len(dst)) != wordsFor(f.rows) {
		return argf(op, "dst", "%d words, the bitset has %d", len(dst), wordsFor(f.rows))
	}
	return f.words.CopyToHost(res, dst)
}

// hostWords returns a bitset's words in host memory, read-only: copied
// from the device (cuvsMatrixCopy, cuvsStreamSync) on the first call and
// kept with the filter, whose words never change. For searches that
// filter candidates on the host (cagra's post-filter path).
func (f *Filter) hostWords(op string, res *Resources) ([]uint32, error) {
	if f == nil || f.words == nil {
		return nil, argf(op, "filter", "a zero or nil Filter")
	}
	if f.kind != Bitset {
		return nil, argf(op, "filter", "a %s: only a bitset's words are per row", f.kind)
	}
	if h := f.host.Load(); h != nil {
		return *h, nil
	}
	f.hostMu.Lock()
	defer f.hostMu.Unlock()
	if h := f.host.Load(); h != nil {
		return *h, nil
	}
	host := make([]uint32, wordsFor(f.rows))
	if err := f.words.CopyToHost(res, host); err != nil {
		return nil, err
	}
	f.host.Store(&host)
	return host, nil
}

// Close frees the filter's device memory; it refuses while a search uses
// it, or a batch.Batcher's requests with it wait or search (a
// *dlpack.BorrowedError, matching dlpack.ErrBorrowed).
func (f *Filter) Close() error {
	if f == nil || f.words == nil {
		return nil
	}
	if !f.holds.CompareAndSwap(0, closedHold) {
		if n := f.holds.Load(); n&closedHold == 0 {
			return fmt.Errorf("safe.Filter.Close: %w", &dlpack.BorrowedError{Owner: "safe.Filter", Op: "close", By: []string{fmt.Sprintf("%d batched requests", n)}})
		}
	}
	if err := f.words.Close(); err != nil {
		f.holds.CompareAndSwap(closedHold, 0) // still open
		return err
	}
	return nil
}

// bind checks f (not nil) against an index of rows rows searched with
// nQueries queries, binds its memory to call c and returns the C filter
// (through kit.BindFilter, which checks the kind first).
func (f *Filter) bind(op string, c dlpack.Call, rows, nQueries int64) (generated.CuvsFilter, error) {
	if f.rows != rows {
		return generated.CuvsFilter{}, argf(op, "filter", "made for %d rows, the index has %d", f.rows, rows)
	}
	if f.kind == Bitmap && f.queries != nQueries {
		return generated.CuvsFilter{}, argf(op, "filter", "bitmap for %d queries, got %d", f.queries, nQueries)
	}
	v, err := f.words.View()
	if err != nil {
		return generated.CuvsFilter{}, argf(op, "filter", "%w", err)
	}
	t, err := c.In(&v)
	if err != nil {
		return generated.CuvsFilter{}, argf(op, "filter", "%w", err)
	}
	typ := generated.CuvsFilterType_BITSET
	if f.kind == Bitmap {
		typ = generated.CuvsFilterType_BITMAP
	}
	return generated.CuvsFilter{Addr: uintptr(unsafe.Pointer(t)), Type: typ}, nil
}
