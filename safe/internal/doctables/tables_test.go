package doctables_test

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/cagra"
)

func TestMain(m *testing.M) { safetest.Main(m) }

// row is one line of a table in safe's doc: its cells, split at runs of
// two or more spaces.
type row struct {
	pkg   string
	cells []string
}

var cellSep = regexp.MustCompile(`\s{2,}`)

// safeDir is package safe's folder: ../.. in the module, or the copy of
// its sources that the gpu-test bundle carries (gputest-sources: the
// bundle's test binary runs without the module beside it).
func safeDir() string {
	if _, err := os.Stat("../../doc.go"); err == nil {
		return "../.."
	}
	return filepath.Join("testdata", "module", "safe")
}

// table reads the preformatted table of the doc section named heading
// (the header line dropped), in whichever of package safe's files holds
// it: Distances in Metric's doc (metric.go), Neighbor ids in Sentinel's
// (sentinel.go). A table ends with its comment.
func table(t *testing.T, heading string) []row {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(safeDir(), "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var out []row
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		in, header := false, true
		for _, l := range strings.Split(string(b), "\n") {
			switch {
			case !strings.HasPrefix(l, "//"):
				in = false
			case strings.HasPrefix(l, "// # "):
				in = l == "// # "+heading
			case in && strings.HasPrefix(l, "//\t"):
				if header {
					header = false
					continue
				}
				c := cellSep.Split(strings.TrimSpace(strings.TrimPrefix(l, "//\t")), -1)
				if len(c) < 3 {
					t.Fatalf("%s: row %q has %d cells", heading, l, len(c))
				}
				out = append(out, row{c[0], c[1:]})
			}
		}
	}
	if len(out) == 0 {
		t.Fatalf("no table under %q in package safe's docs", heading)
	}
	return out
}

// packages lists the algorithm packages under safe/ (not internal).
func packages(t *testing.T) []string {
	t.Helper()
	es, err := os.ReadDir(safeDir())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		if e.IsDir() && e.Name() != "internal" {
			out = append(out, e.Name())
		}
	}
	return out
}

// The packages whose doc cannot point to the tables yet (changed on other
// branches at the time the tables were written), and those without
// neighbors or distances of a metric (pca, quantize) or outside the tables
// (selectk, whose distances are the caller's).
var (
	noPointer = map[string]bool{"pca": true, "quantize": true, "selectk": true}
	noRows    = map[string]bool{"pca": true, "quantize": true, "selectk": true}
)

// Both tables cover every package under safe/ and name only those; each
// Distances row names real metrics; every package's doc points to the
// tables.
func TestTablesCoverPackages(t *testing.T) {
	metrics := map[string]bool{"any": true}
	for m := safe.L2Expanded; m.Valid(); m++ {
		metrics[m.String()] = true
	}
	for _, h := range []string{"Distances", "Neighbor ids"} {
		rows := table(t, h)
		seen := map[string]bool{}
		for _, r := range rows {
			seen[r.pkg] = true
			if _, err := os.Stat(filepath.Join(safeDir(), r.pkg)); err != nil {
				t.Errorf("%s: row of %q, which is not a package under safe/", h, r.pkg)
			}
			if h == "Distances" {
				for _, m := range strings.Split(r.cells[0], ", ") {
					if !metrics[m] {
						t.Errorf("%s: %s row names %q, not a metric", h, r.pkg, m)
					}
				}
			}
		}
		for _, p := range packages(t) {
			if !noRows[p] && !seen[p] {
				t.Errorf("%s: no row for package %s", h, p)
			}
		}
	}
	for _, p := range packages(t) {
		if noPointer[p] {
			continue
		}
		files, err := filepath.Glob(filepath.Join(safeDir(), p, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		doc := ""
		for _, name := range files {
			if strings.HasSuffix(name, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.PackageClauseOnly|parser.ParseComments)
			if err != nil {
				t.Fatal(err)
			}
			if f.Doc != nil {
				doc += f.Doc.Text()
			}
		}
		doc = strings.Join(strings.Fields(doc), " ")
		if !strings.Contains(doc, "safe.Metric") {
			t.Errorf("package %s's doc does not point to the tables (safe.Metric, safe.Sentinel)", p)
		}
	}
}

var sentinelRef = regexp.MustCompile(`(\d+) \((SentinelID\w*)\)`)

// The sentinels the Neighbor ids table names are the constants' values,
// and cagra's is safe's.
func TestSentinelTable(t *testing.T) {
	want := map[string]string{
		"SentinelID32":  strconv.FormatUint(uint64(safe.SentinelID32), 10),
		"SentinelID64":  strconv.FormatInt(safe.SentinelID64, 10),
		"SentinelID64U": strconv.FormatUint(safe.SentinelID64U, 10),
	}
	n := 0
	for _, r := range table(t, "Neighbor ids") {
		for _, m := range sentinelRef.FindAllStringSubmatch(r.cells[1], -1) {
			n++
			if w, ok := want[m[2]]; !ok || w != m[1] {
				t.Errorf("%s: %s is %s in the table, %s in the code", r.pkg, m[2], m[1], w)
			}
		}
		if strings.Contains(r.cells[1], "-1") || strings.Contains(r.cells[1], "−1") {
			t.Errorf("%s: a -1 sentinel in %q", r.pkg, r.cells[1])
		}
		if r.pkg == "tiered" && !strings.Contains(r.cells[1], "SentinelID64") {
			t.Errorf("tiered: %q", r.cells[1])
		}
	}
	if n < 5 {
		t.Errorf("%d sentinels named in the table", n)
	}
	if uint64(cagra.SentinelID) != uint64(safe.SentinelID32) {
		t.Errorf("cagra.SentinelID %d, safe.SentinelID32 %d", cagra.SentinelID, safe.SentinelID32)
	}
}
