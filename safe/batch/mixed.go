package batch

import (
	"errors"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
)

// Mixed batches: brute force searches the requests of different filters in
// one search, with a bitmap (cuVS's BITMAP filter: a row of bits per query)
// assembled from the requests' bitsets, instead of one search per filter.
// On the real H200 (BENCHMARKS.md, "Many tenants through one Batcher"; 100k
// × 128, 50% allowed) one bitmap search of 256 queries took 474-478 µs and
// 256 one-query bitset searches on 16 streams 10.9-11.0 ms; a brute-force
// search's cost hardly depends on its batch size (the cost table of
// cagra's filter policy: 100k rows, 433-779 µs from 16 to 256 queries), so
// a batch of g filters costs about g searches grouped and one mixed.

// bitmapper is what a Searcher implements whose index takes a bitmap
// filter in a batch search (the BruteForce adapter made without a filter).
type bitmapper interface {
	// bitmapRows is the index's row count, or 0 when it takes no bitmap.
	bitmapRows() int64
}

func (a *adapter) bitmapRows() int64 {
	if !a.bitmap {
		return 0
	}
	return int64(a.rows())
}

// maxBitmapBytes bounds a slot's bitmap (its device words and its pinned
// staging, each): a mixed batch holds at most maxBitmapBytes*8/rows query
// rows (MaxBatch when fewer), and an index of more than maxBitmapBytes*4
// rows (2 query rows) is never searched mixed.
const maxBitmapBytes = 32 << 20

// mixedMax returns the most query rows a mixed batch may hold over rows
// rows, or 0 when mixed batches are off.
func mixedMax(rows int64, maxBatch int) int {
	if rows < 1 {
		return 0
	}
	n := min(int64(maxBatch), maxBitmapBytes*8/rows)
	if n < 2 {
		return 0
	}
	return int(n)
}

// bitmapBufs is a slot's bitmap, allocated on its first mixed batch: the
// filter (its device words) and the pinned staging it is assembled in.
type bitmapBufs struct {
	filter   *safe.Filter
	dev      *safe.DeviceVector[uint32]
	pin      *safe.PinnedMatrix[uint32] // words × 1
	perQuery []int64
	views    []*bitmapViews // by query rows, made on first use
}

// bitmapViews are the views of the words a batch of n query rows uses.
type bitmapViews struct {
	pin dlpack.View
	dev dlpack.ViewMut
}

func newBitmapBufs(res *safe.Resources, maxRows int, rows int64) (bm *bitmapBufs, err error) {
	bm = &bitmapBufs{perQuery: make([]int64, maxRows), views: make([]*bitmapViews, maxRows+1)}
	if bm.filter, bm.dev, err = kit.NewBatchBitmap(res, int64(maxRows), rows); err != nil {
		return nil, err
	}
	if bm.pin, err = safe.NewPinnedMatrix[uint32](bm.dev.Len(), 1); err != nil {
		return nil, errors.Join(err, bm.filter.Close())
	}
	return bm, nil
}

func (bm *bitmapBufs) close() error {
	return errors.Join(bm.filter.Close(), bm.pin.Close())
}

// wordsFor returns the words of n query rows of rows bits.
func wordsFor(n int, rows int64) int { return int((int64(n)*rows + 31) / 32) }

// viewsFor returns the views of the words of n query rows, made on first
// use.
func (bm *bitmapBufs) viewsFor(n int, rows int64) (*bitmapViews, error) {
	if v := bm.views[n]; v != nil {
		return v, nil
	}
	w := wordsFor(n, rows)
	pin, err := firstRows(bm.pin, w)
	if err != nil {
		return nil, err
	}
	whole, err := bm.dev.ViewMut()
	if err != nil {
		return nil, err
	}
	p, err := whole.Data()
	if err != nil {
		return nil, err
	}
	dev, err := dlpack.FromRawPartsMut(p, whole.Device(), []int64{int64(w), 1}, nil, whole.DType())
	if err != nil {
		return nil, err
	}
	v := &bitmapViews{pin: pin, dev: dev.WithOwner(bm.dev.Owner())}
	bm.views[n] = v
	return v, nil
}

// assemble writes the bitmap of the slot's batch (n query rows, rows index
// rows) into the pinned staging: each request's rows get its filter's
// bitset (all rows for a request without one), and the per-query counts.
func (s *slot[T, N]) assemble(op string, n int, rows int64) error {
	bm := s.bitmap
	words := bm.pin.Data()[:wordsFor(n, rows)]
	clear(words)
	q := 0
	for _, r := range s.reqs {
		var set []uint32
		allowed := rows
		if r.filter != nil {
			var err error
			if set, err = kit.FilterHostWords(r.filter, op, s.res); err != nil {
				return err
			}
			allowed = int64(r.filter.Allowed())
		}
		for range r.rows {
			if set == nil {
				orOnes(words, int64(q)*rows, rows)
			} else {
				orBits(words, int64(q)*rows, set, rows)
			}
			bm.perQuery[q] = allowed
			q++
		}
	}
	kit.SetBatchQueries(bm.filter, bm.perQuery[:n])
	return nil
}

// orBits ORs the first n bits of set (a bitset: its bits from n on are
// zero) into dst from bit off.
func orBits(dst []uint32, off int64, set []uint32, n int64) {
	w, sh := off/32, uint(off%32)
	set = set[:(n+31)/32]
	if sh == 0 {
		for i, x := range set {
			dst[w+int64(i)] |= x
		}
		return
	}
	for i, x := range set {
		j := w + int64(i)
		dst[j] |= x << sh
		if hi := x >> (32 - sh); hi != 0 {
			dst[j+1] |= hi
		}
	}
}

// orOnes sets bits [off, off+n) of dst.
func orOnes(dst []uint32, off, n int64) {
	end := off + n
	for off < end && off%32 != 0 {
		dst[off/32] |= 1 << (off % 32)
		off++
	}
	for ; off+32 <= end; off += 32 {
		dst[off/32] = ^uint32(0)
	}
	for ; off < end; off++ {
		dst[off/32] |= 1 << (off % 32)
	}
}

// searchMixed assembles the batch's bitmap, copies it to the device on
// the slot's stream and searches the batch with it (search, the
// Searcher's filtered search).
func (s *slot[T, N]) searchMixed(search searchFunc, n int, rows int64) error {
	const op = "batch.Batcher.Search"
	if s.bitmap == nil {
		bm, err := newBitmapBufs(s.res, s.mixedRows, rows)
		if err != nil {
			return kit.Wrap(op, err)
		}
		s.bitmap = bm
	}
	if err := s.assemble(op, n, rows); err != nil {
		return kit.Wrap(op, err)
	}
	v, err := s.bitmap.viewsFor(n, rows)
	if err != nil {
		return kit.Wrap(op, err)
	}
	if err := s.copy(op, &v.pin, &v.dev, nil, nil); err != nil {
		return errors.Join(err, s.wait())
	}
	return s.search(search, n, s.bitmap.filter)
}

// releaseMixed ends the holds take took on a mixed batch's filters.
func (s *slot[T, N]) releaseMixed() {
	for _, r := range s.reqs {
		if r.filter != nil {
			kit.ReleaseFilter(r.filter)
		}
	}
	s.mixed = false
}
