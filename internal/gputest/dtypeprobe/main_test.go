package main

import (
	"strings"
	"testing"

	"github.com/cuvs-go/cuvs/internal/cuvsdouble"
	"github.com/cuvs-go/cuvs/safe"
)

// TestProbe runs the probe against the ABI test double, which builds CAGRA
// indexes of all four types, with cuvsCagraBuild made to refuse int8 as a
// trimmed cuVS does, uint8 as the test builds of ../shared/cuvs do ("not
// compiled in this ... cuVS build"), and to fail float16 for another
// reason: int8 and uint8 lack, float16 is an error (not a missing type),
// float32 is ok.
func TestProbe(t *testing.T) {
	ctl := cuvsdouble.New(t)
	if err := safe.Load(safe.WithLibrary(ctl.Path)); err != nil {
		t.Fatal(err)
	}
	res, err := safe.NewResources()
	if err != nil {
		t.Fatal(err)
	}
	defer res.Close()
	got := probe(res, func(name string) {
		switch name {
		case "int8":
			ctl.FailNext("cuvsCagraBuild", "Unsupported dataset DLtensor dtype: 0 and bits: 8")
		case "uint8":
			ctl.FailNext("cuvsCagraBuild", "not compiled in this cuVS build (float32, int8 and uint8 only): cuvs::neighbors::cagra::build(raft::resources const&, ...)")
		case "float16":
			ctl.FailNext("cuvsCagraBuild", "out of memory")
		}
	})
	want := map[string]string{"float32": "ok", "float16": "error", "int8": "lacks", "uint8": "lacks"}
	if len(got) != len(want) {
		t.Fatalf("%d results, want %d", len(got), len(want))
	}
	for _, r := range got {
		if r.state != want[r.name] {
			t.Errorf("%s: %s (%q), want %s", r.name, r.state, r.message, want[r.name])
		}
		f := strings.Split(r.line(), "\t")
		if len(f) != 5 || f[0] != r.name || f[1] != r.state || strings.Contains(r.line(), "\n") {
			t.Errorf("%s: line %q: want 5 tab-separated fields on one line", r.name, r.line())
		}
	}
	for _, r := range got {
		switch r.name {
		case "int8":
			if r.message != "Unsupported dataset DLtensor dtype: 0 and bits: 8" || r.line() != "int8\tlacks\t0\t8\t"+r.message {
				t.Errorf("int8: line %q", r.line())
			}
		case "uint8":
			if r.message != "not compiled in this cuVS build (float32, int8 and uint8 only)" {
				t.Errorf("uint8: line %q", r.line())
			}
		case "float16":
			if !strings.Contains(r.message, "out of memory") {
				t.Errorf("float16: message %q, want cuVS's reason", r.message)
			}
		}
	}
	if n := ctl.PendingFaults(); n != 0 {
		t.Errorf("%d faults left armed: the probe did not build every type", n)
	}
}

// TestLacks: cuVS's refusal is matched in each form its C sources write, for
// the type refused only.
func TestLacks(t *testing.T) {
	for _, c := range []struct {
		text       string
		code, bits int
		want       bool
	}{
		{"cuvsCagraBuild: RAFT failure at file=cagra.cpp line=194: Unsupported dataset DLtensor dtype: 1 and bits: 8\nObtained 8 stack frames", 1, 8, true},
		{"Unsupported dataset DLtensor dtype: 1 and bits: 8", 0, 8, false},
		{"Unsupported queries DLtensor dtype: 2 and bits: 16", 2, 16, true},
		{"Unsupported index dtype: 0 and bits: 8", 0, 8, true},
		{"Unsupported index data type: code=0, bits=8", 0, 8, true},
		{"Unsupported index data type: code=0, bits=8", 1, 8, false},
		{"Unsupported filter type: BITMAP", 0, 8, false},
		{"dtype: 0 and bits: 8", 0, 8, false},
	} {
		if got := lacks(c.text, c.code, c.bits); got != c.want {
			t.Errorf("lacks(%q, %d, %d) = %v, want %v", c.text, c.code, c.bits, got, c.want)
		}
	}
}
