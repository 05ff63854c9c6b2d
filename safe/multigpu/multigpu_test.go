package multigpu_test

import (
	"errors"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/cagra"
	"github.com/cuvs-go/cuvs/safe/ivfflat"
	"github.com/cuvs-go/cuvs/safe/ivfpq"
	"github.com/cuvs-go/cuvs/safe/multigpu"
)

func TestMain(m *testing.M) { safetest.Main(m) }

const (
	rows = 600
	dim  = 8
	nq   = 40
	k    = 10
)

// lacksMG is the reason every test that calls the library skips on a
// libcuvs_c without the multi-GPU functions.
const lacksMG = "library lacks multi-GPU"

// needMG skips t when the loaded library lacks any multi-GPU function of
// its release: a libcuvs_c built without CUVS_BUILD_MG_ALGOS (no NCCL), as
// the float32 builds run on the project's GPU machine are. Each entry
// point would fail with generated.ErrMissingSymbol (TestNotBuiltIn checks
// that); a library that has them runs the tests, and their failures are
// failures.
func needMG(t testing.TB) {
	t.Helper()
	var missing []string
	for _, f := range generated.Missing() { // of the loaded library's release
		if strings.HasPrefix(f, "cuvsMultiGpu") {
			missing = append(missing, f)
		}
	}
	if len(missing) > 0 {
		t.Skipf("%s: %d cuvsMultiGpu* functions of release %s are missing (%s, ...)", lacksMG, len(missing), generated.Release(), missing[0])
	}
}

// devices returns how many devices a test wanting n gets: on the double,
// n (it makes n fake devices visible); on a real library, min(n, the GPUs
// there are), since cuVS's single-node multi-GPU resources take the
// devices given, one or more: every test runs on a one-GPU machine too, its
// assertions derived from the count it got. It skips when the library
// lacks multi-GPU, or has no GPU.
func devices(t *testing.T, n int) int {
	t.Helper()
	needMG(t)
	if ctl := safetest.Control(); ctl != nil {
		ctl.SetDeviceCount(n)
		t.Cleanup(func() { ctl.SetDeviceCount(1) })
		return n
	}
	have, err := safe.DeviceCount()
	if err != nil {
		t.Skipf("no GPU to run on: %v", err)
	}
	if have < 1 {
		t.Skip("no GPU to run on")
	}
	return min(n, have)
}

// exactly is devices for a test that needs n devices, no fewer: it skips
// on a machine with fewer GPUs, saying why (what).
func exactly(t *testing.T, n int, what string) {
	t.Helper()
	if got := devices(t, n); got < n {
		t.Skipf("%s needs %d GPUs, this machine has %d", what, n, got)
	}
}

// mres returns multi-GPU resources on devices 0..devices(t, n)-1, closed at
// the end: n devices on the double, as many as there are up to n on a real
// library (res.Ranks() says how many).
func mres(t *testing.T, n int) *multigpu.Resources {
	t.Helper()
	return resOn(t, devices(t, n))
}

// resOn returns multi-GPU resources on devices 0..n-1, closed at the end.
func resOn(t *testing.T, n int) *multigpu.Resources {
	t.Helper()
	ids := make([]int, n)
	for i := range ids {
		ids[i] = i
	}
	r, err := multigpu.NewResources(multigpu.WithDevices(ids...))
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, r)
	if r.Ranks() != n {
		t.Fatalf("resources on %d devices: %d ranks", n, r.Ranks())
	}
	return r
}

// forDevices runs f as the subtests "1device" and "2devices", on
// resources of that many devices: both on the double; on a real library
// the second skips on a one-GPU machine (the first ran the one-device
// path).
func forDevices(t *testing.T, f func(t *testing.T, res *multigpu.Resources)) {
	t.Helper()
	needMG(t) // the test itself skips on a library without multi-GPU
	for _, n := range []int{1, 2} {
		t.Run(devName(n), func(t *testing.T) {
			exactly(t, n, "the "+devName(n)+" subtest")
			f(t, resOn(t, n))
		})
	}
}

func devName(n int) string {
	if n == 1 {
		return "1device"
	}
	return strconv.Itoa(n) + "devices"
}

func host(t testing.TB, data []float32, n int) *dlpack.HostMatrix[float32] {
	t.Helper()
	m, err := dlpack.NewHostMatrix(data, n, len(data)/n)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// allProbes is IVF-Flat with every list probed: an exact search.
func allProbes(nLists uint32) (*ivfflat.IndexParams, *ivfflat.SearchParams) {
	ip, err := ivfflat.DefaultIndexParams()
	if err != nil {
		panic(err)
	}
	ip.NLists = nLists
	return &ip, &ivfflat.SearchParams{NProbes: nLists}
}

func recall(got *safe.Results, want [][]int64) float64 {
	hit, total := 0, 0
	for q := range want {
		ids, _ := got.Row(q)
		for _, w := range want[q] {
			total++
			if slices.Contains(ids, w) {
				hit++
			}
		}
	}
	return float64(hit) / float64(total)
}

// Sharded IVF-Flat with every list probed is an exact search: its results
// equal the exact kNN of the whole dataset, ids being dataset rows (the
// shards' offsets added back by cuVS's merge), with both merge modes.
func TestShardedIVFFlatIsExact(t *testing.T) {
	needMG(t)
	safetest.Check(t)
	for _, n := range []int{1, 2, 3} {
		t.Run(devName(n), func(t *testing.T) { shardedExact(t, n) })
	}
}

func shardedExact(t *testing.T, n int) {
	{
		exactly(t, n, "the "+devName(n)+" subtest")
		res := resOn(t, n)
		data, qs := safetest.Random(1, rows, dim), safetest.Random(2, nq, dim)
		ip, sp := allProbes(8)
		idx, err := multigpu.BuildIVFFlat(res, host(t, data, rows), &multigpu.IVFFlatIndexParams{Mode: multigpu.Sharded, Base: ip})
		if err != nil {
			t.Fatal(err)
		}
		safetest.Close(t, idx)
		if idx.Rows() != rows || idx.Dim() != dim || idx.Mode() != multigpu.Sharded || idx.DType() != dlpack.Float32 {
			t.Fatalf("%d devices: rows %d dim %d mode %s dtype %s", n, idx.Rows(), idx.Dim(), idx.Mode(), idx.DType())
		}
		if sh := idx.Shards(); len(sh) != n || sumOf(sh) != rows {
			t.Fatalf("%d devices: shards %v", n, sh)
		}
		want := safetest.ExactKNN(data, qs, dim, k, safetest.L2, nil)
		for _, mm := range []multigpu.MergeMode{multigpu.TreeMerge, multigpu.MergeOnRootRank} {
			got, err := idx.SearchK(res, &multigpu.IVFFlatSearchParams{Distribution: multigpu.Distribution{MergeMode: mm}, Base: sp}, host(t, qs, nq), k)
			if err != nil {
				t.Fatal(err)
			}
			for q := range want {
				ids, ds := got.Row(q)
				if !slices.Equal(ids, want[q]) {
					t.Fatalf("%d devices, %s, query %d: %v, exact %v", n, mm, q, ids, want[q])
				}
				for j, id := range ids {
					if !safetest.NearlyEqual(ds[j], safetest.L2(qs[q*dim:(q+1)*dim], data[id*dim:(id+1)*dim])) {
						t.Fatalf("query %d slot %d: distance %g", q, j, ds[j])
					}
				}
			}
		}
	}
}

func sumOf(s []int64) int64 {
	var t int64
	for _, v := range s {
		t += v
	}
	return t
}

// Replicated IVF-Flat: every device holds the whole index, so load-balanced
// and round-robin searches give the exact results too, whichever device
// serves each batch; RoundRobin refuses more queries than RowsPerBatch.
func TestReplicatedIVFFlat(t *testing.T) {
	safetest.Check(t)
	forDevices(t, replicatedIVFFlat)
}

func replicatedIVFFlat(t *testing.T, res *multigpu.Resources) {
	data, qs := safetest.Random(3, rows, dim), safetest.Random(4, nq, dim)
	ip, sp := allProbes(8)
	idx, err := multigpu.BuildIVFFlat(res, host(t, data, rows), &multigpu.IVFFlatIndexParams{Mode: multigpu.Replicated, Base: ip})
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, idx)
	if sh := idx.Shards(); !slices.Equal(sh, slices.Repeat([]int64{rows}, res.Ranks())) {
		t.Fatalf("shards %v, want every device with all rows", sh)
	}
	want := safetest.ExactKNN(data, qs, dim, k, safetest.L2, nil)
	for _, d := range []multigpu.Distribution{
		{}, {RowsPerBatch: 7}, {SearchMode: multigpu.RoundRobin}, {SearchMode: multigpu.RoundRobin, RowsPerBatch: nq},
	} {
		for rep := 0; rep < res.Ranks()+1; rep++ { // round robin: each device in turn
			got, err := idx.SearchK(res, &multigpu.IVFFlatSearchParams{Distribution: d, Base: sp}, host(t, qs, nq), k)
			if err != nil {
				t.Fatalf("%+v: %v", d, err)
			}
			if r := recall(got, want); r != 1 {
				t.Fatalf("%+v: recall %g, want exact", d, r)
			}
		}
	}
	_, err = idx.SearchK(res, &multigpu.IVFFlatSearchParams{Distribution: multigpu.Distribution{SearchMode: multigpu.RoundRobin, RowsPerBatch: nq - 1}, Base: sp}, host(t, qs, nq), k)
	if !safetest.IsArg(err, "queries") {
		t.Fatalf("round robin over RowsPerBatch: %v, want an ArgError naming queries", err)
	}
}

// Approximate backends on one and two devices, sharded and replicated:
// recall thresholds, as on a real library.
func TestApproximateRecall(t *testing.T) {
	safetest.Check(t)
	forDevices(t, approximateRecall)
}

func approximateRecall(t *testing.T, res *multigpu.Resources) {
	const n = 2000
	data, qs := safetest.Random(5, n, dim), safetest.Random(6, nq, dim)
	want := safetest.ExactKNN(data, qs, dim, k, safetest.L2, nil)
	for _, mode := range []multigpu.Mode{multigpu.Sharded, multigpu.Replicated} {
		cp, err := cagra.DefaultIndexParams()
		if err != nil {
			t.Fatal(err)
		}
		cp.GraphDegree, cp.IntermediateGraphDegree = 16, 32
		ci, err := multigpu.BuildCagra(res, host(t, data, n), &multigpu.CagraIndexParams{Mode: mode, Base: &cp})
		if err != nil {
			t.Fatal(err)
		}
		got, err := ci.SearchK(res, &multigpu.CagraSearchParams{Base: &cagra.SearchParams{ITopKSize: 64}}, host(t, qs, nq), k)
		if err != nil {
			t.Fatal(err)
		}
		if r := recall(got, want); r < 0.9 {
			t.Errorf("CAGRA %s: recall %g < 0.9", mode, r)
		}
		safetest.Close(t, ci)

		pp, err := ivfpq.DefaultIndexParams()
		if err != nil {
			t.Fatal(err)
		}
		pp.NLists, pp.PQDim, pp.PQBits = 16, dim, 8
		pi, err := multigpu.BuildIVFPQ(res, host(t, data, n), &multigpu.IVFPQIndexParams{Mode: mode, Base: &pp})
		if err != nil {
			t.Fatal(err)
		}
		got, err = pi.SearchK(res, &multigpu.IVFPQSearchParams{Base: &ivfpq.SearchParams{NProbes: 16}}, host(t, qs, nq), k)
		if err != nil {
			t.Fatal(err)
		}
		if r := recall(got, want); r < 0.7 {
			t.Errorf("IVF-PQ %s: recall %g < 0.7", mode, r)
		}
		safetest.Close(t, pi)
	}
}

// Serialize then Deserialize gives the same results (exact round trip).
func TestSerializeRoundTrip(t *testing.T) {
	safetest.Check(t)
	forDevices(t, serializeRoundTrip)
}

func serializeRoundTrip(t *testing.T, res *multigpu.Resources) {
	data, qs := safetest.Random(7, rows, dim), safetest.Random(8, nq, dim)
	ip, sp := allProbes(4)
	idx, err := multigpu.BuildIVFFlat(res, host(t, data, rows), &multigpu.IVFFlatIndexParams{Base: ip})
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, idx)
	before, err := idx.SearchK(res, &multigpu.IVFFlatSearchParams{Base: sp}, host(t, qs, nq), k)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "mg.bin")
	if err := idx.Serialize(res, path); err != nil {
		t.Fatal(err)
	}
	back, err := multigpu.DeserializeIVFFlat(res, path)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, back)
	if back.Mode() != multigpu.Sharded || back.DType() != dlpack.Float32 || back.Rows() != -1 {
		t.Fatalf("deserialized: mode %s dtype %s rows %d", back.Mode(), back.DType(), back.Rows())
	}
	after, err := back.SearchK(res, &multigpu.IVFFlatSearchParams{Base: sp}, host(t, qs, nq), k)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(before.Neighbors, after.Neighbors) || !slices.Equal(before.Distances, after.Distances) {
		t.Fatal("deserialized index searches differently")
	}
}

// Deserialize on resources of another device count is refused by cuVS
// ("Serialized index has %d ranks whereas NCCL clique has %d ranks"): a
// file of two ranks on one device, and of one on two.
func TestDeserializeOtherRankCount(t *testing.T) {
	safetest.Check(t)
	exactly(t, 2, "a clique of another size than the file's")
	two := resOn(t, 2)
	one := resOn(t, 1)
	data := safetest.Random(7, rows, dim)
	ip, _ := allProbes(4)
	for _, c := range []struct {
		name      string
		from, too *multigpu.Resources
	}{{"2-device file on 1 device", two, one}, {"1-device file on 2 devices", one, two}} {
		idx, err := multigpu.BuildIVFFlat(c.from, host(t, data, rows), &multigpu.IVFFlatIndexParams{Base: ip})
		if err != nil {
			t.Fatal(err)
		}
		safetest.Close(t, idx)
		path := filepath.Join(t.TempDir(), "mg.bin")
		if err := idx.Serialize(c.from, path); err != nil {
			t.Fatal(err)
		}
		var ce *safe.Error
		if _, err := multigpu.DeserializeIVFFlat(c.too, path); !errors.As(err, &ce) {
			t.Fatalf("%s: %v, want a *safe.Error from cuVS", c.name, err)
		}
	}
}

// Distribute loads a single-GPU IVF-Flat file onto every device: a
// replicated index searching as the single-GPU one does.
func TestDistributeIVFFlat(t *testing.T) {
	safetest.Check(t)
	forDevices(t, distributeIVFFlat)
}

func distributeIVFFlat(t *testing.T, res *multigpu.Resources) {
	data, qs := safetest.Random(9, rows, dim), safetest.Random(10, nq, dim)
	ip, sp := allProbes(4)
	sres := safetest.Resources(t)
	dm, err := safe.DeviceMatrixFrom(sres, data, rows, dim)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, dm)
	single, err := ivfflat.Build(sres, dm, ip)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, single)
	path := filepath.Join(t.TempDir(), "single.bin")
	if err := single.Serialize(sres, path); err != nil {
		t.Fatal(err)
	}
	idx, err := multigpu.DistributeIVFFlat(res, path)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, idx)
	if idx.Mode() != multigpu.Replicated {
		t.Fatalf("mode %s, want Replicated", idx.Mode())
	}
	got, err := idx.SearchK(res, &multigpu.IVFFlatSearchParams{Base: sp}, host(t, qs, nq), k)
	if err != nil {
		t.Fatal(err)
	}
	if r := recall(got, safetest.ExactKNN(data, qs, dim, k, safetest.L2, nil)); r != 1 {
		t.Fatalf("recall %g, want exact", r)
	}
}

// Extend of a sharded index splits the rows over the devices; the new rows
// are found under the ids Shards documents. A replicated index takes ids of
// its own; a sharded one refuses them.
func TestExtend(t *testing.T) {
	safetest.Check(t)
	forDevices(t, extend)
}

func extend(t *testing.T, res *multigpu.Resources) {
	data := safetest.Random(11, rows, dim)
	extra := safetest.Random(12, 20, dim)
	ip, sp := allProbes(4)
	idx, err := multigpu.BuildIVFFlat(res, host(t, data, rows), &multigpu.IVFFlatIndexParams{Base: ip})
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, idx)
	if err := idx.Extend(res, host(t, extra, 20), dlpack.NewHostVector(make([]int64, 20))); !safetest.IsArg(err, "ids") {
		t.Fatalf("sharded extend with ids: %v", err)
	}
	if err := idx.Extend(res, host(t, extra, 20), nil); err != nil {
		t.Fatal(err)
	}
	// cuVS splits n rows over R devices ⌈n/R⌉ each, the rest on the last
	n := res.Ranks()
	built, added := ceilDiv(rows, n), ceilDiv(20, n)
	want := make([]int64, n)
	for r := range want {
		want[r] = int64(min(built, rows-r*built) + min(added, 20-r*added))
	}
	sh := idx.Shards()
	if idx.Rows() != rows+20 || !slices.Equal(sh, want) {
		t.Fatalf("rows %d shards %v, want %v", idx.Rows(), sh, want)
	}
	got, err := idx.SearchK(res, &multigpu.IVFFlatSearchParams{Base: sp}, host(t, extra, 20), 1)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20; i++ {
		// new row i went to device i/added, after its built rows
		r := i / added
		wantID := int64(min(built, rows-r*built) + i%added)
		for _, s := range sh[:r] {
			wantID += s
		}
		if got.Neighbors[i] != wantID || got.Distances[i] != 0 {
			t.Fatalf("new row %d: id %d distance %g, want id %d distance 0", i, got.Neighbors[i], got.Distances[i], wantID)
		}
	}

	rep, err := multigpu.BuildIVFFlat(res, host(t, data, rows), &multigpu.IVFFlatIndexParams{Mode: multigpu.Replicated, Base: ip})
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, rep)
	ids := make([]int64, 20)
	for i := range ids {
		ids[i] = 1000 + int64(i)
	}
	if err := rep.Extend(res, host(t, extra, 20), dlpack.NewHostVector(ids)); err != nil {
		t.Fatal(err)
	}
	got, err = rep.SearchK(res, &multigpu.IVFFlatSearchParams{Base: sp}, host(t, extra, 20), 1)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Neighbors, ids) {
		t.Fatalf("replicated extend ids: %v", got.Neighbors)
	}
	// Without ids a replicated index numbers the rows from Rows() on (Go's
	// ids: cuVS aborts the process on nil ids of a non-empty index).
	if err := rep.Extend(res, host(t, extra[:5*dim], 5), nil); err != nil {
		t.Fatal(err)
	}
	got, err = rep.SearchK(res, &multigpu.IVFFlatSearchParams{Base: sp}, host(t, extra[:5*dim], 5), 2)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		ids, dists := got.Row(i)
		if want := []int64{rows + 20 + int64(i), 1000 + int64(i)}; !slices.Equal(slices.Sorted(slices.Values(ids)), want) || dists[0] != 0 || dists[1] != 0 {
			t.Fatalf("row %d added twice: ids %v distances %v, want %v at 0", i, ids, dists, want)
		}
	}
	// Loaded from a file, Go knows no rows: nil ids are refused before C.
	for _, x := range []*multigpu.IVFFlatIndex{idx, rep} {
		path := filepath.Join(t.TempDir(), "x.bin")
		if err := x.Serialize(res, path); err != nil {
			t.Fatal(err)
		}
		back, err := multigpu.DeserializeIVFFlat(res, path)
		if err != nil {
			t.Fatal(err)
		}
		safetest.Close(t, back)
		if err := back.Extend(res, host(t, extra, 20), nil); !safetest.IsArg(err, "ids") && !safetest.IsArg(err, "vectors") {
			t.Fatalf("nil ids on a loaded index: %v", err)
		}
	}
}

// Fewer rows than lists on a device, or than devices, are refused before C.
func TestBuildRefusals(t *testing.T) {
	safetest.Check(t)
	res := mres(t, 2)
	n := res.Ranks()
	data := safetest.Random(13, 20, dim)
	ip, _ := allProbes(11)
	// 10 rows on each device, fewer than 11 lists
	if _, err := multigpu.BuildIVFFlat(res, host(t, data[:10*n*dim], 10*n), &multigpu.IVFFlatIndexParams{Base: ip}); !safetest.IsArg(err, "params.Base.NLists") {
		t.Fatalf("11 lists on 10 rows a device: %v", err)
	}
	ip.NLists = 1
	if n > 1 { // 1 row over 2 devices: 1, 0 (one device has no device without rows)
		if _, err := multigpu.BuildIVFFlat(res, host(t, data[:dim], 1), &multigpu.IVFFlatIndexParams{Base: ip}); !safetest.IsArg(err, "dataset") {
			t.Fatalf("a device without rows: %v", err)
		}
	}
	if _, err := multigpu.BuildIVFFlat(res, host(t, data, 20), &multigpu.IVFFlatIndexParams{Mode: 7, Base: ip}); !safetest.IsArg(err, "params.Mode") {
		t.Fatalf("mode 7: %v", err)
	}
	bad := slices.Clone(data)
	bad[5] = float32(math.NaN())
	if _, err := multigpu.BuildIVFFlat(res, host(t, bad, 20), &multigpu.IVFFlatIndexParams{Base: ip}); !safetest.IsArg(err, "dataset") {
		t.Fatalf("NaN: %v", err)
	}
	if _, err := multigpu.BuildIVFFlat(nil, host(t, data, 20), nil); !safetest.IsArg(err, "res") {
		t.Fatalf("nil res: %v", err)
	}
	var zero multigpu.Resources
	if _, err := multigpu.BuildIVFFlat(&zero, host(t, data, 20), &multigpu.IVFFlatIndexParams{Base: ip}); !safetest.IsArg(err, "res") {
		t.Fatalf("zero res: %v", err)
	}
}

// writeSingleIVFFlat writes a single-GPU IVF-Flat index of data to path.
func writeSingleIVFFlat(t *testing.T, data []float32, path string) {
	t.Helper()
	sres := safetest.Resources(t)
	dm, err := safe.DeviceMatrixFrom(sres, data, len(data)/dim, dim)
	if err != nil {
		t.Fatal(err)
	}
	defer dm.Close()
	ip, _ := allProbes(4)
	single, err := ivfflat.Build(sres, dm, ip)
	if err != nil {
		t.Fatal(err)
	}
	defer single.Close()
	if err := single.Serialize(sres, path); err != nil {
		t.Fatal(err)
	}
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }
