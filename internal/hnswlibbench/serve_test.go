package hnswlibbench_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/internal/hnswlibbench"
	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/cagra"
	"github.com/cuvs-go/cuvs/safe/hnsw"
)

func TestMain(m *testing.M) { safetest.Main(m) }

const (
	rows = 2000
	dim  = 16
	nq   = 50
	k    = 10
)

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// hnswlib's own search of the files hnsw.Index.Serialize writes gives the
// Go search's rows: exactly (as sets, and in order for nearly every query)
// with ef = Rows(), where both search the whole graph; by recall and
// agreement at a small ef (hnswlib's searchKnn on the real library, the
// double's imitation of it here). Three files: an ACE build (the GPU
// build the benchmark serves, CPU hierarchy), an inner-product one
// converted from CAGRA, and a base-layer-only one (HierarchyNone, which
// serve.cpp searches as cuVS's patched hnswlib does). Then the timed
// passes report each thread count, and a refusal is a clear error.
func TestHnswlibReadsGoFiles(t *testing.T) {
	safetest.Check(t)
	bin := hnswlibbench.Build(t)
	res := safetest.Resources(t)
	data := safetest.Random(1, rows, dim)
	qs := safetest.Random(2, nq, dim)
	host, err := dlpack.NewHostMatrix(data, rows, dim)
	must(t, err)
	params := func(h hnsw.Hierarchy, m safe.Metric) *hnsw.IndexParams {
		p, err := hnsw.DefaultIndexParams()
		must(t, err)
		p.Hierarchy, p.M, p.EfConstruction, p.Metric = h, 16, 64, m
		return &p
	}
	fromCagra := func(m safe.Metric, h hnsw.Hierarchy) *hnsw.Index {
		cp, err := cagra.DefaultIndexParams()
		must(t, err)
		cp.Metric, cp.GraphDegree, cp.IntermediateGraphDegree = m, 32, 64
		ci, err := cagra.Build(res, host, &cp)
		must(t, err)
		defer ci.Close()
		idx, err := hnsw.FromCagra(res, ci, params(h, m))
		must(t, err)
		return idx
	}
	for _, c := range []struct {
		name   string
		metric string
		make   func() *hnsw.Index
	}{
		{"ace/l2/cpu", "l2", func() *hnsw.Index {
			idx, err := hnsw.Build(res, host, params(hnsw.HierarchyCPU, safe.L2Expanded))
			must(t, err)
			return idx
		}},
		{"cagra/ip/cpu", "ip", func() *hnsw.Index { return fromCagra(safe.InnerProduct, hnsw.HierarchyCPU) }},
		{"cagra/l2/none", "l2", func() *hnsw.Index { return fromCagra(safe.L2Expanded, hnsw.HierarchyNone) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			idx := c.make()
			safetest.Close(t, idx)
			dir := t.TempDir()
			file := filepath.Join(dir, "index.hnsw")
			must(t, idx.Serialize(res, file))
			qf := filepath.Join(dir, "queries.fbin")
			must(t, hnswlibbench.WriteQueries(qf, qs, dim))
			for _, ef := range []int{rows, 32} {
				r, err := hnsw.SearchSlice(res, idx, &hnsw.SearchParams{Ef: int32(ef), NumThreads: 1}, qs, k, nil)
				must(t, err)
				goIDs := filepath.Join(dir, fmt.Sprintf("go-%d.i64bin", ef))
				must(t, hnswlibbench.WriteIDs(goIDs, r.Neighbors, k))
				own := filepath.Join(dir, fmt.Sprintf("hnswlib-%d.i64bin", ef))
				cmd := exec.Command(bin, "-index", file, "-queries", qf, "-metric", c.metric, "-k", fmt.Sprint(k), "-ef", fmt.Sprint(ef),
					"-threads", "1,3", "-seconds", "0.05", "-exact", "-compare", goIDs, "-out", own)
				out, err := cmd.CombinedOutput()
				if err != nil {
					t.Fatalf("%v: %v\n%s", cmd.Args, err, out)
				}
				o, err := hnswlibbench.Parse(string(out))
				must(t, err)
				if v, _ := o.Field("rows"); v != fmt.Sprint(rows) {
					t.Errorf("rows %q, want %d\n%s", v, rows, out)
				}
				if v, _ := o.Field("dim"); v != fmt.Sprint(dim) {
					t.Errorf("dim %q, want %d (read from the file)\n%s", v, dim, out)
				}
				if v, _ := o.Field("base_layer_only"); (v == "1") != (idx.Hierarchy() == hnsw.HierarchyNone) {
					t.Errorf("base_layer_only=%s for hierarchy %s", v, idx.Hierarchy())
				}
				agree, err := o.Float(fmt.Sprintf("agree@%d", k))
				must(t, err)
				recall, err := o.Float(fmt.Sprintf("recall@%d", k))
				must(t, err)
				goRecall, err := o.Float(fmt.Sprintf("compare_recall@%d", k))
				must(t, err)
				ids, kk, err := hnswlibbench.ReadIDs(own)
				must(t, err)
				if kk != k || len(ids) != nq*k {
					t.Fatalf("-out: %d ids of k %d", len(ids), kk)
				}
				same := 0
				for q := range nq {
					if bytes.Equal(i64s(ids[q*k:(q+1)*k]), i64s(r.Neighbors[q*k:(q+1)*k])) {
						same++
					}
				}
				if ef == rows {
					// the whole graph searched: the exact kNN, both ways
					if agree != 1 || recall < 0.999 || goRecall < 0.999 || same < nq-2 {
						t.Errorf("ef %d: agree %.4f, recall hnswlib %.4f, Go %.4f, %d of %d rows in the same order\n%s", ef, agree, recall, goRecall, same, nq, out)
					}
				} else if agree < 0.9 || recall < 0.85 || goRecall < 0.85 {
					t.Errorf("ef %d: agree %.4f, recall hnswlib %.4f, Go %.4f\n%s", ef, agree, recall, goRecall, out)
				}
				if len(o.Runs) != 2 || o.Runs[0].Threads != 1 || o.Runs[1].Threads != 3 {
					t.Fatalf("runs %+v, want threads 1 and 3\n%s", o.Runs, out)
				}
				for _, run := range o.Runs {
					if run.Searches < 1 || run.QPS <= 0 || run.Seconds <= 0 {
						t.Errorf("run %+v", run)
					}
				}
			}
		})
	}

	// queries of another dimension than the file's: refused, naming both
	dir := t.TempDir()
	idx, err := hnsw.Build(res, host, params(hnsw.HierarchyCPU, safe.L2Expanded))
	must(t, err)
	safetest.Close(t, idx)
	file := filepath.Join(dir, "index.hnsw")
	must(t, idx.Serialize(res, file))
	qf := filepath.Join(dir, "q8.fbin")
	must(t, hnswlibbench.WriteQueries(qf, qs[:8*4], 8))
	out, err := exec.Command(bin, "-index", file, "-queries", qf).CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(string(out), "queries of dimension 8, the index has 16") {
		t.Errorf("queries of dimension 8: %v\n%s", err, out)
	}
	if out, err := exec.Command(bin, "-index", file).CombinedOutput(); err == nil || !strings.Contains(string(out), "-queries") {
		t.Errorf("no -queries: %v\n%s", err, out)
	}
}

func i64s(v []int64) []byte {
	b := make([]byte, 0, 8*len(v))
	for _, x := range v {
		b = fmt.Appendf(b, "%d,", x)
	}
	return b
}

// The formats round trip, and a damaged ids file is refused.
func TestFiles(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "ids")
	want := []int64{0, 5, 1 << 40, safe.SentinelID64, 3, 4}
	must(t, hnswlibbench.WriteIDs(p, want, 3))
	got, k, err := hnswlibbench.ReadIDs(p)
	must(t, err)
	if k != 3 || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("read %v k %d, wrote %v k 3", got, k, want)
	}
	b, _ := os.ReadFile(p)
	must(t, os.WriteFile(p, b[:len(b)-1], 0o644))
	if _, _, err := hnswlibbench.ReadIDs(p); err == nil {
		t.Error("a truncated ids file was read")
	}
	if err := hnswlibbench.WriteIDs(p, want, 4); err == nil {
		t.Error("6 ids of k 4 written")
	}
	if err := hnswlibbench.WriteQueries(p, []float32{1, 2, 3}, 2); err == nil {
		t.Error("3 values of dimension 2 written")
	}
	if _, err := hnswlibbench.Parse("hnswlib threads=x searches=1 seconds=1 qps=1 cpus=1\n"); err == nil {
		t.Error("a bad thread count parsed")
	}
	if _, err := hnswlibbench.Parse("something else\n"); err == nil {
		t.Error("a line without hnswlib parsed")
	}
}
