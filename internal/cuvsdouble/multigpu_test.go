package cuvsdouble_test

import (
	"encoding/binary"
	"math/rand"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/cuvs-go/cuvs/internal/cuvsdouble"
	"github.com/cuvs-go/cuvs/internal/cuvsdouble/internal/capi"
)

// mgFixture is a fixture of the given release with `devices` fake devices
// and one multi-GPU resources handle over them.
type mgFixture struct {
	*fixture
	mg      capi.Res
	release string
}

func newMgFixture(t *testing.T, release string, devices int) *mgFixture {
	t.Helper()
	f := newFixture(t, cuvsdouble.Release(release))
	f.ctl.SetDeviceCount(devices)
	m := &mgFixture{fixture: f, release: release}
	m.mg = f.must1(f.lib.ResourcesCreate(true))
	return m
}

func (m *mgFixture) close() {
	m.t.Helper()
	m.must(m.lib.ResourcesDestroy(m.mg, true))
	m.fixture.close()
}

// handle creates a cuvsMultiGpu<algo><kind> (kind "Index", "IndexParams",
// "SearchParams") and returns it with its destroyer.
func (m *mgFixture) handle(algo, kind string) (unsafe.Pointer, func()) {
	m.t.Helper()
	p, err := m.lib.ParamsCreate("MultiGpu" + algo + kind)
	m.must(err)
	return p, func() { m.must(m.lib.ParamsDestroy("MultiGpu"+algo+kind, p)) }
}

// search returns the k nearest ids of every query.
func (m *mgFixture) search(algo string, x unsafe.Pointer, queries []float32, dim, k int) []int64 {
	m.t.Helper()
	sp, done := m.handle(algo, "SearchParams")
	defer done()
	nq := len(queries) / dim
	q := m.f32(capi.CPU, capi.CPU, nq, dim, queries)
	nb := m.zeros(capi.CPU, capi.CPU, capi.Int, 64, nq, k)
	d := m.zeros(capi.CPU, capi.CPU, capi.Float, 32, nq, k)
	defer m.drop(q)
	defer m.drop(nb)
	defer m.drop(d)
	m.must(m.lib.MgSearch(algo, m.mg, sp, x, q.t, nb.t, d.t))
	return capi.CopyOut[int64](nb.b.p, nq*k)
}

// ids puts int64 (IVF) or uint32 (CAGRA) ids into a host tensor.
func (m *mgFixture) ids(algo string, first, n int) matrix {
	m.t.Helper()
	if algo == "Cagra" {
		v := make([]uint32, n)
		for i := range v {
			v[i] = uint32(first + i)
		}
		b := m.alloc(capi.CPU, 4*n)
		capi.CopyIn(b.p, v)
		return matrix{b, capi.NewTensor(b.p, capi.CPU, capi.UInt, 32, int64(n)), n, 1}
	}
	v := make([]int64, n)
	for i := range v {
		v[i] = int64(first + i)
	}
	b := m.alloc(capi.CPU, 8*n)
	capi.CopyIn(b.p, v)
	return matrix{b, capi.NewTensor(b.p, capi.CPU, capi.Int, 64, int64(n)), n, 1}
}

var npyShape = regexp.MustCompile(`'shape': \(([0-9]*),?\)`)

// npyItem reads the .npy item at b[off:]: its value (a scalar) or length
// (a 1-D array), and where the next item starts.
func npyItem(t *testing.T, b []byte, off int) (val uint64, next int) {
	t.Helper()
	if off+10 > len(b) || string(b[off+1:off+6]) != "NUMPY" {
		t.Fatalf("no .npy item at %d", off)
	}
	hlen := int(binary.LittleEndian.Uint16(b[off+8:]))
	hdr := string(b[off+10 : off+10+hlen])
	data := off + 10 + hlen
	sh := npyShape.FindStringSubmatch(hdr)
	if sh == nil {
		t.Fatalf("no shape in %q", hdr)
	}
	if sh[1] != "" { // '|u1' bytes
		n, _ := strconv.Atoi(sh[1])
		return uint64(n), data + n
	}
	size := int(hdr[strings.Index(hdr, "'descr': '")+12] - '0')
	switch size {
	case 1:
		val = uint64(b[data])
	case 4:
		val = uint64(binary.LittleEndian.Uint32(b[data:]))
	case 8:
		val = binary.LittleEndian.Uint64(b[data:])
	}
	return val, data + size
}

// mgCagraRank is what a multi-GPU CAGRA file's rank header says.
type mgCagraRank struct {
	kind, rows, dim, degree uint64
}

// cagraRanks serializes a multi-GPU CAGRA index and reads its ranks'
// headers (kind 0 on 26.06, whose header has none).
func (m *mgFixture) cagraRanks(x unsafe.Pointer) []mgCagraRank {
	m.t.Helper()
	path := filepath.Join(m.t.TempDir(), "mg_cagra.bin")
	m.must(m.lib.MgFile("Cagra", "Serialize", m.mg, x, path))
	b, err := os.ReadFile(path)
	m.must(err)
	t := m.t.(*testing.T)
	_, off := npyItem(t, b, 4)
	n, off := npyItem(t, b, off)
	var out []mgCagraRank
	for r := 0; r < int(n); r++ {
		var rk mgCagraRank
		_, off = npyItem(t, b, off+4) // version
		if m.release != cuvsdouble.Release2606 {
			rk.kind, off = npyItem(t, b, off)
		}
		rk.rows, off = npyItem(t, b, off)
		rk.dim, off = npyItem(t, b, off)
		rk.degree, off = npyItem(t, b, off)
		_, off = npyItem(t, b, off) // metric
		_, off = npyItem(t, b, off) // payload
		out = append(out, rk)
	}
	if off != len(b) {
		m.t.Fatalf("%d trailing bytes", len(b)-off)
	}
	return out
}

// TestMultiGpuIvfExtendWithoutIds: ivf_flat::extend and ivf_pq::extend
// refuse NULL ids on a non-empty index, inside snmg's OpenMP loop (the real
// process aborts: measured on 26.08.01); an empty rank takes them.
func TestMultiGpuIvfExtendWithoutIds(t *testing.T) {
	for _, rel := range cuvsdouble.Releases() {
		for _, algo := range []string{"IvfFlat", "IvfPq"} {
			t.Run(rel+"/"+algo, func(t *testing.T) {
				m := newMgFixture(t, rel, 2)
				defer m.close()
				rng := rand.New(rand.NewSource(1))
				const dim = 4
				data := randomMatrix(rng, 64, dim)
				add := randomMatrix(rng, 8, dim)
				for _, filled := range []bool{true, false} {
					for _, mode := range []int{capi.MgSharded, capi.MgReplicated} {
						p, doneP := m.handle(algo, "IndexParams")
						capi.SetMgMode(p, mode)
						capi.SetMgIvfLists(p, 2, filled)
						x, doneX := m.handle(algo, "Index")
						ds := m.f32(capi.CPU, capi.CPU, 64, dim, data)
						m.must(m.lib.MgBuild(algo, m.mg, p, ds.t, x))
						v := m.f32(capi.CPU, capi.CPU, 8, dim, add)
						err := m.lib.MgExtend(algo, m.mg, x, v.t, nil)
						if filled {
							if err == nil || !strings.Contains(err.Error(), "You must pass data indices when the index is non-empty.") {
								t.Fatalf("mode %d: extend without ids of a non-empty index: %v", mode, err)
							}
							// the first rank's throw ends the real process
							m.expectViolations("without new_indices on rank 0")
							// with ids it works, and the rows are found
							ix := m.ids(algo, 64, 8)
							m.must(m.lib.MgExtend(algo, m.mg, x, v.t, ix.t))
							m.drop(ix)
						} else {
							m.must(err) // empty ranks: numbered from 0
						}
						got := m.search(algo, x, add[:dim], dim, 1)
						if filled && got[0] != 64 {
							t.Errorf("mode %d: the first added row is found as %d, want 64", mode, got[0])
						}
						m.drop(v)
						m.drop(ds)
						doneX()
						doneP()
					}
				}
			})
		}
	}
}

// TestMultiGpuCagraExtend: 26.06's iface extend RAFT_FAILs for every CAGRA
// index, 26.08's for a device_padded one (rows of a multiple of 16 bytes),
// both inside snmg's OpenMP loop (the process aborts: measured); 26.08's
// device_standard index does nothing and succeeds.
func TestMultiGpuCagraExtend(t *testing.T) {
	for _, rel := range cuvsdouble.Releases() {
		for _, dim := range []int{4, 3} { // 16-byte rows: padded; 12: standard
			t.Run(rel+"/dim"+strconv.Itoa(dim), func(t *testing.T) {
				m := newMgFixture(t, rel, 2)
				defer m.close()
				rng := rand.New(rand.NewSource(2))
				data := randomMatrix(rng, 64, dim)
				add := randomMatrix(rng, 4, dim)
				p, doneP := m.handle("Cagra", "IndexParams")
				defer doneP()
				capi.SetMgMode(p, capi.MgSharded)
				x, doneX := m.handle("Cagra", "Index")
				defer doneX()
				ds := m.f32(capi.CPU, capi.CPU, 64, dim, data)
				defer m.drop(ds)
				m.must(m.lib.MgBuild("Cagra", m.mg, p, ds.t, x))
				v := m.f32(capi.CPU, capi.CPU, 4, dim, add)
				defer m.drop(v)
				ix := m.ids("Cagra", 64, 4)
				defer m.drop(ix)
				standard := rel != cuvsdouble.Release2606 && dim == 3
				check := func(what string) {
					t.Helper()
					for _, ids := range []*capi.Tensor{ix.t, nil} {
						err := m.lib.MgExtend("Cagra", m.mg, x, v.t, ids)
						if standard {
							if err != nil {
								t.Fatalf("%s: extend of a device_standard index: %v", what, err)
							}
							continue
						}
						if err == nil || !strings.Contains(err.Error(), "CAGRA does not implement the extend method") {
							t.Fatalf("%s: extend: %v", what, err)
						}
						m.expectViolations("CAGRA does not implement the extend method")
					}
					// nothing was added either way
					ranks := m.cagraRanks(x)
					if len(ranks) != 2 || ranks[0].rows != 32 || ranks[1].rows != 32 {
						t.Fatalf("%s: ranks %+v, want 32 rows each", what, ranks)
					}
					if rel != cuvsdouble.Release2606 {
						want := uint64(1)
						if standard {
							want = 2
						}
						if ranks[0].kind != want || ranks[1].kind != want {
							t.Fatalf("%s: serialized dataset kinds %+v, want %d", what, ranks, want)
						}
					}
					for _, id := range m.search("Cagra", x, add, dim, 3) {
						if id >= 64 {
							t.Fatalf("%s: search found id %d of a row that was not added", what, id)
						}
					}
				}
				check("built")
				// the layout survives a file: Deserialize takes the file's kind
				path := filepath.Join(t.TempDir(), "mg.bin")
				m.must(m.lib.MgFile("Cagra", "Serialize", m.mg, x, path))
				y, doneY := m.handle("Cagra", "Index")
				defer doneY()
				m.must(m.lib.MgFile("Cagra", "Deserialize", m.mg, y, path))
				x = y
				check("deserialized")
			})
		}
	}
}

// TestMultiGpuCagraSmallShards: each shard's build lowers the degrees as
// cagra::build does (check_graph_degree) instead of refusing; one row is a
// violation (cuVS's prune kernel reads past an empty array) and so is what
// ITERATIVE_CAGRA_SEARCH refuses (thrown inside snmg's OpenMP loop).
func TestMultiGpuCagraSmallShards(t *testing.T) {
	for _, rel := range cuvsdouble.Releases() {
		t.Run(rel, func(t *testing.T) {
			m := newMgFixture(t, rel, 2)
			defer m.close()
			rng := rand.New(rand.NewSource(3))
			const dim = 4
			build := func(rows int, mode int, intermediate, degree uint64, algo int) (unsafe.Pointer, func(), error) {
				p, doneP := m.handle("Cagra", "IndexParams")
				defer doneP()
				capi.SetMgMode(p, mode)
				capi.SetMgCagraDegrees(p, intermediate, degree)
				if algo >= 0 {
					old := capi.SetMgCagraBuildAlgo(p, algo)
					defer capi.SetMgCagraBuildAlgo(p, old)
				}
				x, doneX := m.handle("Cagra", "Index")
				data := randomMatrix(rng, rows, dim)
				ds := m.f32(capi.CPU, capi.CPU, rows, dim, data)
				defer m.drop(ds)
				err := m.lib.MgBuild("Cagra", m.mg, p, ds.t, x)
				if err == nil {
					// every row finds itself
					got := m.search("Cagra", x, data, dim, 1)
					for i, id := range got {
						if id != int64(i) {
							t.Fatalf("%d rows: row %d finds %d", rows, i, id)
						}
					}
				}
				return x, doneX, err
			}
			for _, c := range []struct {
				rows, mode           int
				intermediate, degree uint64
				want                 []uint64
			}{
				{21, capi.MgSharded, 128, 64, []uint64{10, 9}}, // 11 and 10 rows: rows - 1
				{21, capi.MgReplicated, 128, 64, []uint64{20, 20}},
				{21, capi.MgSharded, 8, 4, []uint64{4, 4}},   // nothing to lower
				{200, capi.MgSharded, 6, 8, []uint64{6, 6}},  // graph degree > intermediate
				{4, capi.MgSharded, 128, 64, []uint64{1, 1}}, // 2 rows each
			} {
				x, done, err := build(c.rows, c.mode, c.intermediate, c.degree, -1)
				if err != nil {
					t.Fatalf("%+v: %v", c, err)
				}
				ranks := m.cagraRanks(x)
				for r, rk := range ranks {
					if rk.degree != c.want[r] {
						t.Errorf("%+v: rank %d built with degree %d, want %d", c, r, rk.degree, c.want[r])
					}
				}
				done()
			}
			// 3 rows: the second shard has one
			_, done, err := build(3, capi.MgSharded, 128, 64, -1)
			if err == nil {
				t.Fatal("a shard of one row accepted")
			}
			m.expectViolations("over 1 row(s)")
			done()
			// ITERATIVE_CAGRA_SEARCH refuses fewer rows than graph_degree
			_, done, err = build(21, capi.MgSharded, 128, 64, capi.Iterative)
			if err == nil || !strings.Contains(err.Error(), "Could not generate an intermediate CAGRA graph") {
				t.Fatalf("iterative build of 11-row shards: %v", err)
			}
			m.expectViolations("cagra::build throws inside snmg's OpenMP loop")
			done()
		})
	}
}
