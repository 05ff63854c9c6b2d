package safe

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/internal/cuvsdouble"
)

func TestVersionCheck(t *testing.T) {
	// Package safe's own tests cannot import internal/safetest (it imports
	// safe): they read its variable themselves.
	if lib := os.Getenv("CUVS_TEST_LIBRARY"); lib != "" {
		t.Skipf("needs the ABI test double (internal/cuvsdouble) for forced versions; CUVS_TEST_LIBRARY=%s is another library", lib)
	}
	ctl, err := cuvsdouble.Open(generated.LibraryPath())
	if err != nil {
		t.Fatal(err)
	}
	defer ctl.SetVersion(26, 6, 0)
	if err := checkVersion(); err != nil {
		t.Fatalf("matching version refused: %v", err)
	}
	ctl.SetVersion(26, 6, 3) // a patch release is fine
	if err := checkVersion(); err != nil {
		t.Fatalf("patch release refused: %v", err)
	}
	for _, v := range [][3]uint16{{26, 8, 0}, {25, 6, 0}} {
		ctl.SetVersion(v[0], v[1], v[2])
		err := checkVersion()
		if !errors.Is(err, ErrVersion) {
			t.Fatalf("%v: got %v, want ErrVersion", v, err)
		}
		lib := Version{int(v[0]), int(v[1]), int(v[2])}.String()
		for _, want := range []string{lib, "26.06.00", "WithoutVersionCheck"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%q does not mention %q", err, want)
			}
		}
	}
}

func TestParseVersion(t *testing.T) {
	if v, err := parseVersion("v26.06.00"); err != nil || v != (Version{26, 6, 0}) {
		t.Errorf("got %v, %v", v, err)
	}
	if _, err := parseVersion("vX.1"); err == nil {
		t.Error("bad version accepted")
	}
	if BindingsVersion() != (Version{26, 6, 0}) {
		t.Errorf("BindingsVersion = %v", BindingsVersion())
	}
}
