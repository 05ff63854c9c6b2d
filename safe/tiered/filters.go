package tiered

import (
	"math/bits"
	"weak"

	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
)

// derived is what one caller bitset (over Rows() ids, or nil: every id)
// and one deletion state let through, per tier, by storage position: the
// ANN rows' bits and the fresh rows' bits, a position allowed when the
// caller allows its row's id and the row is not deleted. The fresh tier's
// row j, which its brute-force search numbers j, is tested against its own
// bit j; cuVS's own tiered search hands one bitset to both tiers
// (cpp/src/neighbors/detail/tiered_index.cuh, index_state::search), which
// tests the fresh row j against bit j. It is made once per filter,
// deletion state and storage (Extend and compaction drop them; a Delete
// replaces them on their next use).
type derived struct {
	ann, fresh tierFilter
	dead       *deletions // the deletion state it was made for
	users      int        // searches using it (parts.mu)
	retired    bool       // no longer cached: freed when its last user is done
}

// tierFilter is one tier's share of a derived filter.
type tierFilter struct {
	f       *safe.Filter // the positions' bitset on the device (nil: see words and pass)
	words   []uint32     // the same on the host; nil when every position is allowed
	allowed int64        // positions allowed
	pass    bool         // the caller's filter is this tier's as it is (its ids are the positions)
}

// of returns the filter a search of the tier takes: nil when every
// position is allowed (or none: the tier is not searched).
func (t *tierFilter) of(caller *safe.Filter) *safe.Filter {
	if t.words == nil || t.allowed == 0 {
		return nil
	}
	if t.pass {
		return caller
	}
	return t.f
}

func (d *derived) close() {
	for _, f := range []*safe.Filter{d.ann.f, d.fresh.f} {
		if f != nil {
			_ = f.Close()
		}
	}
}

// retire uncaches d: freed now, or by its last user (s.mu held).
func (d *derived) retire() {
	d.retired = true
	if d.users == 0 {
		d.close()
	}
}

// dropFilters frees every derived filter (s.mu held; no search running,
// or the index freed).
func (s *parts) dropFilters() {
	for k, d := range s.filters {
		d.retire()
		delete(s.filters, k)
	}
	if s.noFilter != nil {
		s.noFilter.retire()
		s.noFilter = nil
	}
}

// derive returns what f (nil: no filter) and the deletion state dead let
// through in each tier, for the index's storage, making it on first use
// (the caller's words read once, kit's host copy of them, then at most two
// uploads). The index is held (a shared use); release ends the use.
func (idx *Index) derive(op string, res *safe.Resources, f *safe.Filter, dead *deletions) (*derived, error) {
	st := idx.st
	st.mu.Lock()
	defer st.mu.Unlock()
	var key weak.Pointer[safe.Filter]
	cached := st.noFilter
	if f != nil {
		key = weak.Make(f)
		cached = st.filters[key]
	}
	if cached != nil && cached.dead == dead {
		cached.users++
		return cached, nil
	}
	// forget the filters of bitsets that were collected
	for k, d := range st.filters {
		if k.Value() == nil {
			d.retire()
			delete(st.filters, k)
		}
	}
	var words []uint32
	if f != nil {
		var err error
		if words, err = kit.FilterHostWords(f, op, res); err != nil {
			return nil, err
		}
	}
	if err := idx.life.Keep(res, op); err != nil {
		return nil, err
	}
	stored, ann := idx.stored.Load(), idx.annRows.Load()
	// the caller's bits are the positions of a tier holding every row
	pass := f != nil && st.ids == nil && dead.count() == 0
	d := &derived{dead: dead, users: 1}
	for _, t := range []struct {
		tf       *tierFilter
		from, n  int64
		passThru bool
	}{{&d.ann, 0, ann, pass && ann == stored}, {&d.fresh, ann, stored - ann, pass && ann == 0}} {
		if t.n == 0 {
			continue
		}
		t.tf.words, t.tf.allowed = tierWords(words, dead, st.ids, t.from, t.n)
		t.tf.pass = t.passThru
		if t.tf.words != nil && t.tf.allowed > 0 && !t.tf.pass {
			var err error
			if t.tf.f, err = safe.NewBitsetFilter(res, int(t.n), t.tf.words); err != nil {
				d.close()
				return nil, err
			}
		}
	}
	if dead != st.dead.Load() {
		d.retired = true // a newer state is out: this one serves this search only
		return d, nil
	}
	if cached != nil {
		cached.retire()
	}
	if f == nil {
		st.noFilter = d
	} else {
		if st.filters == nil {
			st.filters = make(map[weak.Pointer[safe.Filter]]*derived)
		}
		st.filters[key] = d
	}
	return d, nil
}

// release ends a search's use of d.
func (idx *Index) release(d *derived) {
	st := idx.st
	st.mu.Lock()
	d.users--
	if d.retired && d.users == 0 {
		d.close()
	}
	st.mu.Unlock()
}

// tierWords returns the bits of the n positions from from on that words
// (the caller's bitset over ids; nil: every id) allows and dead does not
// delete, with their count; nil words when every position is allowed.
func tierWords(words []uint32, dead *deletions, ids []int64, from, n int64) ([]uint32, int64) {
	var w []uint32
	switch {
	case ids == nil:
		// positions are ids: whole words
		if words != nil {
			w = shiftWords(words, from, n)
		}
		if dead.count() > 0 {
			if w == nil {
				w = ones(n)
			}
			dw := shiftWords(dead.words, from, n)
			for i := range w {
				w[i] &^= dw[i]
			}
		}
	case words != nil || dead.count() > 0:
		w = make([]uint32, (n+31)/32)
		for j := range n {
			id := ids[from+j]
			if (words == nil || words[id/32]&(1<<(id%32)) != 0) && !dead.dead(from+j) {
				w[j/32] |= 1 << (j % 32)
			}
		}
	}
	if w == nil {
		return nil, n
	}
	allowed := popcount(w)
	if allowed == n {
		return nil, n
	}
	return w, allowed
}

// ones returns a bitset of n bits, all set.
func ones(n int64) []uint32 {
	w := make([]uint32, (n+31)/32)
	for i := range w {
		w[i] = ^uint32(0)
	}
	if tail := n % 32; tail != 0 {
		w[len(w)-1] = 1<<tail - 1
	}
	return w
}

// shiftWords returns the bits [from, from+n) of words as a bitset of n
// bits (its bits past n clear; bits past words clear).
func shiftWords(words []uint32, from, n int64) []uint32 {
	out := make([]uint32, (n+31)/32)
	sh := uint(from % 32)
	base := from / 32
	at := func(i int64) uint32 {
		if i < int64(len(words)) {
			return words[i]
		}
		return 0
	}
	for i := range out {
		w := at(base+int64(i)) >> sh
		if sh != 0 {
			w |= at(base+int64(i)+1) << (32 - sh)
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

// allows reports whether bit p of words is set (nil words: every bit).
func allows(words []uint32, p int64) bool {
	return words == nil || words[p/32]&(1<<(p%32)) != 0
}
