package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cuvs-go/cuvs/internal/cuvsdouble"
	"github.com/cuvs-go/cuvs/internal/safetest"
)

// childEnv makes the test binary run memest's main instead of the tests:
// each run loads the library itself (safe.Load once a process, with the
// run's cap), so each is a process of its own.
const childEnv = "MEMEST_TEST_CHILD"

var doubleLib string // the double the runs load, built as CUVSDOUBLE_RELEASE says

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		main()
		os.Exit(0)
	}
	if os.Getenv(safetest.LibraryEnv) == "" {
		path, cleanup, err := cuvsdouble.BuildFile()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		doubleLib = path
		code := m.Run()
		cleanup()
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// memest runs memest with args on the double, whose device has devBytes,
// and returns its output and its RESULT line's fields.
func memest(t *testing.T, devBytes int64, args ...string) (string, map[string]string, error) {
	t.Helper()
	if doubleLib == "" {
		t.Skipf("%s is set: the runs' small caps are the double's (a device's are run.sh's)", safetest.LibraryEnv)
	}
	cmd := exec.Command(os.Args[0], append([]string{"-lib", doubleLib, "-out", t.TempDir()}, args...)...)
	cmd.Env = append(os.Environ(), childEnv+"=1", fmt.Sprintf("CUVSDOUBLE_DEVICE_BYTES=%d", devBytes))
	out, err := cmd.CombinedOutput()
	fields := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		rest, ok := strings.CutPrefix(line, "RESULT ")
		if !ok {
			continue
		}
		if err := parseResult(rest, fields); err != nil {
			t.Errorf("RESULT %s: %v", rest, err)
		}
	}
	return string(out), fields, err
}

// parseResult reads key=value pairs separated by spaces, a value quoted
// as Go quotes it when it starts with a quote.
func parseResult(s string, into map[string]string) error {
	for s = strings.TrimSpace(s); s != ""; s = strings.TrimSpace(s) {
		k, rest, ok := strings.Cut(s, "=")
		if !ok {
			return fmt.Errorf("%q has no =", s)
		}
		if strings.HasPrefix(rest, `"`) {
			q, err := strconv.QuotedPrefix(rest)
			if err != nil {
				return err
			}
			v, _ := strconv.Unquote(q)
			into[k], s = v, rest[len(q):]
			continue
		}
		v, after, _ := strings.Cut(rest, " ")
		into[k], s = v, after
	}
	return nil
}

func num(t *testing.T, f map[string]string, key string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(f[key], 64)
	if err != nil {
		t.Fatalf("RESULT %s=%q: %v", key, f[key], err)
	}
	return v
}

// TestOvercap runs every -mode overcap algorithm at a size the double
// builds in a second: each must build under its cap (the pool's, or the
// device's with -capby device), stay within it by every measure taken,
// and find the exact neighbours (recall against brute force over the
// rows, after the host refinement where it applies). The sizes are the
// double's: IVF-PQ's and IVF-SQ's host batches of 65,536 rows, and the
// double's O(n²) CAGRA graph, keep the rows under the cap for those;
// IVF-Flat and CAGRA-Q run at twice the cap.
func TestOvercap(t *testing.T) {
	const mib = 1 << 20
	cases := []struct {
		name, algo string
		dev        int64
		args       []string
		rowsMin    int64 // host bytes at least this many times the cap (0: any)
	}{
		{"ivfpq", "ivfpq", 256 * mib, []string{"-cap", "33554432", "-hostrows", "20000", "-dim", "32"}, 0},
		{"ivfpq-device", "ivfpq", 64 * mib, []string{"-capby", "device", "-cap", "33554432", "-hostrows", "20000", "-dim", "32"}, 0},
		{"ivfsq", "ivfsq", 256 * mib, []string{"-cap", "33554432", "-hostrows", "20000", "-dim", "32"}, 0},
		{"ivfflat", "ivfflat", 256 * mib, []string{"-cap", "8388608", "-dim", "32"}, 0},
		{"cagra", "cagra", 256 * mib, []string{"-cap", "2097152", "-dim", "256"}, 2},
		{"hnsw-ace", "hnsw-ace", 256 * mib, []string{"-cap", "67108864", "-hostrows", "4096", "-dim", "64"}, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			args := append([]string{"-mode", "overcap", "-algo", c.algo, "-queries", "100"}, c.args...)
			out, f, err := memest(t, c.dev, args...)
			if c.algo == "cagra" && f["release"] != "26.06" {
				// 26.08: no CAGRA index over rows larger than the cap; the
				// bindings refuse the build before cuVS, and the run says so
				if err != nil || f["possible"] != "false" || f["ok"] != "false" || !strings.Contains(f["check"], "refused before cuVS") {
					t.Fatalf("%v; RESULT %v, want not possible and refused before cuVS:\n%s", err, f, out)
				}
				return
			}
			if err != nil || f["ok"] != "true" || f["within"] != "true" {
				t.Fatalf("%v; RESULT %v, want built within the cap:\n%s", err, f, out)
			}
			capB := num(t, f, "cap")
			if c.rowsMin > 0 && num(t, f, "host_bytes") < float64(c.rowsMin)*capB {
				t.Errorf("host bytes %s, want at least %d× the cap %s", f["host_bytes"], c.rowsMin, f["cap"])
			}
			for _, k := range []string{"pool_build", "tracked_build", "tracked_all", "sampled"} {
				if v := num(t, f, k); v > capB {
					t.Errorf("%s %v over the cap %v", k, v, capB)
				}
			}
			if c.args[1] == "device" {
				if num(t, f, "sampled") < 0 || f["pool_build"] != "-1" {
					t.Errorf("-capby device: sampled %s, pool %s: want a sampled peak and no pool", f["sampled"], f["pool_build"])
				}
			} else if num(t, f, "pool_build") <= 0 {
				t.Errorf("pool_build %s: want the pool's size", f["pool_build"])
			}
			rec, ref := num(t, f, "recall"), num(t, f, "refined")
			best := max(rec, ref)
			if best < 0.9 {
				t.Errorf("recall %v, refined %v: want 0.9 or more from the better", rec, ref)
			}
			if ref >= 0 && ref < rec {
				t.Errorf("refined recall %v below the unrefined %v", ref, rec)
			}
			if c.algo == "ivfflat" {
				// the plain Build of all the rows is refused before cuVS,
				// and that of the rows the recipe fits fails (before cuVS,
				// or in its pool); the recipe's rows are fewer than the cap
				// holds
				if strings.Count(out, "refused before calling cuVS") < 1 {
					t.Errorf("no plain build refused before cuVS:\n%s", out)
				}
				if n := strings.Count(out, "plain ivfflat.Build of"); n != 2 || strings.Count(out, "out of device memory")+strings.Count(out, "Maximum pool size exceeded") < 2 {
					t.Errorf("want both plain builds to fail for memory:\n%s", out)
				}
				if hb := num(t, f, "host_bytes"); hb >= capB {
					t.Errorf("IVF-Flat's recipe built %v bytes of rows, want fewer than the cap %v", hb, capB)
				}
			}
		})
	}
}

// TestOvercapArgs: bad arguments fail the run with a message.
func TestOvercapArgs(t *testing.T) {
	for _, args := range [][]string{
		{"-mode", "overcap", "-algo", "bruteforce"},
		{"-mode", "overcap", "-capby", "nothing", "-cap", "33554432", "-hostrows", "100", "-dim", "8"},
		{"-mode", "overcap", "-refine", "0", "-cap", "33554432", "-hostrows", "100", "-dim", "8"},
	} {
		out, _, err := memest(t, 64<<20, args...)
		if err == nil || !strings.Contains(out, "memest:") {
			t.Errorf("%v: %v, want a failure naming memest:\n%s", args, err, out)
		}
	}
}

// TestTrackedPeak reads a CSV in raft's resource_monitor format: the
// device sources' peaks summed per row, the largest row, optionally up to
// a time; host, pinned and managed memory left out.
func TestTrackedPeak(t *testing.T) {
	const csv = `timestamp_us,host_current,host_peak,host_total_alloc,host_total_freed,device_current,device_peak,device_total_alloc,device_total_freed,workspace_current,workspace_peak,workspace_total_alloc,workspace_total_freed,large_workspace_current,large_workspace_peak,large_workspace_total_alloc,large_workspace_total_freed,managed_current,managed_peak,managed_total_alloc,managed_total_freed,nvtx_depth,nvtx_range
100,9000,9000,9000,0,10,50,50,40,0,0,0,0,0,0,0,0,0,9999,9999,9999,1,"ivf_pq::build(1000, 8)"
200,0,0,9000,9000,300,400,450,150,20,70,90,70,5,5,5,0,0,0,0,0,2,"cagra::build(64, 32)"
5000,0,0,9000,9000,0,300,450,450,0,0,90,90,0,0,5,5,0,0,0,0,0,""
`
	path := filepath.Join(t.TempDir(), "t.csv")
	if err := os.WriteFile(path, []byte(csv), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		until int64
		want  int64
	}{{-1, 475}, {150, 50}, {200, 475}, {99, 0}} {
		got, ok, err := trackedPeak(path, c.until)
		if err != nil || got != c.want || ok != (c.until < 0 || c.until >= 100) {
			t.Errorf("until %d: %d, %v, %v; want %d", c.until, got, ok, err, c.want)
		}
	}
	empty := filepath.Join(t.TempDir(), "e.csv")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := trackedPeak(empty, -1); ok || err != nil {
		t.Errorf("an empty file (the double's): ok %v, err %v; want no samples, no error", ok, err)
	}
	for _, bad := range []string{"time,device_peak\n1,2\n", "timestamp_us,host_peak\n1,2\n", "timestamp_us,device_peak\nx,2\n", "timestamp_us,device_peak\n1,y\n"} {
		if err := os.WriteFile(path, []byte(bad), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, _, err := trackedPeak(path, -1); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
