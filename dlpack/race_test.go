package dlpack_test

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cuvs-go/cuvs/dlpack"
)

// TestBorrowRace has many goroutines read, write, retain, lend and try to
// close one owner at once, and checks the read/write rule from the outside:
// while anyone holds an exclusive borrow, nobody else holds any. Run it with
// -race.
func TestBorrowRace(t *testing.T) {
	const goroutines, rounds = 16, 300
	shared, _ := dlpack.NewHostMatrix(make([]float32, 64), 8, 8)
	shared.Owner().SetLabel("shared")
	var readers, writers atomic.Int64
	enterShared := func() {
		readers.Add(1)
		if writers.Load() != 0 {
			t.Error("a reader while a writer holds the memory")
		}
	}
	enterExcl := func() {
		if writers.Add(1) != 1 || readers.Load() != 0 {
			t.Error("a writer while someone else holds the memory")
		}
	}
	var refused atomic.Int64
	refuse := func(err error) {
		var be *dlpack.BorrowedError
		if !errors.As(err, &be) || len(be.By) == 0 {
			t.Errorf("refusal %v does not say by whom", err)
		}
		refused.Add(1)
	}
	var wg sync.WaitGroup
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			own, _ := dlpack.NewHostMatrix(make([]int64, 8), 8, 1)
			for i := 0; i < rounds; i++ {
				switch (g + i) % 5 {
				case 0, 1: // a search: read shared, write our own
					c := dlpack.Begin("search")
					q, _ := shared.View()
					out, _ := own.ViewMut()
					if _, err := c.In(&q); err != nil {
						refuse(err)
						c.End()
						continue
					}
					enterShared()
					if _, err := c.Out(&out); err != nil {
						t.Error(err)
					}
					readers.Add(-1)
					c.End()
					if q.Err() == nil {
						t.Error("view alive after End")
					}
				case 2: // an index keeps the data
					v, _ := shared.View()
					r, err := v.Retain("index")
					if err != nil {
						refuse(err)
						continue
					}
					enterShared()
					readers.Add(-1)
					r.End()
				case 3: // a call writes it
					c := dlpack.Begin("update")
					m, _ := shared.ViewMut()
					if _, err := c.Out(&m); err != nil {
						refuse(err)
						c.End()
						continue
					}
					enterExcl()
					writers.Add(-1)
					c.End()
				case 4: // a copy lends it, or someone tries to free it
					if i%2 == 0 {
						r, err := shared.Owner().LendMut("copy")
						if err != nil {
							refuse(err)
							continue
						}
						enterExcl()
						writers.Add(-1)
						r.End()
					} else if err := probeClose(shared.Owner()); err != nil {
						refuse(err)
					}
				}
			}
		}(g)
	}
	wg.Wait()
	if shared.Owner().Busy() {
		t.Fatalf("still borrowed by %q", shared.Owner().Borrowers())
	}
	if err := shared.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d refusals", refused.Load())
}

// probeClose asks whether o could be closed now, without closing it: it
// takes an exclusive lending, which succeeds exactly when Close would.
func probeClose(o *dlpack.Owner) error {
	r, err := o.LendMut("probe")
	if err != nil {
		return err
	}
	r.End()
	return nil
}

// TestCloseRace has calls and Close race: Close succeeds exactly once, and
// then every call is refused with ErrExpired; no call sees the memory freed.
func TestCloseRace(t *testing.T) {
	for round := 0; round < 20; round++ {
		m, _ := dlpack.NewHostMatrix(make([]float32, 16), 4, 4)
		var wg sync.WaitGroup
		var closed atomic.Bool
		for g := 0; g < 8; g++ {
			wg.Add(1)
			go func(g int) {
				defer wg.Done()
				for i := 0; i < 50; i++ {
					if g == 0 && i == 25 {
						for m.Close() != nil {
						}
						closed.Store(true)
						continue
					}
					c := dlpack.Begin("search")
					v, err := m.View()
					if err == nil {
						_, err = c.In(&v)
					}
					if err == nil && closed.Load() {
						t.Error("a call bound memory after Close")
					}
					if err != nil && !errors.Is(err, dlpack.ErrExpired) {
						t.Error(err)
					}
					c.End()
				}
			}(g)
		}
		wg.Wait()
	}
}
