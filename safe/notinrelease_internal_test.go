package safe

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/safe/internal/base"
)

// inRelease refuses every C function the loaded release lacks with the
// typed *NotInReleaseError (package generated's), wrapped with the op, so
// that errors.As matches it through safe and through kit's hook alike, and
// lets every function of the release through.
func TestInReleaseTyped(t *testing.T) {
	rel := generated.Release()
	if rel == "" {
		t.Fatal("no library loaded")
	}
	lacking := 0
	for _, name := range generated.Functions() {
		in := generated.FunctionReleases(name)
		for _, check := range []func(op, cName string) error{inRelease, base.InRelease} {
			err := check("test.Op", name)
			if slices.Contains(in, rel) {
				if err != nil {
					t.Errorf("%s is in cuVS %s: %v", name, rel, err)
				}
				continue
			}
			var nr *NotInReleaseError
			if !errors.As(err, &nr) {
				t.Fatalf("%s: %v (%T), want a *safe.NotInReleaseError", name, err, err)
			}
			want := &generated.NotInReleaseError{Func: strings.ToUpper(name[:1]) + name[1:], Symbol: name, Release: rel, In: in}
			if !reflect.DeepEqual(nr, want) {
				t.Errorf("%s: %+v, want %+v", name, nr, want)
			}
			if !errors.Is(err, ErrNotInRelease) || !strings.HasPrefix(err.Error(), "test.Op: "+name+" is not in cuVS "+rel) {
				t.Errorf("%s: %q (errors.Is ErrNotInRelease: %v)", name, err, errors.Is(err, ErrNotInRelease))
			}
		}
		if !slices.Contains(in, rel) {
			lacking++
		}
	}
	if lacking == 0 {
		t.Fatalf("every function is in cuVS %s: nothing checked", rel)
	}
}

// The refusal before the C call is the error the generated function itself
// returns when called: the same type, the same fields (the Go function's
// name too).
func TestInReleaseAsGenerated(t *testing.T) {
	var name string
	var call func() error
	switch generated.Release() {
	case "26.06":
		name, call = "cuvsResourcesSetWorkspacePool", func() error { return generated.CuvsResourcesSetWorkspacePool(0, 0) }
	case "26.08":
		name, call = "cuvsCagraSerialize", func() error { return generated.CuvsCagraSerialize(0, nil, 0, false) }
	default:
		t.Skipf("no function known to be missing from cuVS %s", generated.Release())
	}
	var fromSafe, fromGenerated *NotInReleaseError
	if err := inRelease("test.Op", name); !errors.As(err, &fromSafe) {
		t.Fatalf("inRelease: %v", err)
	}
	if err := call(); !errors.As(err, &fromGenerated) {
		t.Fatalf("generated: %v", err)
	}
	if !reflect.DeepEqual(fromSafe, fromGenerated) {
		t.Errorf("inRelease: %+v, generated: %+v", fromSafe, fromGenerated)
	}
}
