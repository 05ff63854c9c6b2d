package stream

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// noLeaks makes the test's temporary directories private and checks, at
// the end, that no directory, file descriptor or goroutine was left.
func noLeaks(t *testing.T) {
	t.Helper()
	old := tempRoot
	tempRoot = t.TempDir()
	g := runtime.NumGoroutine()
	fds := openFDs(t)
	t.Cleanup(func() {
		defer func() { tempRoot = old }()
		if ents, err := os.ReadDir(tempRoot); err != nil || len(ents) != 0 {
			t.Errorf("left in the temporary directory: %v, %v", ents, err)
		}
		// A goroutine that has handed over its result may still be on its
		// way out: give it a moment (a leaked one stays).
		n := runtime.NumGoroutine()
		for deadline := time.Now().Add(2 * time.Second); n > g && time.Now().Before(deadline); n = runtime.NumGoroutine() {
			time.Sleep(time.Millisecond)
		}
		if n > g {
			t.Errorf("%d goroutines, %d at the start", n, g)
		}
		if n := openFDs(t); n != fds {
			t.Errorf("%d open file descriptors, %d at the start", n, fds)
		}
	})
}

func openFDs(t *testing.T) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd")
	}
	return len(ents)
}

func data(n int) []byte {
	b := make([]byte, n)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// writeFile is what a serializer does: open the path once, write it in
// pieces, close it.
func writeFile(payload []byte, chunk int) func(string) error {
	return func(path string) error {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
		if err != nil {
			return err
		}
		for len(payload) > 0 {
			k := min(chunk, len(payload))
			if _, err := f.Write(payload[:k]); err != nil {
				f.Close()
				return err
			}
			payload = payload[k:]
		}
		return f.Close()
	}
}

func TestToWriter(t *testing.T) {
	for _, size := range []int{0, 1, 4096, 65537, 48 << 20} {
		noLeaks(t)
		want := data(size)
		var buf bytes.Buffer
		n, err := ToWriter(&buf, writeFile(want, 1<<20-3))
		if err != nil || n != int64(size) || !bytes.Equal(buf.Bytes(), want) {
			t.Fatalf("size %d: n %d, err %v, equal %v", size, n, err, bytes.Equal(buf.Bytes(), want))
		}
	}
}

var errBoom = errors.New("boom")

func TestToWriterWriteFailsBeforeOpening(t *testing.T) {
	noLeaks(t)
	var buf bytes.Buffer
	n, err := ToWriter(&buf, func(string) error { return errBoom })
	if !errors.Is(err, errBoom) || n != 0 {
		t.Errorf("n %d, err %v", n, err)
	}
	n, err = ToWriter(&buf, func(string) error { return nil })
	if err != nil || n != 0 {
		t.Errorf("nothing written: n %d, err %v", n, err)
	}
}

func TestToWriterWriteFailsMidway(t *testing.T) {
	noLeaks(t)
	payload := data(300000)
	var buf bytes.Buffer
	n, err := ToWriter(&buf, func(path string) error {
		if err := writeFile(payload[:200000], 7000)(path); err != nil {
			return err
		}
		return errBoom
	})
	if !errors.Is(err, errBoom) || n != 200000 || !bytes.Equal(buf.Bytes(), payload[:200000]) {
		t.Errorf("n %d, err %v", n, err)
	}
}

// failAfter accepts limit bytes, then fails.
type failAfter struct {
	limit, got int
}

func (w *failAfter) Write(p []byte) (int, error) {
	if w.got+len(p) > w.limit {
		k := w.limit - w.got
		w.got = w.limit
		return k, errBoom
	}
	w.got += len(p)
	return len(p), nil
}

// A writer that fails midway: the serializer still runs to its end (the
// rest is drained), and the writer's error comes back.
func TestToWriterWriterFailsMidway(t *testing.T) {
	noLeaks(t)
	payload := data(8 << 20)
	w := &failAfter{limit: 100000}
	finished := false
	n, err := ToWriter(w, func(path string) error {
		err := writeFile(payload, 1<<16)(path)
		finished = err == nil
		return err
	})
	if !errors.Is(err, errBoom) || n != 100000 || !finished {
		t.Errorf("n %d, err %v, serializer finished %v", n, err, finished)
	}
}

func TestFromReader(t *testing.T) {
	for _, fallback := range []bool{false, true} {
		noMemfd = fallback
		for _, size := range []int{0, 1, 65537, 48 << 20} {
			noLeaks(t)
			want := data(size)
			var got []byte
			n, err := FromReader(bytes.NewReader(want), 0, func(path string) error {
				// In memory: nothing in the temporary directory, and a path
				// that reopens the anonymous file.
				if ents, _ := os.ReadDir(tempRoot); fallback != (len(ents) == 1) || fallback == strings.HasPrefix(path, "/proc/self/fd/") {
					t.Errorf("fallback %v: path %s, temporary directory %v", fallback, path, ents)
				}
				// read twice, as cuVS's deserializers open the file twice
				if _, err := os.ReadFile(path); err != nil {
					return err
				}
				var err error
				got, err = os.ReadFile(path)
				return err
			})
			if err != nil || n != int64(size) || !bytes.Equal(got, want) {
				t.Fatalf("fallback %v, size %d: n %d, err %v", fallback, size, n, err)
			}
		}
	}
	noMemfd = false
}

// countingReader counts the bytes read from it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// A stream longer than the limit is refused, naming the limit, after at
// most limit+1 bytes; one of exactly the limit is read.
func TestFromReaderLimit(t *testing.T) {
	for _, fallback := range []bool{false, true} {
		noMemfd = fallback
		noLeaks(t)
		const limit = 100000
		cr := &countingReader{r: bytes.NewReader(data(10 << 20))}
		called := false
		_, err := FromReader(cr, limit, func(string) error { called = true; return nil })
		var tl *TooLargeError
		if !errors.As(err, &tl) || tl.Limit != limit || !strings.Contains(err.Error(), "100000") || called {
			t.Errorf("fallback %v: over the limit: %v, read called %v", fallback, err, called)
		}
		if cr.n > limit+1 {
			t.Errorf("fallback %v: %d bytes read, limit %d", fallback, cr.n, limit)
		}
		n, err := FromReader(bytes.NewReader(data(limit)), limit, func(path string) error {
			b, err := os.ReadFile(path)
			if len(b) != limit {
				t.Errorf("fallback %v: %d bytes at the path", fallback, len(b))
			}
			return err
		})
		if err != nil || n != limit {
			t.Errorf("fallback %v: exactly the limit: %d, %v", fallback, n, err)
		}
	}
	noMemfd = false
}

func TestFromReaderErrors(t *testing.T) {
	noLeaks(t)
	called := false
	_, err := FromReader(io.MultiReader(bytes.NewReader(data(1000)), errReader{}), 0, func(string) error {
		called = true
		return nil
	})
	if !errors.Is(err, errBoom) || called {
		t.Errorf("reader fails: err %v, read called %v", err, called)
	}
	_, err = FromReader(bytes.NewReader(data(10)), 0, func(string) error { return errBoom })
	if !errors.Is(err, errBoom) {
		t.Errorf("read fails: %v", err)
	}
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errBoom }
