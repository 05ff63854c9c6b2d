package gputest

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A canned `go test -v` output of a test over types whose int8 subtest hit
// cuVS's refusal of int8 (DLPack kDLInt, 8 bits), as a trimmed build writes
// it, and whose float32 subtest passed.
const int8Refused = `=== RUN   TestDtypes
=== RUN   TestDtypes/int8
=== PAUSE TestDtypes/int8
=== RUN   TestDtypes/float32
=== NAME  TestDtypes
    dtypes_test.go:7: after
=== CONT  TestDtypes/int8
    dtypes_test.go:5: cagra.Build: cuvsCagraBuild: RAFT failure at file=cagra.cpp line=194: Unsupported dataset DLtensor dtype: 0 and bits: 8
        Obtained 8 stack frames
--- FAIL: TestDtypes (0.00s)
    --- PASS: TestDtypes/float32 (0.00s)
    --- FAIL: TestDtypes/int8 (0.00s)
`

const passAndSkip = `=== RUN   TestOK
--- PASS: TestOK (0.00s)
=== RUN   TestNeedsDouble
    x_test.go:9: needs the ABI test double (internal/cuvsdouble) for fault injection; CUVS_TEST_LIBRARY=/x/libcuvs_c.so is another library
--- SKIP: TestNeedsDouble (0.00s)
`

const probeInt8Lacks = "float32\tok\t2\t32\t\nfloat16\tok\t2\t16\t\nint8\tlacks\t0\t8\tUnsupported dataset DLtensor dtype: 0 and bits: 8\nuint8\tok\t1\t8\t\n"

const probeAllOK = "float32\tok\t2\t32\t\nfloat16\tok\t2\t16\t\nint8\tok\t0\t8\t\nuint8\tok\t1\t8\t\n"

// binary is a fake test binary: it prints out and exits with rc.
type binary struct {
	dir, variant string
	out          string
	rc           int
}

// bundle writes a bundle of fake test binaries and a fake dtypeprobe (which
// prints probe) around the real run.sh, and returns its folder.
func bundle(t *testing.T, probe string, bins ...binary) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "gpu-test")
	script, err := os.ReadFile("run.sh")
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, text string, mode os.FileMode) {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), mode); err != nil {
			t.Fatal(err)
		}
	}
	write("run.sh", string(script), 0o755)
	// The probe checks it is given the library, as run.sh passes it.
	write("bin/dtypeprobe", "#!/bin/sh\n[ -f \"$1\" ] || { echo \"dtypeprobe: no library $1\" >&2; exit 1; }\ncat <<'EOF'\n"+probe+"EOF\n", 0o755)
	var pkgs strings.Builder
	for _, b := range bins {
		// Each binary records where it ran and what run.sh set.
		body := "#!/bin/sh\necho \"$(pwd) $CUVS_TEST_LIBRARY ${CUVS_GO_CBENCH-unset} ${CUVS_GO_README_PROGRAM-unset} $*\" >>../env.txt\ncat <<'EOF'\n" + b.out + "EOF\nexit " + itoa(b.rc) + "\n"
		write(b.dir+"/"+b.variant+".test", body, 0o755)
		pkgs.WriteString(b.dir + " " + b.variant + " example.com/" + b.dir + "\n")
	}
	write("packages.txt", pkgs.String(), 0o644)
	return dir
}

func itoa(n int) string {
	if n < 0 || n > 9 {
		panic("rc out of range")
	}
	return string(rune('0' + n))
}

// runBundle runs dir's run.sh against a library file made for it, from
// another folder, and returns its output and exit status.
func runBundle(t *testing.T, dir string, args ...string) (string, int) {
	t.Helper()
	lib := filepath.Join(t.TempDir(), "libcuvs_c.so")
	if err := os.WriteFile(lib, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", append([]string{filepath.Join(dir, "run.sh"), lib}, args...)...)
	cmd.Dir = t.TempDir()
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return string(out), 0
	case errors.As(err, &ee):
		return string(out), ee.ExitCode()
	}
	t.Fatal(err)
	return "", -1
}

func contains(t *testing.T, out string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("run.sh output lacks %q:\n%s", w, out)
		}
	}
}

// TestLacksDtype: a test that failed only on cuVS's refusal of a type the
// probe found refused is listed apart and does not fail the run.
func TestLacksDtype(t *testing.T) {
	dir := bundle(t, probeInt8Lacks,
		binary{"safe_cagra", "race", passAndSkip + int8Refused, 1},
		binary{"safe_cagra", "cgocheck2", passAndSkip + int8Refused, 1})
	out, rc := runBundle(t, dir)
	if rc != 0 {
		t.Errorf("exit status %d, want 0", rc)
	}
	contains(t, out,
		"element types (bin/dtypeprobe): float32 ok, float16 ok, int8 lacks, uint8 ok\n",
		"  LACKS int8: example.com/safe_cagra (race): TestDtypes\n",
		"  LACKS int8: example.com/safe_cagra (cgocheck2): TestDtypes\n",
		"  SKIP example.com/safe_cagra TestNeedsDouble: needs the ABI test double (internal/cuvsdouble) for fault injection\n",
		"PASS: every test passed or skipped, but for 2 that failed only because the library lacks it: int8\n")
	if strings.Contains(out, "  FAIL ") {
		t.Errorf("a failure listed:\n%s", out)
	}
	row := "example.com/safe_cagra                        race             1       0            1        1           0\n"
	contains(t, out, row)
	env, err := os.ReadFile(filepath.Join(dir, "env.txt"))
	if err != nil {
		t.Fatal(err)
	}
	// Each binary ran from its folder in the bundle, with the library and
	// -test.v; the programs in bin/ are not there: run.sh set no path.
	for _, line := range strings.Split(strings.TrimSpace(string(env)), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 || f[0] != filepath.Join(dir, "safe_cagra") || filepath.Base(f[1]) != "libcuvs_c.so" || f[2] != "unset" || f[3] != "unset" || f[4] != "-test.v" {
			t.Errorf("a binary ran as %q", line)
		}
	}
}

// A failure whose text says the build left the code out (the trimmed test
// builds of ../shared/cuvs: "not compiled in this float32-only cuVS
// build") is the library's lack, whatever the probe found; beside it a
// real failure still fails the run.
//
// Both builds' texts: 26.06.00's float32-only one and 26.08.01's wider one
// (float32, int8 and uint8; float16, float64 and PCA left out).
func TestLacksNotCompiled(t *testing.T) {
	trimmed := "=== RUN   TestFit\n    pca_test.go:9: pca.Fit: cuvsPcaFit: not compiled in this float32-only cuVS build: cuvs::preprocessing::pca::fit(...)\n--- FAIL: TestFit (0.00s)\n"
	wider := "=== RUN   TestHalf\n=== RUN   TestHalf/float16\n    cagra_test.go:9: cagra.Build: cuvsCagraBuild: not compiled in this cuVS build (float32, int8 and uint8 only): cuvs::neighbors::cagra::build(...)\n--- FAIL: TestHalf (0.00s)\n    --- FAIL: TestHalf/float16 (0.00s)\n"
	for _, c := range []struct{ name, out, test string }{{"float32-only", trimmed, "TestFit"}, {"wider", wider, "TestHalf"}} {
		t.Run(c.name, func(t *testing.T) {
			out, rc := runBundle(t, bundle(t, probeAllOK, binary{"safe_pca", "cgocheck2", passAndSkip + c.out, 1}))
			if rc != 0 {
				t.Errorf("exit status %d, want 0:\n%s", rc, out)
			}
			contains(t, out, "  LACKS not-compiled-in-this-build: example.com/safe_pca (cgocheck2): "+c.test+"\n",
				"but for 1 that failed only because the library lacks it: not-compiled-in-this-build\n")
		})
	}
	// A text that only looks like it is a failure.
	near := strings.Replace(wider, "not compiled in this cuVS build (", "compiled in this cuVS build (", 1)
	out, rc := runBundle(t, bundle(t, probeAllOK, binary{"safe_pca", "cgocheck2", near, 1}))
	if rc != 1 {
		t.Errorf("near miss: exit status %d, want 1:\n%s", rc, out)
	}
	contains(t, out, "  FAIL example.com/safe_pca (cgocheck2): TestHalf\n")
	real := "=== RUN   TestOther\n    pca_test.go:20: wrong answer\n--- FAIL: TestOther (0.00s)\n"
	out, rc = runBundle(t, bundle(t, probeAllOK, binary{"safe_pca", "cgocheck2", trimmed + real, 1}))
	if rc != 1 {
		t.Errorf("exit status %d, want 1:\n%s", rc, out)
	}
	contains(t, out, "  FAIL example.com/safe_pca (cgocheck2): TestOther\n")
}

// TestInt8Column: the table counts the passed tests that ran on int8 or
// uint8 data, by the test's or a subtest's name; a failed or skipped one is
// not counted.
func TestInt8Column(t *testing.T) {
	out := "=== RUN   TestUint8\n--- PASS: TestUint8 (0.00s)\n" +
		"=== RUN   TestRecall\n=== RUN   TestRecall/float32\n=== RUN   TestRecall/int8/filtered\n--- PASS: TestRecall (0.00s)\n    --- PASS: TestRecall/float32 (0.00s)\n    --- PASS: TestRecall/int8/filtered (0.00s)\n" +
		"=== RUN   TestPlain\n--- PASS: TestPlain (0.00s)\n" +
		"=== RUN   TestSkipped\n=== RUN   TestSkipped/uint8\n    x_test.go:3: not here\n--- SKIP: TestSkipped (0.00s)\n    --- SKIP: TestSkipped/uint8 (0.00s)\n" +
		"=== RUN   TestBroken\n=== RUN   TestBroken/int8\n    x_test.go:4: wrong rows\n--- FAIL: TestBroken (0.00s)\n    --- FAIL: TestBroken/int8 (0.00s)\n"
	got, rc := runBundle(t, bundle(t, probeAllOK, binary{"safe_x", "cgocheck2", out, 1}))
	if rc != 1 {
		t.Errorf("exit status %d, want 1:\n%s", rc, got)
	}
	contains(t, got, "int8/uint8\n",
		"example.com/safe_x                            cgocheck2        3       1            0        1           2\n")
}

// TestProgramsInBin: run.sh points the tests at the programs in bin/.
func TestProgramsInBin(t *testing.T) {
	dir := bundle(t, probeAllOK, binary{"examples_serving", "race", passAndSkip, 0})
	for _, p := range []string{"cbench", "readme-program"} {
		if err := os.WriteFile(filepath.Join(dir, "bin", p), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	out, rc := runBundle(t, dir, "-test.run", "OK")
	if rc != 0 {
		t.Errorf("exit status %d, want 0:\n%s", rc, out)
	}
	contains(t, out, "PASS: every test passed or skipped\n")
	env, err := os.ReadFile(filepath.Join(dir, "env.txt"))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(env))
	if len(f) != 9 || f[2] != filepath.Join(dir, "bin", "cbench") || f[3] != filepath.Join(dir, "bin", "readme-program") || f[5] != "-test.count=1" || f[6] != "-test.timeout=10m" || f[7] != "-test.run" || f[8] != "OK" {
		t.Errorf("the binary ran as %q", env)
	}
}

// TestRealFailures: what is not a refusal of a type the probe found
// refused is a failure.
func TestRealFailures(t *testing.T) {
	mixed := strings.Replace(int8Refused, "    --- PASS: TestDtypes/float32", "    --- FAIL: TestDtypes/float32", 1)
	mixed = strings.Replace(mixed, "=== RUN   TestDtypes/float32\n", "=== RUN   TestDtypes/float32\n    dtypes_test.go:6: recall 0.2, want >= 0.9\n", 1)
	uint8Refused := strings.Replace(int8Refused, "dtype: 0 and bits: 8", "dtype: 1 and bits: 8", 1)
	noReason := strings.Replace(int8Refused, "Unsupported dataset DLtensor ", "", 1)
	for _, c := range []struct {
		name, probe, out string
		rc               int
	}{
		// the library has int8 by the probe: a real failure
		{"probe says ok", probeAllOK, int8Refused, 1},
		// another subtest failed for another reason
		{"mixed", probeInt8Lacks, mixed, 1},
		// refused uint8, which the probe found there
		{"another type", probeInt8Lacks, uint8Refused, 1},
		// the type's numbers without cuVS's refusal
		{"no refusal", probeInt8Lacks, noReason, 1},
		// a crash (panic: exit status 2) is never a missing type
		{"crash", probeInt8Lacks, int8Refused + "panic: boom\n", 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := bundle(t, c.probe, binary{"safe_cagra", "race", passAndSkip + c.out, c.rc})
			out, rc := runBundle(t, dir)
			if rc != 1 {
				t.Errorf("exit status %d, want 1", rc)
			}
			contains(t, out, "  FAIL example.com/safe_cagra (race): TestDtypes\n", "FAIL: see the failures above\n")
			if strings.Contains(out, "  LACKS ") {
				t.Errorf("counted as a missing type:\n%s", out)
			}
		})
	}
	// A binary that exits non-zero with no test failed (TestMain) fails.
	dir := bundle(t, probeInt8Lacks, binary{"safe", "race", "safetest: cannot load\n", 1})
	out, rc := runBundle(t, dir)
	if rc != 1 {
		t.Errorf("TestMain failed: exit status %d, want 1", rc)
	}
	contains(t, out, "  FAIL example.com/safe (race): exit status 1, no test failed")
}

// TestProbeFails: a probe that cannot load the library tells no type
// missing, and says so; the tests still run.
func TestProbeFails(t *testing.T) {
	dir := bundle(t, probeAllOK, binary{"safe_cagra", "race", passAndSkip + int8Refused, 1})
	if err := os.WriteFile(filepath.Join(dir, "bin", "dtypeprobe"), []byte("#!/bin/sh\necho 'dtypeprobe: no GPU' >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	out, rc := runBundle(t, dir)
	if rc != 1 {
		t.Errorf("exit status %d, want 1", rc)
	}
	contains(t, out, "the probe could not tell every type (exit status 1", "dtypeprobe: no GPU", "  FAIL example.com/safe_cagra (race): TestDtypes\n")
}

// TestMissingLibrary: run.sh refuses a library path that is not there.
func TestMissingLibrary(t *testing.T) {
	dir := bundle(t, probeAllOK, binary{"safe", "race", passAndSkip, 0})
	missing := filepath.Join(t.TempDir(), "nowhere", "libcuvs_c.so")
	out, err := exec.Command("sh", filepath.Join(dir, "run.sh"), missing).CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || string(out) != "library not found: "+missing+"\n" {
		t.Errorf("%v, %q: want exit status 2 and the path", err, out)
	}
}
