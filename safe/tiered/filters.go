package tiered

import (
	"math/bits"
	"weak"

	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
)

// derived is one caller bitset (over Rows() rows by id) split per tier,
// made once per filter and index state (Extend drops them): the ANN
// rows' bits (ids 0..annRows-1, the bitset's first words) and the fresh
// rows' bits shifted down by annRows, so that the fresh tier's row j,
// which its brute-force search numbers j, is tested against the caller's
// bit annRows+j. cuVS's own tiered search hands one bitset to both tiers
// (cpp/src/neighbors/detail/tiered_index.cuh, index_state::search), which
// tests the fresh row j against bit j.
type derived struct {
	ann, fresh               *safe.Filter // nil for an empty tier or one with no row allowed
	allowedANN, allowedFresh int64
}

func (d *derived) close() {
	if d.ann != nil {
		_ = d.ann.Close()
	}
	if d.fresh != nil {
		_ = d.fresh.Close()
	}
}

// dropFilters frees every derived filter (s.mu held).
func (s *parts) dropFilters() {
	for k, d := range s.filters {
		d.close()
		delete(s.filters, k)
	}
}

// derive returns f's per-tier filters for the index's current state,
// making them on first use (the caller's words read once, kit's host copy
// of them, then two uploads). The index is held (a shared use).
func (idx *Index) derive(op string, res *safe.Resources, f *safe.Filter) (*derived, error) {
	st := idx.st
	st.mu.Lock()
	defer st.mu.Unlock()
	key := weak.Make(f)
	if d, ok := st.filters[key]; ok {
		return d, nil
	}
	// forget the filters of bitsets that were collected
	for k, d := range st.filters {
		if k.Value() == nil {
			d.close()
			delete(st.filters, k)
		}
	}
	words, err := kit.FilterHostWords(f, op, res)
	if err != nil {
		return nil, err
	}
	if err := idx.life.Keep(res, op); err != nil {
		return nil, err
	}
	rows, ann := idx.rows.Load(), idx.annRows.Load()
	d := &derived{}
	if ann > 0 {
		w := shiftWords(words, 0, ann)
		if d.allowedANN = popcount(w); d.allowedANN > 0 && rows > ann {
			if d.ann, err = safe.NewBitsetFilter(res, int(ann), w); err != nil {
				return nil, err
			}
		}
	}
	if fr := rows - ann; fr > 0 {
		w := shiftWords(words, ann, fr)
		if d.allowedFresh = popcount(w); d.allowedFresh > 0 && ann > 0 {
			if d.fresh, err = safe.NewBitsetFilter(res, int(fr), w); err != nil {
				d.close()
				return nil, err
			}
		}
	}
	if st.filters == nil {
		st.filters = make(map[weak.Pointer[safe.Filter]]*derived)
	}
	st.filters[key] = d
	return d, nil
}

// shiftWords returns the bits [from, from+n) of words as a bitset of n
// bits (its bits past n clear).
func shiftWords(words []uint32, from, n int64) []uint32 {
	out := make([]uint32, (n+31)/32)
	sh := uint(from % 32)
	base := from / 32
	for i := range out {
		w := words[base+int64(i)] >> sh
		if sh != 0 && base+int64(i)+1 < int64(len(words)) {
			w |= words[base+int64(i)+1] << (32 - sh)
		}
		out[i] = w
	}
	if tail := n % 32; tail != 0 {
		out[len(out)-1] &= 1<<tail - 1
	}
	return out
}

func popcount(words []uint32) int64 {
	var n int
	for _, w := range words {
		n += bits.OnesCount32(w)
	}
	return int64(n)
}
