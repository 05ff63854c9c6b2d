package tiered

import (
	"slices"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
)

// deletions is one state of the deleted rows: a bit per stored row, by
// position (the ANN rows, then the fresh ones), set for a deleted row. A
// state is never changed once published (Delete publishes a new one), so
// a search that loaded it sees every deletion of a Delete call or none.
// Positions past its words are live (rows added since).
type deletions struct {
	words []uint32
	n     int64 // bits set: deleted rows still stored
}

func (d *deletions) dead(p int64) bool {
	return d != nil && p/32 < int64(len(d.words)) && d.words[p/32]&(1<<(p%32)) != 0
}

func (d *deletions) count() int64 {
	if d == nil {
		return 0
	}
	return d.n
}

// position returns the storage position of id (ids: the id of each stored
// row, ascending; nil when position and id agree), or -1 when id is not
// stored (a deleted row compacted away).
func position(ids []int64, stored, id int64) int64 {
	if ids == nil {
		if id < stored {
			return id
		}
		return -1
	}
	if p, ok := slices.BinarySearch(ids, id); ok {
		return int64(p)
	}
	return -1
}

// idAt returns the id of the stored row at position p.
func idAt(ids []int64, p int64) int64 {
	if ids == nil {
		return p
	}
	return ids[p]
}

// Delete deletes the rows of ids: no search returns them again (filtered
// or not, at any k, through every entry point), Live() counts them out,
// and their storage is freed by the next compaction (Compact, the ANN
// rebuild of an Extend, Merge, or a serialization, which writes live rows
// only). It returns how many of ids were live.
//
// Deleting a row already deleted is a no-op (not counted); an id that was
// never assigned (negative, or Rows() and up) is refused, naming it, and
// then nothing is deleted. The deletions of one call are seen together:
// a search sees all of them or none. Delete runs beside searches, Extend
// and Compact, never waiting for a search; one Delete at a time. Each
// call copies the index's deletion bitset (Stored()/8 bytes), so delete
// in batches rather than one id per call.
//
// No C call: the deletions are a bitset the package keeps, combined with
// the caller's filter in the next search of each filter (see Search).
func (idx *Index) Delete(ids []int64) (int, error) {
	const op = "tiered.Index.Delete"
	if idx == nil {
		return 0, kit.NilIndex(op)
	}
	if err := idx.life.Enter(op); err != nil {
		return 0, err
	}
	defer idx.life.Leave()
	idx.del.Lock()
	defer idx.del.Unlock()
	st := idx.st
	rows, stored := idx.rows.Load(), idx.stored.Load()
	for _, id := range ids {
		if id < 0 || id >= rows {
			return 0, kit.Argf(op, "ids", "id %d was never assigned (the index's ids are 0 to %d)", id, rows-1)
		}
	}
	cur := st.dead.Load()
	var words []uint32
	var n int64
	if cur != nil {
		n = cur.n
	}
	newly := 0
	for _, id := range ids {
		p := position(st.ids, stored, id)
		if p < 0 {
			continue // deleted and compacted away
		}
		if words == nil {
			words = make([]uint32, (stored+31)/32)
			if cur != nil {
				copy(words, cur.words)
			}
		}
		if words[p/32]&(1<<(p%32)) == 0 {
			words[p/32] |= 1 << (p % 32)
			n++
			newly++
		}
	}
	if newly > 0 {
		st.dead.Store(&deletions{words: words, n: n})
		idx.live.Add(-int64(newly))
	}
	return newly, nil
}

// Live returns the rows not deleted: what searches can return.
func (idx *Index) Live() int {
	if idx == nil || idx.life.Closed() {
		return 0
	}
	return int(idx.live.Load())
}

// Stored returns the rows the index holds in device memory: the live ones
// and the deleted ones not yet compacted away. Stored() - Live() rows
// would be freed by Compact.
func (idx *Index) Stored() int {
	if idx == nil || idx.life.Closed() {
		return 0
	}
	return int(idx.stored.Load())
}

// Compact frees the storage of the deleted rows: it gathers the live rows
// and builds the index over them again as Build does (an ANN index over
// every live row when there are more than MinANNRows of them, otherwise
// every row in the fresh tier). Ids do not change: a row keeps the id it
// was given, whatever its position in storage. With no deleted row
// stored, it does nothing.
//
// Searches and Deletes go on while it gathers and builds; it takes the
// index alone only to swap the new storage in (as Extend does), and waits
// for an Extend in flight. A row deleted during the build stays deleted.
// If the build fails the index is left as it was.
//
// C calls: cuvsMatrixCopy (or the rows' copy to the host and back when
// the live rows lie in many runs), then those of Build.
func (idx *Index) Compact(res *safe.Resources) error {
	const op = "tiered.Index.Compact"
	if idx == nil {
		return kit.NilIndex(op)
	}
	if err := idx.life.Built(op); err != nil {
		return err
	}
	if err := kit.CheckIndexDevice(res, op, idx.dev); err != nil {
		return err
	}
	idx.grow.Lock()
	defer idx.grow.Unlock()
	if err := idx.life.Enter(op); err != nil {
		return err
	}
	lay, snap, err := idx.liveLayout(op, res)
	idx.life.Leave()
	if err != nil || snap == nil {
		return err
	}
	err = idx.life.Exclusive(op, func() error {
		if err := idx.life.Keep(res, op); err != nil {
			return err
		}
		idx.install(&lay, snap)
		return nil
	})
	if err != nil {
		lay.free()
	}
	return err
}

// span is a run of stored positions.
type span struct{ from, n int64 }

// liveSpans returns the runs of live positions among the first stored
// ones, and their rows.
func liveSpans(d *deletions, stored int64) ([]span, int64) {
	var out []span
	var live int64
	for p := int64(0); p < stored; {
		if d.dead(p) {
			p++
			continue
		}
		q := p
		for q < stored && !d.dead(q) {
			q++
		}
		out = append(out, span{p, q - p})
		live += q - p
		p = q
	}
	return out, live
}

// maxDeviceSpans: gathering more runs than this goes through the host
// (each device copy is a call and a wait).
const maxDeviceSpans = 64

// liveLayout gathers the live rows of the current deletion state (nil
// when none is deleted: then nothing is made) and builds a layout of them
// with their ids. The index is held (shared, or alone), Extends excluded.
func (idx *Index) liveLayout(op string, res *safe.Resources) (layout, *deletions, error) {
	snap := idx.st.dead.Load()
	if snap.count() == 0 {
		return layout{}, nil, nil
	}
	stored := idx.stored.Load()
	spans, live := liveSpans(snap, stored)
	ids := make([]int64, 0, live)
	for _, s := range spans {
		for p := s.from; p < s.from+s.n; p++ {
			ids = append(ids, idAt(idx.st.ids, p))
		}
	}
	if live == 0 {
		return layout{ids: ids}, snap, nil
	}
	if err := idx.p.checkANNRows(op, "index", live); err != nil {
		return layout{}, nil, err
	}
	data, err := idx.gatherSpans(res, spans, live)
	if err != nil {
		return layout{}, nil, kit.Wrap(op, err)
	}
	lay, err := makeLayout(op, res, &idx.p, data, live)
	if err != nil {
		return layout{}, nil, err
	}
	lay.ids = ids
	return lay, snap, nil
}

// gatherSpans copies the rows of spans (stored positions) into a new
// device matrix of n rows.
func (idx *Index) gatherSpans(res *safe.Resources, spans []span, n int64) (*safe.DeviceMatrix[float32], error) {
	all, err := safe.NewDeviceMatrix[float32](res, int(n), int(idx.dim))
	if err != nil {
		return nil, err
	}
	if err := idx.copySpans(res, spans, n, all, 0); err != nil {
		_ = all.Close()
		return nil, err
	}
	return all, nil
}

// copySpans copies the n rows of spans (stored positions) into dst from
// row at on: a device copy per run, or through the host past
// maxDeviceSpans runs.
func (idx *Index) copySpans(res *safe.Resources, spans []span, n int64, dst *safe.DeviceMatrix[float32], at int64) error {
	if len(spans) > maxDeviceSpans {
		host, err := idx.hostRows(res, idx.stored.Load())
		if err != nil {
			return err
		}
		packed := host[:0]
		for _, s := range spans {
			packed = append(packed, host[s.from*idx.dim:(s.from+s.n)*idx.dim]...)
		}
		hm, err := dlpack.NewHostMatrix(packed, int(n), int(idx.dim))
		if err != nil {
			return err
		}
		hv, _ := hm.View()
		return copyRows(res, &hv, dst, at)
	}
	st := idx.st
	ann := idx.annRows.Load()
	for _, s := range spans {
		// a run may cross from the ANN rows into the fresh ones
		for from, end := s.from, s.from+s.n; from < end; {
			m, off, stop := st.annData, from, min(end, ann)
			if from >= ann {
				m, off, stop = st.fresh, from-ann, end
			}
			v, err := m.RowsView(int(off), int(off+stop-from))
			if err == nil {
				err = copyRows(res, &v, dst, at)
			}
			if err != nil {
				return err
			}
			at += stop - from
			from = stop
		}
	}
	return nil
}

// hostRows copies the first stored rows (by position) to a new host slice.
func (idx *Index) hostRows(res *safe.Resources, stored int64) ([]float32, error) {
	st := idx.st
	ann := idx.annRows.Load()
	host := make([]float32, stored*idx.dim)
	if ann > 0 {
		if err := st.annData.CopyToHost(res, host[:ann*idx.dim]); err != nil {
			return nil, err
		}
	}
	if fr := stored - ann; fr > 0 {
		v, err := st.fresh.RowsView(0, int(fr))
		if err != nil {
			return nil, err
		}
		hm, err := dlpack.NewHostMatrix(host[ann*idx.dim:], int(fr), int(idx.dim))
		if err != nil {
			return nil, err
		}
		hv, _ := hm.ViewMut()
		if err := safe.Copy(res, &v, &hv); err != nil {
			return nil, err
		}
	}
	return host, nil
}

// remap returns the deletion state of a compacted layout whose rows are
// ids: the rows of ids deleted in cur (a state over the old positions
// old) since the layout was gathered.
func remap(cur *deletions, old []int64, oldStored int64, ids []int64) *deletions {
	if cur.count() == 0 {
		return nil
	}
	var out *deletions
	for j, id := range ids {
		if p := position(old, oldStored, id); p >= 0 && cur.dead(p) {
			if out == nil {
				out = &deletions{words: make([]uint32, (len(ids)+31)/32)}
			}
			out.words[j/32] |= 1 << (j % 32)
			out.n++
		}
	}
	return out
}

// ascending reports whether ids ascend strictly, each in [0, n).
func ascending(ids []int64, n int64) bool {
	for i, id := range ids {
		if id < 0 || id >= n || (i > 0 && id <= ids[i-1]) {
			return false
		}
	}
	return true
}
