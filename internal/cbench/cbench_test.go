package cbench_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cuvs-go/cuvs/internal/cbench"
	"github.com/cuvs-go/cuvs/internal/cuvsdouble"
)

// small is a workload the double (exact kNN on the CPU) runs in a blink.
var small = []string{"-n", "600", "-dim", "16", "-k", "5", "-itopk", "32", "-graph-degree", "8", "-seconds", "0.15"}

func run(t *testing.T, bin string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var o, e bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	return o.String(), e.String(), err
}

// release is the release of the double cuvsdouble.Build builds here:
// $CUVSDOUBLE_RELEASE, else 26.06.
func release() string {
	if r := os.Getenv(cuvsdouble.ReleaseEnv); r != "" {
		return r
	}
	return cuvsdouble.Release2606
}

// TestAgainstDouble is the CI smoke test of the C program: it runs against
// the ABI test double of either release (CUVSDOUBLE_RELEASE; the numbers
// mean nothing) and must name the double's version, print a sane table and
// leave the double with no violation and nothing alive (on 26.08 that
// includes the padded dataset the index is built from, which must outlive
// the index and then be destroyed). The persistent kernel is refused, as
// the Go program refuses it.
func TestAgainstDouble(t *testing.T) {
	bin := cbench.Build(t)
	lib := cuvsdouble.Build(t)
	rel := release()
	major, minor, patch, ok := cuvsdouble.ReleaseVersion(rel)
	if !ok {
		t.Fatalf("%s=%q: not a release of the double", cuvsdouble.ReleaseEnv, rel)
	}
	version := fmt.Sprintf("cuVS %d.%02d.%02d from %s", major, minor, patch, lib)
	for _, tc := range []struct {
		name    string
		args    []string
		want    []string // in the comments
		refused string   // the exit status is 1 and stderr says this
	}{
		{"pool", []string{"-goroutines", "1,2,4"}, []string{"memory pool on (10%..60% of device memory)", "persistent kernel off"}, ""},
		{"no-pool-batch", []string{"-goroutines", "3", "-pool", "off", "--batch", "4"},
			[]string{"memory pool off", "persistent kernel off", "batch 4, algo auto"}, ""},
		{"multi", []string{"-goroutines", "2", "-algo", "multi"}, []string{"batch 1, algo multi"}, ""},
		{"single", []string{"-goroutines", "2", "-algo=single"}, []string{"batch 1, algo single"}, ""},
		{"no-pool-persistent-batch", []string{"-goroutines", "3", "-pool", "off", "-persistent=on", "--batch", "4"},
			[]string{"memory pool off", "persistent kernel on", "batch 4"}, "-persistent on: the persistent kernel is refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, err := run(t, bin, append(append([]string{"-lib", lib}, small...), tc.args...)...)
			if tc.refused != "" {
				var ee *exec.ExitError
				if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(errOut, tc.refused) || !strings.Contains(errOut, lib) {
					t.Errorf("%v, stdout %q, stderr %q; want exit status 1 and %q", err, out, errOut, tc.refused)
				}
				return
			}
			if err != nil {
				t.Fatalf("%v\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
			}
			t.Logf("\n%s", out)
			tab, err := cbench.Parse(out)
			if err != nil {
				t.Fatal(err)
			}
			var counts []int
			for _, r := range tab.Rows {
				counts = append(counts, r.Goroutines)
				if err := r.Sane(); err != nil {
					t.Error(err)
				}
			}
			want := tc.args[slices.Index(tc.args, "-goroutines")+1]
			if got := strings.Trim(strings.Join(strings.Fields(fmt.Sprint(counts)), ","), "[]"); got != want {
				t.Errorf("rows for goroutines %s, want %s", got, want)
			}
			comments := strings.Join(tab.Comments, "\n")
			for _, w := range append(tc.want, version, "cuvsdouble: 0 violations, 0 objects live at exit") {
				if !strings.Contains(comments, w) {
					t.Errorf("the output does not say %q", w)
				}
			}
		})
	}
}

// TestOtherRelease: a library of a release other than 26.06 and 26.08 is
// refused by name and version, before any function of either release is
// looked up (the tiny library here exports only cuvsVersionGet and
// cuvsGetLastErrorText).
func TestOtherRelease(t *testing.T) {
	bin := cbench.Build(t)
	dir := t.TempDir()
	src := filepath.Join(dir, "tiny.c")
	if err := os.WriteFile(src, []byte(`#include <stdint.h>
const char* cuvsGetLastErrorText(void) { return ""; }
int cuvsVersionGet(uint16_t* major, uint16_t* minor, uint16_t* patch)
{
  *major = 26;
  *minor = 10;
  *patch = 0;
  return 1; /* CUVS_SUCCESS */
}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	lib := filepath.Join(dir, "libcuvs_c.so")
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "gcc"
	}
	if out, err := exec.Command(cc, "-shared", "-fPIC", "-o", lib, src).CombinedOutput(); err != nil {
		t.Fatalf("building the tiny library: %v\n%s", err, out)
	}
	out, errOut, err := run(t, bin, append([]string{"-lib", lib}, small...)...)
	var ee *exec.ExitError
	want := "cbench: " + lib + " is cuVS 26.10.00; this program speaks cuVS 26.06 and 26.08"
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(errOut, want) || out != "" {
		t.Errorf("%v, stdout %q, stderr %q; want exit status 1 and %q", err, out, errOut, want)
	}
}

func TestBadFlags(t *testing.T) {
	bin := cbench.Build(t)
	for _, args := range [][]string{
		{"-n", "10"}, // not more than twice the graph degree
		{"-goroutines", "1,,2"},
		{"-goroutines", "0"},
		{"-pool", "maybe"},
		{"-algo", "fast"},
		{"-dtype", "float16"},
		{"-seconds", "0"},
		{"-nope", "1"},
		{"-k"},
		{"stray"},
	} {
		_, errOut, err := run(t, bin, args...)
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(errOut, "usage: cbench") {
			t.Errorf("%v: %v, stderr %q; want exit status 2 and the usage", args, err, errOut)
		}
	}
	if out, _, err := run(t, bin, "-h"); err != nil || !strings.Contains(out, "usage: cbench") {
		t.Errorf("-h: %v, %q", err, out)
	}
}

func TestMissingLibrary(t *testing.T) {
	bin := cbench.Build(t)
	_, errOut, err := run(t, bin, "-lib", t.TempDir()+"/libcuvs_c.so")
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(errOut, "cannot open libcuvs_c") {
		t.Errorf("%v, stderr %q; want exit status 1 and a clear message", err, errOut)
	}
}

func TestParse(t *testing.T) {
	out := "# serving (c): x\n" +
		"goroutines          QPS     p50_us     p99_us     max_us   searches\n" +
		"         1       2900.5      331.0      439.2      512.0      14500\n" +
		"        32      81400.0      378.1      450.0      901.7     407000\n" +
		"# cuvsdouble: 0 violations\n"
	tab, err := cbench.Parse(out)
	if err != nil {
		t.Fatal(err)
	}
	want := []cbench.Row{{1, 2900.5, 331, 439.2, 512, 14500}, {32, 81400, 378.1, 450, 901.7, 407000}}
	if !slices.Equal(tab.Rows, want) || len(tab.Comments) != 2 || tab.Comments[0] != "serving (c): x" {
		t.Errorf("got %+v", tab)
	}
	for _, r := range want {
		if err := r.Sane(); err != nil {
			t.Error(err)
		}
	}
	if err := (cbench.Row{Goroutines: 1, QPS: 1, P50: 5, P99: 4, Max: 6, Searches: 1}).Sane(); err == nil {
		t.Error("p50 > p99 passed as sane")
	}
	for _, bad := range []string{
		"",
		"# only comments\n",
		"goroutines QPS\n",
		"goroutines          QPS     p50_us     p99_us     max_us   searches\n1 2 3\n",
		"goroutines          QPS     p50_us     p99_us     max_us   searches\n1 x 3 4 5 6\n",
	} {
		if _, err := cbench.Parse(bad); err == nil {
			t.Errorf("Parse(%q) succeeded", bad)
		}
	}
}
