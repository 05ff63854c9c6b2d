package cbench_test

import (
	"bytes"
	"errors"
	"fmt"
	"os/exec"
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

// TestAgainstDouble is the CI smoke test of the C program: it runs against
// the ABI test double (the numbers mean nothing) and must print a sane table
// and leave the double with no violation and nothing alive.
func TestAgainstDouble(t *testing.T) {
	bin := cbench.Build(t)
	lib := cuvsdouble.Build(t)
	for _, tc := range []struct {
		name string
		args []string
		want []string // in the comments
	}{
		{"pool", []string{"-goroutines", "1,2,4"}, []string{"memory pool on (10%..60% of device memory)", "persistent kernel off"}},
		{"no-pool-persistent-batch", []string{"-goroutines", "3", "-pool", "off", "-persistent=on", "--batch", "4"},
			[]string{"memory pool off", "persistent kernel on", "batch 4"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, err := run(t, bin, append(append([]string{"-lib", lib}, small...), tc.args...)...)
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
			for _, w := range append(tc.want, "cuvsdouble: 0 violations, 0 objects live at exit") {
				if !strings.Contains(comments, w) {
					t.Errorf("the output does not say %q", w)
				}
			}
		})
	}
}

func TestBadFlags(t *testing.T) {
	bin := cbench.Build(t)
	for _, args := range [][]string{
		{"-n", "10"}, // not more than twice the graph degree
		{"-goroutines", "1,,2"},
		{"-goroutines", "0"},
		{"-pool", "maybe"},
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
