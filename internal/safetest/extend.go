package safetest

import (
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cuvs-go/cuvs/safe"
)

// ExtendUnderLoad has searchers goroutines, each with its own Resources,
// call search in a loop while the test's goroutine calls extend extends
// times; then the searchers stop. Every call must succeed: an Extend waits
// its turn under search traffic, and a search waits for an Extend rather
// than fail. Each searcher searches at least once after the last Extend.
// It returns the number of searches made. No timing is asserted.
func ExtendUnderLoad(t *testing.T, searchers, extends int, search func(res *safe.Resources) error, extend func(i int) error) int64 {
	t.Helper()
	var n atomic.Int64
	var failed atomic.Bool
	done := make(chan struct{})
	var started, wg sync.WaitGroup
	for g := 0; g < searchers; g++ {
		wg.Add(1)
		started.Add(1)
		go func() {
			defer wg.Done()
			res, err := safe.NewResources()
			if err != nil {
				t.Error(err)
				started.Done()
				return
			}
			defer res.Close()
			first := true
			for {
				stop := false
				select {
				case <-done:
					stop = true
				default:
				}
				if err := search(res); err != nil {
					failed.Store(true)
					t.Errorf("search %d: %v", n.Load(), err)
					if first {
						started.Done()
					}
					return
				}
				n.Add(1)
				if first {
					started.Done()
					first = false
				}
				if stop {
					return
				}
			}
		}()
	}
	started.Wait() // every searcher is searching
	for i := 0; i < extends && !failed.Load(); i++ {
		if err := extend(i); err != nil {
			t.Errorf("Extend %d of %d under search traffic: %v", i+1, extends, err)
			break
		}
	}
	close(done)
	wg.Wait()
	return n.Load()
}
