// Package live counts the handles the bindings hold (indexes, resources,
// device memory, borrows), whatever library is loaded. Tests use it to check
// that everything a test made was released, against the ABI test double and
// a real libcuvs_c alike. Counting is two atomic additions per handle's
// life, never on a search's path.
package live

import (
	"sort"
	"sync"
	"sync/atomic"
)

// Counter counts the live handles of one kind.
type Counter struct {
	name string
	n    atomic.Int64
}

var (
	mu       sync.Mutex
	counters []*Counter
)

// New registers a counter. Call it from a package-level var.
func New(name string) *Counter {
	c := &Counter{name: name}
	mu.Lock()
	counters = append(counters, c)
	mu.Unlock()
	return c
}

// Inc counts a handle made.
func (c *Counter) Inc() { c.n.Add(1) }

// Dec counts a handle released.
func (c *Counter) Dec() { c.n.Add(-1) }

// Live returns how many handles of this kind are live.
func (c *Counter) Live() int64 { return c.n.Load() }

// Snapshot returns every counter's live count by name (counters of one name
// are added up).
func Snapshot() map[string]int64 {
	mu.Lock()
	defer mu.Unlock()
	m := make(map[string]int64, len(counters))
	for _, c := range counters {
		m[c.name] += c.n.Load()
	}
	return m
}

// Diff lists, sorted, the kinds whose live count differs between two
// snapshots, as "name: before -> after".
func Diff(before, after map[string]int64) []string {
	var out []string
	for name, a := range after {
		if b := before[name]; a != b {
			out = append(out, name+": "+itoa(b)+" -> "+itoa(a))
		}
	}
	for name, b := range before {
		if _, ok := after[name]; !ok && b != 0 {
			out = append(out, name+": "+itoa(b)+" -> 0")
		}
	}
	sort.Strings(out)
	return out
}

func itoa(n int64) string {
	if n == 0 {
		return "0"
	}
	neg := n < 0
	if neg {
		n = -n
	}
	var b [20]byte
	i := len(b)
	for n > 0 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	if neg {
		i--
		b[i] = '-'
	}
	return string(b[i:])
}
