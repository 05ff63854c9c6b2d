package cagra_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/cagra"
)

// memParams are the small build's parameters of the memory tests.
func memParams(t *testing.T) cagra.IndexParams {
	t.Helper()
	p, err := cagra.DefaultIndexParams()
	if err != nil {
		t.Fatal(err)
	}
	p.GraphDegree, p.IntermediateGraphDegree = degree, intermediate
	p.BuildAlgo = cagra.NNDescent
	return p
}

// inUse is res's DeviceMemory.InUse.
func inUse(t *testing.T, res *safe.Resources) int64 {
	t.Helper()
	m, err := res.DeviceMemory()
	if err != nil {
		t.Fatal(err)
	}
	return m.InUse
}

// A merged index counts in DeviceMemory.InUse what the double holds for it
// (its graph and its rows), its merge peaks at Merge's estimate, and
// nothing is left after Close: rows of 32 bytes (the indexes reference
// the caller's rows) and of 20 (they own padded copies), with and without
// a filter.
func TestMergeCounted(t *testing.T) {
	ctl := safetest.Double(t, "the double's device memory accounting")
	for _, d := range []int{dim, 5} {
		for _, filtered := range []bool{false, true} {
			t.Run(fmt.Sprintf("dim %d filtered %v", d, filtered), func(t *testing.T) {
				safetest.Check(t)
				res := safetest.Resources(t)
				p := memParams(t)
				da := deviceMatrix(t, res, safetest.Random(1, 200, d), 200, d)
				db := deviceMatrix(t, res, safetest.Random(2, 150, d), 150, d)
				a, err := cagra.Build(res, da, &p)
				must(t, err)
				defer a.Close()
				b, err := cagra.Build(res, db, &p)
				must(t, err)
				defer b.Close()
				kept := 350
				var filter *safe.Filter
				if filtered {
					var allowed []int64
					for i := int64(0); i < 350; i += 2 {
						allowed = append(allowed, i)
					}
					kept = len(allowed)
					filter, err = safe.NewBitsetFilterAllowing(res, 350, allowed)
					must(t, err)
					defer filter.Close()
				}
				est, ok, err := cagra.MergeEstimate(&p, 350, kept, d, dlpack.Float32, filtered)
				must(t, err)
				if !ok {
					t.Fatal("Merge's estimate: not checked")
				}
				a1, u1 := int64(ctl.DeviceMemory(0).Allocated), inUse(t, res)
				ctl.ResetDevicePeak(0)
				m, err := cagra.Merge(res, &p, []*cagra.Index{a, b}, filter)
				must(t, err)
				peak := int64(ctl.DeviceMemory(0).Peak) - a1
				held, counted := int64(ctl.DeviceMemory(0).Allocated)-a1, inUse(t, res)-u1
				t.Logf("merge: peak %d, held %d, counted %d; estimate %+v", peak, held, counted, est)
				if peak != est.BuildPeak || held != est.Index || counted != held {
					t.Errorf("merge: the double peaked at %d and holds %d, InUse counts %d; estimated peak %d, index %d", peak, held, counted, est.BuildPeak, est.Index)
				}
				must(t, m.Close())
				if a, u := int64(ctl.DeviceMemory(0).Allocated)-a1, inUse(t, res)-u1; a != 0 || u != 0 {
					t.Errorf("after the merged index's Close: the double holds %d more bytes, InUse counts %d more", a, u)
				}
			})
		}
	}
}

// A Merge whose estimate does not fit SetMemoryLimit's limit is refused
// before cuvsCagraMerge; WithoutMemoryCheck it is made, and counted.
func TestMergeRefusedOverMemoryLimit(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	p := memParams(t)
	a, err := cagra.Build(res, deviceMatrix(t, res, safetest.Random(1, 200, dim), 200, dim), &p)
	must(t, err)
	defer a.Close()
	b, err := cagra.Build(res, deviceMatrix(t, res, safetest.Random(2, 150, dim), 150, dim), &p)
	must(t, err)
	defer b.Close()
	est, ok, err := cagra.MergeEstimate(&p, 350, 350, dim, dlpack.Float32, false)
	must(t, err)
	if !ok || est.BuildPeak <= 0 {
		t.Fatalf("Merge's estimate %+v, checked %v", est, ok)
	}
	u := inUse(t, res)
	limit := u + est.BuildPeak - 1
	must(t, safe.SetMemoryLimit(limit))
	t.Cleanup(func() { _ = safe.SetMemoryLimit(0) })
	calls := mergeCalls()
	m, err := cagra.Merge(res, &p, []*cagra.Index{a, b}, nil)
	var me *safe.MemoryError
	if !errors.Is(err, safe.ErrOutOfMemory) || !errors.As(err, &me) {
		if m != nil {
			_ = m.Close()
		}
		t.Fatalf("Merge over the limit: %v, want a *safe.MemoryError", err)
	}
	if me.Need != est.BuildPeak || me.Limit != limit || mergeCalls() != calls || inUse(t, res) != u {
		t.Errorf("refusal %+v, %d merges called, InUse %d (%d before): want need %d, no call, nothing counted", me, mergeCalls()-calls, inUse(t, res), u, est.BuildPeak)
	}
	unchecked, err := safe.NewResources(safe.WithoutMemoryCheck())
	must(t, err)
	defer unchecked.Close()
	m, err = cagra.Merge(unchecked, &p, []*cagra.Index{a, b}, nil)
	must(t, err)
	if m.Rows() != 350 {
		t.Errorf("WithoutMemoryCheck: %d rows merged, want 350", m.Rows())
	}
	if safetest.Control() != nil && mergeCalls() != calls+1 {
		t.Errorf("WithoutMemoryCheck: %d merges called, want one", mergeCalls()-calls)
	}
	if got := inUse(t, res) - u; got != est.Index {
		t.Errorf("the merged index counts %d bytes in InUse, estimated %d", got, est.Index)
	}
	must(t, m.Close())
}

// mergeCalls counts cuvsCagraMerge on the double (0 elsewhere).
func mergeCalls() int64 {
	if ctl := safetest.Control(); ctl != nil {
		return ctl.Calls("cuvsCagraMerge")
	}
	return 0
}

// An index read from a file written without its rows counts its graph
// only, as the double holds it; with its rows, the graph and the rows.
func TestDeserializeCounted(t *testing.T) {
	ctl := safetest.Double(t, "the double's device memory accounting")
	safetest.Check(t)
	res := safetest.Resources(t)
	p := memParams(t)
	idx, err := cagra.Build(res, deviceMatrix(t, res, safetest.Random(1, 200, dim), 200, dim), &p)
	must(t, err)
	defer idx.Close()
	dir := t.TempDir()
	lean, full := filepath.Join(dir, "lean.idx"), filepath.Join(dir, "full.idx")
	must(t, idx.Serialize(res, lean, safe.WithoutDataset()))
	must(t, idx.Serialize(res, full))
	graph := int64(200*degree*4+255) / 256 * 256
	for _, c := range []struct {
		path string
		want int64
	}{{lean, graph}, {full, graph + int64(200*dim*4+255)/256*256}} {
		a0, u0 := int64(ctl.DeviceMemory(0).Allocated), inUse(t, res)
		back, err := cagra.Deserialize(res, c.path)
		must(t, err)
		a, u := int64(ctl.DeviceMemory(0).Allocated)-a0, inUse(t, res)-u0
		if a != c.want || u != c.want {
			t.Errorf("%s: the double holds %d bytes, InUse counts %d; want %d", filepath.Base(c.path), a, u, c.want)
		}
		must(t, back.Close())
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// UpdateDataset on cuVS 26.08: rows that are not a multiple of 16 bytes
// are copied into a padded dataset the index owns, and counted in InUse as
// the double holds them; padded device rows are referenced, and count as
// their matrix; host rows are uploaded first, the upload kept as the
// index's rows where they are padded, else freed after the copy. After
// Close nothing is left on either side.
func TestUpdateDatasetCounted(t *testing.T) {
	ctl := safetest.Double(t, "the double's device memory accounting")
	safetest.Check(t)
	res := safetest.Resources(t)
	for _, d := range []int{6, dim} {
		for _, host := range []bool{false, true} {
			p := memParams(t)
			data := safetest.Random(3, 200, d)
			idx, err := cagra.Build(res, deviceMatrix(t, res, data, 200, d), &p)
			must(t, err)
			lean := filepath.Join(t.TempDir(), "lean.idx")
			must(t, idx.Serialize(res, lean, safe.WithoutDataset()))
			must(t, idx.Close())
			back, err := cagra.Deserialize(res, lean)
			must(t, err)
			var rows dlpack.Tensor = hostMatrix(t, data, 200, d)
			if !host {
				rows = deviceMatrix(t, res, data, 200, d)
			}
			a0, u0 := int64(ctl.DeviceMemory(0).Allocated), inUse(t, res)
			err = back.UpdateDataset(res, rows)
			if errors.Is(err, safe.ErrNotInRelease) {
				must(t, back.Close())
				t.Skip("cuvsCagraUpdateDataset is cuVS 26.08's")
			}
			must(t, err)
			a, u := int64(ctl.DeviceMemory(0).Allocated)-a0, inUse(t, res)-u0
			t.Logf("dim %d, host rows %v: UpdateDataset made the double hold %d more bytes, InUse count %d more", d, host, a, u)
			if a != u {
				t.Errorf("dim %d, host rows %v: after UpdateDataset the double holds %d more bytes, InUse counts %d more", d, host, a, u)
			}
			if padded := d*4%16 == 0; !host && padded != (a == 0) || host && a == 0 {
				t.Errorf("dim %d, host rows %v: UpdateDataset took %d bytes: want a padded copy of device rows only when they are not a multiple of 16 bytes, and host rows on the device", d, host, a)
			}
			must(t, back.Close())
			if a, u := int64(ctl.DeviceMemory(0).Allocated)-a0, inUse(t, res)-u0; a != u {
				t.Errorf("dim %d, host rows %v: after Close the double holds %d bytes more than before UpdateDataset, InUse counts %d", d, host, a, u)
			}
		}
	}
}

// An ACE build that goes to disk on its own (its memory model over
// MaxHostMemoryGB, as cuVS's ace_check_use_disk_mode decides) leaves
// nothing on the device: InUse counts what the double holds, nothing.
func TestACEOnItsOwnToDiskCounted(t *testing.T) {
	ctl := safetest.Double(t, "the double's device memory accounting")
	safetest.Check(t)
	res := safetest.Resources(t)
	p := aceParams(t, 2, false)
	p.ACE.BuildDir, p.ACE.MaxHostMemoryGB = t.TempDir(), 1e-6
	a0, u0 := int64(ctl.DeviceMemory(0).Allocated), inUse(t, res)
	idx, err := cagra.Build(res, hostMatrix(t, safetest.Random(4, 3000, 24), 3000, 24), &p)
	must(t, err)
	defer idx.Close()
	a, u := int64(ctl.DeviceMemory(0).Allocated)-a0, inUse(t, res)-u0
	if a != u {
		t.Errorf("after an ACE build that went to disk the double holds %d more bytes, InUse counts %d more", a, u)
	}
	if _, err := cagra.SearchSlice(res, idx, nil, safetest.Random(5, 1, 24), 3, nil); !errors.Is(err, cagra.ErrOnDisk) {
		t.Errorf("a search of the index: %v, want cagra.ErrOnDisk (the build did go to disk)", err)
	}
}
