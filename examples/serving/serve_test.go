package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/internal/cbench"
	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/batch"
	"github.com/cuvs-go/cuvs/safe/cagra"
)

// mainEnv makes the test binary run the program's main instead of the
// tests, so that tests can run the program in a process of its own.
const mainEnv = "CUVS_SERVING_TEST_MAIN"

// The tests run against the ABI test double, never a real libcuvs_c: the
// numbers they see mean nothing, the code paths are the real ones.
func TestMain(m *testing.M) {
	if os.Getenv(mainEnv) == "1" {
		main()
		os.Exit(0)
	}
	safetest.Main(m)
}

// tiny is a workload the double (exact kNN on the CPU) runs in a blink.
func tiny() config {
	return config{rows: 600, dim: 16, goroutines: []int{1, 2, 4}, duration: 150 * time.Millisecond,
		pool: poolOn, k: 5, itopk: 32, graphDegree: 8, batch: 1, seed: 42, dtype: dlpack.Float32}
}

var tinyFlags = []string{"-n", "600", "-dim", "16", "-k", "5", "-itopk", "32", "-graph-degree", "8", "-seconds", "0.15"}

func checkTable(t *testing.T, out string, goroutines []int) cbench.Table {
	t.Helper()
	tab, err := cbench.Parse(out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var got []int
	for _, r := range tab.Rows {
		got = append(got, r.Goroutines)
		if err := r.Sane(); err != nil {
			t.Error(err)
		}
	}
	if !slices.Equal(got, goroutines) {
		t.Errorf("rows for %v goroutines, want %v", got, goroutines)
	}
	return tab
}

// TestServe is the CI smoke test of the program's core, in this process: a
// few goroutines for a fraction of a second each, a sane table, nothing
// leaked and no misuse recorded by the double.
func TestServe(t *testing.T) {
	safetest.Check(t)
	for _, persistent := range []bool{false, true} {
		t.Run(fmt.Sprint("persistent=", persistent), func(t *testing.T) {
			c := tiny()
			c.persistent = persistent
			if persistent {
				c.goroutines, c.batch = []int{3}, 4
			}
			var out bytes.Buffer
			err := run(c, &out)
			if persistent {
				// refused: it stalled on the real library (and crashed on 26.08)
				if err == nil || !strings.Contains(err.Error(), cagra.PersistentRefused) {
					t.Fatalf("a persistent search on %s: %v, want the refusal", safe.Release(), err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("\n%s", out.String())
			tab := checkTable(t, out.String(), c.goroutines)
			if want := fmt.Sprintf("persistent kernel %s", map[bool]string{false: "off", true: "on"}[persistent]); !strings.Contains(strings.Join(tab.Comments, "\n"), want) {
				t.Errorf("the output does not say %q", want)
			}
		})
	}
}

// TestServeBatch is the CI smoke test of -mode batch, in this process: up to
// a few hundred goroutines sharing one Batcher, a sane table, one line of
// batch sizes per row, nothing leaked.
func TestServeBatch(t *testing.T) {
	safetest.Check(t)
	c := tiny()
	c.batched, c.maxBatch, c.maxWait, c.slots, c.wait = true, 64, 50*time.Microsecond, 3, batch.WaitSleep
	c.goroutines = []int{1, 16, 256}
	ctl := safetest.Control()
	var sleeps0 int64
	if ctl != nil {
		sleeps0, _ = ctl.EventWaits()
	}
	var out bytes.Buffer
	if err := run(c, &out); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", out.String())
	tab := checkTable(t, out.String(), c.goroutines)
	all := strings.Join(tab.Comments, "\n")
	if !strings.Contains(all, "mode batch: one batch.Batcher (max batch 64, max wait 50µs, 3 slots, wait sleep, device buffers false)") {
		t.Errorf("the output does not describe the Batcher")
	}
	sizes := regexp.MustCompile(`(?m)^batches at (\d+) goroutines: (\d+) searched \((\d+) multi-CTA\), mean ([0-9.]+) queries, p99 (\d+); mean queue ([0-9.]+) µs per request; per batch: handoff ([0-9.]+), stage ([0-9.]+), search ([0-9.]+), deliver ([0-9.]+) µs$`)
	m := sizes.FindAllStringSubmatch(all, -1)
	if len(m) != len(c.goroutines) {
		t.Fatalf("%d lines of batch sizes, want %d", len(m), len(c.goroutines))
	}
	cpu := regexp.MustCompile(`(?m)^cpu at (\d+) goroutines: ([0-9.]+) cores busy \(user ([0-9.]+), system ([0-9.]+)\)$`)
	if n := len(cpu.FindAllStringSubmatch(all, -1)); n != len(c.goroutines) {
		t.Errorf("%d lines of CPU use, want %d", n, len(c.goroutines))
	}
	total := 0
	for i, l := range m {
		g, _ := strconv.Atoi(l[1])
		batches, _ := strconv.Atoi(l[2])
		total += batches
		multi, _ := strconv.Atoi(l[3])
		mean, _ := strconv.ParseFloat(l[4], 64)
		p99, _ := strconv.Atoi(l[5])
		if multi < 0 || multi > batches {
			t.Errorf("%q: more multi-CTA batches than batches", l[0])
		}
		if search, _ := strconv.ParseFloat(l[9], 64); search <= 0 {
			t.Errorf("%q: no search time accounted", l[0])
		}
		if g != c.goroutines[i] || mean < 1 || mean > float64(min(g, c.maxBatch)) || p99 < 1 || p99 > min(g, c.maxBatch) {
			t.Errorf("%q: sizes out of range for %d goroutines and max batch %d", l[0], g, c.maxBatch)
		}
	}
	if ctl != nil { // -wait sleep: every batch (and each warm-up search) waited on a blocking-sync event
		if sleeps, _ := ctl.EventWaits(); sleeps-sleeps0 < int64(total) {
			t.Errorf("-wait sleep: %d blocking-sync event waits for %d batches", sleeps-sleeps0, total)
		}
	}
}

// runMain runs the program in a process of its own (this test binary,
// running main), against the double.
func runMain(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var o, e bytes.Buffer
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), mainEnv+"=1")
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	return o.String(), e.String(), err
}

// TestProgram runs the program as a user does, with its flags, in its own
// process (so that -pool off really loads without the pool).
func TestProgram(t *testing.T) {
	lib := safetest.LibraryPath()
	out, errOut, err := runMain(t, append([]string{"-lib", lib, "-pool", "off", "-goroutines", "2,1"}, tinyFlags...)...)
	if err != nil {
		t.Fatalf("%v\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
	}
	tab := checkTable(t, out, []int{2, 1})
	if !strings.Contains(tab.Comments[0], "memory pool off") || !strings.Contains(tab.Comments[0], lib) {
		t.Errorf("first line %q: want the library and the pool", tab.Comments[0])
	}

	out, errOut, err = runMain(t, append([]string{"-lib", lib, "-mode", "batch", "-goroutines", "1,32", "-max-batch", "8", "-batch", "2"}, tinyFlags...)...)
	if err != nil {
		t.Fatalf("-mode batch: %v\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
	}
	checkTable(t, out, []int{1, 32})

	// -pool async: cudaMallocAsync on 26.08, refused by a 26.06 library.
	out, errOut, err = runMain(t, append([]string{"-lib", lib, "-pool", "async", "-goroutines", "2"}, tinyFlags...)...)
	if v, verr := safe.LibraryVersion(); verr != nil {
		t.Fatal(verr)
	} else if v.Minor < 8 {
		if err == nil || !strings.Contains(errOut, "cuvsRMMAsyncMemoryResourceEnable") {
			t.Errorf("-pool async on cuVS %v: %v, stderr %q; want a refusal naming the function", v, err, errOut)
		}
	} else if err != nil {
		t.Errorf("-pool async: %v\nstderr:\n%s", err, errOut)
	} else if tab := checkTable(t, out, []int{2}); !strings.Contains(tab.Comments[0], "memory pool async (cudaMallocAsync)") {
		t.Errorf("first line %q: want the async resource", tab.Comments[0])
	}

	// -algo and -recall: the kernel named, and each kernel's recall against
	// brute force (CAGRA on this tiny index finds most true neighbors).
	out, errOut, err = runMain(t, append([]string{"-lib", lib, "-algo", "multi", "-recall", "40", "-goroutines", "2"}, tinyFlags...)...)
	if err != nil {
		t.Fatalf("-algo multi: %v\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
	}
	tab = checkTable(t, out, []int{2})
	all := strings.Join(tab.Comments, "\n")
	if !strings.Contains(all, "batch 1, algo multi,") {
		t.Errorf("the output does not name the kernel:\n%s", all)
	}
	rec := regexp.MustCompile(`(?m)^recall@5 of 40 queries against brute force, one by one and in one batch: single ([0-9.]+), ([0-9.]+); multi ([0-9.]+), ([0-9.]+); auto ([0-9.]+), ([0-9.]+)$`).FindStringSubmatch(all)
	if rec == nil {
		t.Fatalf("no recall line:\n%s", all)
	}
	for _, v := range rec[1:] {
		if r, err := strconv.ParseFloat(v, 64); err != nil || r < 0.8 || r > 1 {
			t.Errorf("recall %s in %q, want 0.8..1", v, rec[0])
		}
	}

	for _, args := range [][]string{{"-pool", "maybe"}, {"-algo", "fast"}, {"-recall", "-1"}, {"-goroutines", "1,x"}, {"-goroutines", "1025"}, {"-seconds", "0"}, {"-n", "10"}, {"-k", "0"},
		{"-mode", "x"}, {"-mode", "batch", "-batch", "9", "-max-batch", "8"}, {"-dtype", "float16"}, {"-max-wait-us", "-1"}, {"-slots", "0"}, {"-wait", "auto"}, {"-block", "100"}, {"-nope"}, {"stray"}} {
		_, errOut, err := runMain(t, args...)
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 {
			t.Errorf("%v: %v (stderr %q), want exit status 2", args, err, errOut)
		}
	}
	_, errOut, err = runMain(t, "-lib", t.TempDir()+"/libcuvs_c.so")
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(errOut, "serving:") {
		t.Errorf("a missing library: %v (stderr %q), want exit status 1 and a message", err, errOut)
	}
}

// TestProgramDtypes runs the program with -dtype int8 and uint8, per-call
// and batched, as gpu-table.sh's DTYPES rows do: the index line names the
// type and the scale, the table is sane, and each kernel's recall against
// brute force over the same values holds (the integer index is the float32
// one scaled). A library built without the type (the float32-only 26.06.00
// build) fails it with its own refusal, which internal/gputest/run.sh
// counts as the library's lack.
func TestProgramDtypes(t *testing.T) {
	lib := safetest.LibraryPath()
	for _, c := range []struct{ dtype, scale string }{{"int8", "-128..127"}, {"uint8", "0..255"}} {
		t.Run(c.dtype, func(t *testing.T) {
			index := fmt.Sprintf("index: CAGRA 600 x 16 %s (uniform random, seed 42, scaled onto %s)", c.dtype, c.scale)
			out, errOut, err := runMain(t, append([]string{"-lib", lib, "-dtype", c.dtype, "-recall", "40", "-goroutines", "2,1"}, tinyFlags...)...)
			if err != nil {
				t.Fatalf("%v\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
			}
			t.Logf("\n%s", out)
			tab := checkTable(t, out, []int{2, 1})
			all := strings.Join(tab.Comments, "\n")
			if !strings.Contains(all, index) {
				t.Errorf("no line %q:\n%s", index, all)
			}
			rec := regexp.MustCompile(`(?m)^recall@5 of 40 queries against brute force, one by one and in one batch: single ([0-9.]+), ([0-9.]+); multi ([0-9.]+), ([0-9.]+); auto ([0-9.]+), ([0-9.]+)$`).FindStringSubmatch(all)
			if rec == nil {
				t.Fatalf("no recall line:\n%s", all)
			}
			for _, v := range rec[1:] {
				if r, err := strconv.ParseFloat(v, 64); err != nil || r < 0.8 || r > 1 {
					t.Errorf("recall %s in %q, want 0.8..1", v, rec[0])
				}
			}
			out, errOut, err = runMain(t, append([]string{"-lib", lib, "-dtype", c.dtype, "-mode", "batch", "-goroutines", "1,32", "-max-batch", "8", "-batch", "2"}, tinyFlags...)...)
			if err != nil {
				t.Fatalf("-mode batch: %v\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
			}
			tab = checkTable(t, out, []int{1, 32})
			if all := strings.Join(tab.Comments, "\n"); !strings.Contains(all, index) || !strings.Contains(all, "mode batch: one batch.Batcher") {
				t.Errorf("-mode batch: the output does not describe the index or the Batcher:\n%s", all)
			}
		})
	}
}

// CbenchEnv names a built cbench (make cbench): the GPU test bundle
// (internal/gputest) carries one, since the machine that runs the bundle
// has neither the module's sources nor, maybe, a C compiler; run.sh sets it.
const CbenchEnv = "CUVS_GO_CBENCH"

// cbenchProgram returns $CUVS_GO_CBENCH, or cbench built from the module's
// sources; it skips t where neither is there.
func cbenchProgram(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv(CbenchEnv); bin != "" {
		if _, err := os.Stat(bin); err != nil {
			t.Fatalf("%s: %v", CbenchEnv, err)
		}
		return bin
	}
	// cbench.Build compiles against the module's generated/cuvs_decls.h.
	if _, err := os.Stat("../../generated/cuvs_decls.h"); err != nil {
		t.Skipf("no %s and not in the module's source tree (%v): cbench is built by make cbench, and carried by the GPU test bundle", CbenchEnv, err)
	}
	return cbench.Build(t)
}

// TestGoAndCAgree runs the Go program and the C one (internal/cbench) with
// the same flags against the double (of either release, or the library
// under test): they must describe the same workload in the same words and
// print the same table, so that compare.sh can put them side by side; for
// each -dtype.
func TestGoAndCAgree(t *testing.T) {
	bin := cbenchProgram(t)
	// Each -dtype: the integer types build the same values scaled, in both.
	for _, dtype := range []string{"float32", "int8", "uint8"} {
		t.Run(dtype, func(t *testing.T) { goAndCAgree(t, bin, dtype) })
	}
}

func goAndCAgree(t *testing.T, bin, dtype string) {
	args := append([]string{"-lib", safetest.LibraryPath(), "-dtype", dtype, "-goroutines", "1,3", "-batch", "2"}, tinyFlags...)
	goOut, errOut, err := runMain(t, args...)
	if err != nil {
		t.Fatalf("go: %v\n%s", err, errOut)
	}
	var o, e bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = &o, &e
	if err := cmd.Run(); err != nil {
		t.Fatalf("c: %v\n%s", err, e.String())
	}
	cOut := o.String()
	t.Logf("go:\n%s\nc:\n%s", goOut, cOut)
	gt, ct := checkTable(t, goOut, []int{1, 3}), checkTable(t, cOut, []int{1, 3})
	times := regexp.MustCompile(`[0-9.]+ s\b`)
	for i := range 4 { // library and pool, index, search, warm-up
		g := times.ReplaceAllString(strings.Replace(gt.Comments[i], "(go)", "(c)", 1), "_ s")
		c := times.ReplaceAllString(ct.Comments[i], "_ s")
		if i == 1 { // the build time is "_ s"; the rest must match
			g, c = strings.TrimSuffix(g, "_ s"), strings.TrimSuffix(c, "_ s")
		}
		if g != c {
			t.Errorf("comment %d differs:\ngo: %s\nc:  %s", i, g, c)
		}
	}
	if !strings.Contains(gt.Comments[1], "x 16 "+dtype+" (uniform random") {
		t.Errorf("the index line does not name %s: %s", dtype, gt.Comments[1])
	}
	// The double reports on itself at exit; another library does not.
	if !safetest.Conformance() && !slices.ContainsFunc(ct.Comments, func(s string) bool { return s == "cuvsdouble: 0 violations, 0 objects live at exit" }) {
		t.Errorf("c: the double did not report a clean run: %q", ct.Comments)
	}
}

// TestSearchesRunInParallel checks that no lock is held across the C call:
// with every call on a Resources made to take 1 ms (the double's call delay
// standing in for GPU time), 4 goroutines must get through well over twice
// the searches of one (4 times, if nothing serializes them).
func TestSearchesRunInParallel(t *testing.T) {
	safetest.Check(t)
	ctl := safetest.Double(t, "its control surface")
	ctl.SetCallDelay(time.Millisecond)
	t.Cleanup(func() { ctl.SetCallDelay(0) })
	c := tiny()
	c.duration = 200 * time.Millisecond
	res := safetest.Resources(t)
	idx, _, err := build[float32](res, c)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, idx)
	sp, err := searchParams(c)
	if err != nil {
		t.Fatal(err)
	}
	// Searches that only wait (the call delay) and compute nothing: what is
	// compared is whether they wait at the same time, whatever the CPU
	// load of the machine running the test.
	ctl.SetInstant(true)
	t.Cleanup(func() { ctl.SetInstant(false) })
	one, err := step[float32](idx, &sp, c, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	four, err := step[float32](idx, &sp, c, 4, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("1 goroutine: %d searches (p50 %v); 4 goroutines: %d searches (p50 %v)", one.searches, one.p50, four.searches, four.p50)
	if four.searches <= 2*one.searches {
		t.Errorf("4 goroutines made %d searches, 1 made %d: searches are serialized", four.searches, one.searches)
	}
}

// TestWarmUp checks cagra.Index.WarmUp as the program uses it: one search
// per call (counted where the double can count), its argument checks, and
// ErrClosed after the index's Close. It runs on any library; only the call
// count needs the double.
func TestWarmUp(t *testing.T) {
	safetest.Check(t)
	c := tiny()
	res := safetest.Resources(t)
	idx, _, err := build[float32](res, c)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, idx) // also when the test stops early; Close is idempotent
	sp, err := searchParams(c)
	if err != nil {
		t.Fatal(err)
	}
	ctl := safetest.Control() // nil on another library: no call counts there
	var calls int64
	if ctl != nil {
		calls = ctl.Calls("cuvsCagraSearch")
	}
	for _, nt := range []dlpack.DataType{dlpack.Uint32, dlpack.Int64} {
		if err := idx.WarmUp(res, &sp, 3, c.k, nt); err != nil {
			t.Errorf("%s neighbors: %v", nt, err)
		}
	}
	if ctl != nil {
		if got := ctl.Calls("cuvsCagraSearch") - calls; got != 2 {
			t.Errorf("2 warm-ups made %d searches", got)
		}
	}
	for _, bad := range []struct {
		batch, k int
		nt       dlpack.DataType
	}{{0, 5, dlpack.Uint32}, {1, 0, dlpack.Uint32}, {1, 5, dlpack.Float32}} {
		if err := idx.WarmUp(res, &sp, bad.batch, bad.k, bad.nt); !errors.Is(err, safe.ErrInvalidArgument) {
			t.Errorf("WarmUp(%d, %d, %s): %v, want ErrInvalidArgument", bad.batch, bad.k, bad.nt, err)
		}
	}
	if err := idx.WarmUp(res, &sp, 1, c.rows+1, dlpack.Uint32); !errors.Is(err, safe.ErrInvalidArgument) {
		t.Errorf("k beyond the index's rows: %v, want ErrInvalidArgument", err)
	}
	if err := idx.Close(); err != nil {
		t.Fatal(err)
	}
	if err := idx.WarmUp(res, &sp, 1, c.k, dlpack.Uint32); !errors.Is(err, safe.ErrClosed) {
		t.Errorf("after Close: %v, want ErrClosed", err)
	}
}

func TestWithPersistentKernel(t *testing.T) {
	sp, err := cagra.DefaultSearchParams()
	if err != nil {
		t.Fatal(err)
	}
	p := sp.WithPersistentKernel(0, 0)
	if !p.Persistent || p.Algo != cagra.SingleCTA || p.PersistentLifetime != sp.PersistentLifetime || p.PersistentDeviceUsage != sp.PersistentDeviceUsage {
		t.Errorf("WithPersistentKernel(0, 0) = %+v (from %+v)", p, sp)
	}
	p = sp.WithPersistentKernel(0.5, 0.9)
	if p.PersistentLifetime != 0.5 || p.PersistentDeviceUsage != 0.9 || sp.Persistent {
		t.Errorf("WithPersistentKernel(0.5, 0.9) = %+v; the receiver became %+v", p, sp)
	}
}

func TestParseConfig(t *testing.T) {
	c, err := parseConfig([]string{"-n", "1000", "-goroutines", "2,16", "-seconds", "0.5", "-pool", "off", "-persistent", "on", "-batch", "10", "-lib", "/x.so"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.rows != 1000 || !slices.Equal(c.goroutines, []int{2, 16}) || c.duration != 500*time.Millisecond ||
		c.pool != poolOff || !c.persistent || c.batch != 10 || c.lib != "/x.so" || c.k != 10 || c.itopk != 64 || c.graphDegree != 32 || c.dim != 128 {
		t.Errorf("got %+v", c)
	}
	d, err := parseConfig(nil, io.Discard)
	if err != nil || d.rows != 100000 || !slices.Equal(d.goroutines, []int{1, 8, 32}) || d.pool != poolOn || d.persistent || d.seed != 42 ||
		d.batched || d.maxBatch != batch.DefaultMaxBatch || d.maxWait != batch.DefaultMaxWait || d.slots != batch.DefaultSlots {
		t.Errorf("defaults: %+v, %v", d, err)
	}
	b, err := parseConfig([]string{"-mode", "batch", "-goroutines", "256,1024", "-max-batch", "512", "-max-wait-us", "250", "-slots", "6"}, io.Discard)
	if err != nil || !b.batched || !slices.Equal(b.goroutines, []int{256, 1024}) || b.maxBatch != 512 || b.maxWait != 250*time.Microsecond || b.slots != 6 {
		t.Errorf("-mode batch: %+v, %v", b, err)
	}
	if d.dtype != dlpack.Float32 {
		t.Errorf("default -dtype: %v", d.dtype)
	}
	for _, w := range dtypeWords {
		if e, err := parseConfig([]string{"-dtype", w.w}, io.Discard); err != nil || e.dtype != w.v {
			t.Errorf("-dtype %s: %v, %v", w.w, e.dtype, err)
		}
	}
	if _, err := parseConfig([]string{"-dtype", "int16"}, io.Discard); err == nil || !strings.Contains(err.Error(), "want float32, int8 or uint8") {
		t.Errorf("-dtype int16: %v", err)
	}
	if q := queryBatches(d); q != 64 {
		t.Errorf("query batches for batch 1, dim 128: %d", q)
	}
	if q := queryBatches(config{batch: 10000, dim: 1024}); q != 1 {
		t.Errorf("query batches for batch 10000, dim 1024: %d", q)
	}
}

func TestHistogram(t *testing.T) {
	// Every value falls in a bucket whose middle is within 0.4% of it,
	// and buckets are in order.
	last := -1
	for _, ns := range []uint64{0, 1, 255, 256, 257, 511, 512, 1000, 331_000, 1 << 40, 1<<63 + 12345, ^uint64(0)} {
		i := histIndex(ns)
		if i < 0 || i >= histBuckets || i < last {
			t.Fatalf("%d ns: bucket %d (previous %d)", ns, i, last)
		}
		last = i
		if v := histValue(i); float64(max(v, ns)-min(v, ns)) > 0.004*float64(ns)+0.5 {
			t.Errorf("%d ns: bucket %d shows %d", ns, i, v)
		}
	}
	var h histogram
	if h.percentile(50) != 0 || h.maximum() != 0 {
		t.Error("an empty histogram has a percentile")
	}
	for i := 1; i <= 100; i++ {
		h.record(time.Duration(i) * time.Microsecond)
	}
	near := func(d time.Duration, us float64) bool {
		return d > time.Duration(us*995)*time.Nanosecond && d < time.Duration(us*1005)
	}
	if p := h.percentile(50); !near(p, 50) {
		t.Errorf("p50 = %v, want 50µs", p)
	}
	if p := h.percentile(99); !near(p, 99) {
		t.Errorf("p99 = %v, want 99µs", p)
	}
	if m := h.maximum(); !near(m, 100) {
		t.Errorf("max = %v, want 100µs", m)
	}
	var o histogram
	o.record(-time.Second)
	o.add(&h)
	if o.count() != 101 || o.percentile(0) != 0 || !near(o.percentile(1), 1) { // the 1st and 2nd of 101
		t.Errorf("merged: %d values, p0 %v, p1 %v", o.count(), o.percentile(0), o.percentile(1))
	}
}

func TestRandom(t *testing.T) {
	// cbench.c has the same generator, so both programs build the same
	// index and search the same queries: pin its first value (a C build
	// of cbench.c's splitmix64 gives the same).
	s := splitmix64(42)
	if got := s.next(); got != 0xbdd732262feb6e95 {
		t.Errorf("splitmix64(42) first value %#x", got)
	}
	m := randomMatrix(42, 3, 5)
	for _, v := range m {
		if v < 0 || v >= 1 {
			t.Fatalf("%v out of [0, 1)", v)
		}
	}
	if querySeed(42, 0) == querySeed(42, 1) {
		t.Error("two workers share queries")
	}
}

// TestServeTenants: -tenants with -mode batch searches each goroutine's
// requests with its filter through one Batcher, checks every result, and
// finds no id outside its request's filter; -mode direct searches with the
// same filters.
func TestServeTenants(t *testing.T) {
	safetest.Check(t)
	c := tiny()
	c.tenants, c.tenantAllow, c.recall = 4, 0.5, 40
	c.goroutines = []int{1, 16}
	for _, batched := range []bool{true, false} {
		c.batched, c.maxBatch, c.slots = batched, 64, 3
		var out bytes.Buffer
		if err := run(c, &out); err != nil {
			t.Fatal(err)
		}
		tab := checkTable(t, out.String(), c.goroutines)
		all := strings.Join(tab.Comments, "\n")
		rec := regexp.MustCompile(`(?m)^filtered recall@\d+ of 40 queries \(filter 0, 50% of the rows\) against filtered brute force: direct one by one ([0-9.]+), batched ([0-9.]+) \(\d+ batches, mean [0-9.]+ queries\); 0 ids outside the filter$`)
		if m := rec.FindStringSubmatch(all); m == nil {
			t.Errorf("no filtered recall line with 0 ids outside the filter:\n%s", out.String())
		} else if d, _ := strconv.ParseFloat(m[1], 64); d < 0.5 {
			t.Errorf("filtered recall %q: direct below 0.5", m[0])
		}
		re := regexp.MustCompile(`(?m)^tenants at (\d+) goroutines: 4 filters \(50% of the rows each\), goroutine i on filter i mod 4(; (\d+) requests checked, (\d+) ids outside their request's filter; (\d+) filtered batches of (\d+) \((\d+) mixed, (\d+) scans, mean [0-9.]+ rows\), a request passed by at most (\d+))?$`)
		m := re.FindAllStringSubmatch(all, -1)
		if len(m) != len(c.goroutines) {
			t.Fatalf("batched %v: %d tenant lines, want %d:\n%s", batched, len(m), len(c.goroutines), out.String())
		}
		for _, l := range m {
			if !batched {
				if l[2] != "" {
					t.Errorf("direct mode reports batches: %q", l[0])
				}
				continue
			}
			checked, _ := strconv.Atoi(l[3])
			if checked < 1 || l[4] != "0" || l[5] != l[6] {
				t.Errorf("%q: want requests checked, 0 ids outside, every batch filtered", l[0])
			}
		}
	}
}
