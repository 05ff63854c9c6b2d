package safe

import "fmt"

// closedHold marks a Filter's holds once Close has freed it (or is
// freeing it): hold refuses from then on.
const closedHold = 1 << 62

// hold keeps f from being closed until release: a batch.Batcher holds a
// request's filter while the request waits or searches, and a batch's
// while it searches. It allocates nothing.
func (f *Filter) hold(op string) error {
	for {
		n := f.holds.Load()
		if n&closedHold != 0 || f.words == nil {
			return fmt.Errorf("%s: filter: %w", op, ErrClosed)
		}
		if f.holds.CompareAndSwap(n, n+1) {
			return nil
		}
	}
}

// release ends a hold.
func (f *Filter) release() { f.holds.Add(-1) }
