// Command benchtable prints benchstat's summary of `make bench` as one
// table: a row per benchmark with its median time per op and the 95%
// confidence interval around it, B/op, allocs/op, any other metric the
// benchmark reports, and, for the rows of BenchmarkSearch/<algorithm>/...,
// the ratio of its time to that algorithm's bare cgo call (row 2,
// "2_cgo_bare"). The search rows come first.
//
//	benchstat -format csv bench.out > bench.csv
//	go run ./internal/bench/benchtable bench.csv
package main

import (
	"bufio"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
)

// row is one benchmark's summary: metric unit -> median and CI.
type row struct {
	name    string
	pkg     string
	metrics map[string]metric
	units   []string // in order of appearance
}

type metric struct {
	value float64
	ci    string
}

func main() {
	in := io.Reader(os.Stdin)
	if len(os.Args) > 1 {
		f, err := os.Open(os.Args[1])
		if err != nil {
			fmt.Fprintln(os.Stderr, "benchtable:", err)
			os.Exit(1)
		}
		defer f.Close()
		in = f
	}
	rows, config, err := parse(in)
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchtable:", err)
		os.Exit(1)
	}
	if len(rows) == 0 {
		fmt.Fprintln(os.Stderr, "benchtable: no benchmark results")
		os.Exit(1)
	}
	printTable(os.Stdout, order(rows), config)
}

// groupOrder puts the table's groups (top-level benchmarks) in the order
// BENCHMARKS.md explains them; other groups follow in the order met.
var groupOrder = []string{"Search", "Call3Views", "BuildFromGoSlice", "Generate"}

// order sorts rows by group, keeping the order of rows within a group.
func order(rows []*row) []*row {
	rank := func(r *row) int {
		top, _, _ := strings.Cut(r.name, "/")
		top = strings.TrimRight(strings.TrimRight(top, "0123456789"), "-") // a lone benchmark's -GOMAXPROCS
		for i, g := range groupOrder {
			if g == top {
				return i
			}
		}
		return len(groupOrder)
	}
	out := slices.Clone(rows)
	slices.SortStableFunc(out, func(a, b *row) int { return rank(a) - rank(b) })
	return out
}

// parse reads benchstat's CSV: tables separated by blank lines, each made of
// a header of two lines (",file," and ",unit,CI") and a line per benchmark,
// ending with "geomean"; "key: value" configuration lines (goos, pkg, cpu,
// ...) come before the tables they apply to.
func parse(r io.Reader) ([]*row, []string, error) {
	var (
		rows   []*row
		byKey  = map[string]*row{}
		config []string
		seen   = map[string]bool{}
		pkg    string
		unit   string
		header int
	)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.TrimSpace(line) == "" {
			unit, header = "", 0
			continue
		}
		if !strings.HasPrefix(line, ",") && header == 0 && strings.Contains(line, ": ") && !strings.Contains(line, ",") {
			k, v, _ := strings.Cut(line, ": ")
			if k == "pkg" {
				pkg = v
			} else if !seen[line] {
				seen[line] = true
				config = append(config, line)
			}
			continue
		}
		rec, err := csv.NewReader(strings.NewReader(line)).Read()
		if err != nil {
			return nil, nil, fmt.Errorf("%q: %v", line, err)
		}
		if rec[0] == "" {
			header++
			if header == 2 && len(rec) > 1 {
				unit = rec[1]
			}
			continue
		}
		if unit == "" {
			return nil, nil, errors.New("a result before its table's header: is this benchstat -format csv output?")
		}
		if rec[0] == "geomean" || len(rec) < 2 || rec[1] == "" {
			continue
		}
		v, err := strconv.ParseFloat(rec[1], 64)
		if err != nil {
			return nil, nil, fmt.Errorf("%q: %v", line, err)
		}
		ci := ""
		if len(rec) > 2 {
			ci = rec[2]
		}
		key := pkg + "\x00" + rec[0]
		x := byKey[key]
		if x == nil {
			x = &row{name: rec[0], pkg: pkg, metrics: map[string]metric{}}
			byKey[key] = x
			rows = append(rows, x)
		}
		if _, ok := x.metrics[unit]; !ok {
			x.units = append(x.units, unit)
		}
		x.metrics[unit] = metric{v, ci}
	}
	return rows, config, sc.Err()
}

var searchRow = regexp.MustCompile(`^Search/([^/]+)/[^/]+?(-\d+)?$`)

func printTable(w io.Writer, rows []*row, config []string) {
	for _, c := range config {
		fmt.Fprintln(w, c)
	}
	// the bare cgo call of each algorithm
	base := map[string]float64{}
	for _, r := range rows {
		if m := searchRow.FindStringSubmatch(r.name); m != nil && strings.Contains(r.name, "/2_cgo_bare") {
			base[m[1]] = r.metrics["sec/op"].value
		}
	}
	width := len("benchmark")
	for _, r := range rows {
		width = max(width, len(r.name))
	}
	var buf strings.Builder
	tw := tabwriter.NewWriter(&buf, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "%-*s\ttime/op\t±\tB/op\tallocs/op\t× row 2\t%s\t\n", width, "benchmark", "other")
	top, pkg := "", ""
	for _, r := range rows {
		if t, _, _ := strings.Cut(r.name, "/"); t != top || r.pkg != pkg {
			if top != "" {
				fmt.Fprintln(tw, "\t\t\t\t\t\t\t")
			}
			top, pkg = t, r.pkg
		}
		ratio := ""
		if m := searchRow.FindStringSubmatch(r.name); m != nil && base[m[1]] > 0 {
			ratio = fmt.Sprintf("%.2f", r.metrics["sec/op"].value/base[m[1]])
		}
		var other []string
		for _, u := range r.units {
			switch {
			case u == "sec/op" || u == "B/op" || u == "allocs/op":
			case strings.HasSuffix(u, "-sec/op"): // benchstat's scaling of a custom x-ns/op
				other = append(other, duration(r.metrics[u].value)+" "+strings.TrimSuffix(u, "sec/op")+"time/op")
			default:
				other = append(other, count(r.metrics[u].value)+" "+u)
			}
		}
		t := r.metrics["sec/op"]
		ci := t.ci
		if ci != "" {
			ci = "±" + ci
		}
		fmt.Fprintf(tw, "%-*s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", width, r.name, duration(t.value), ci,
			count(r.metrics["B/op"].value), count(r.metrics["allocs/op"].value), ratio, strings.Join(other, ", "))
	}
	tw.Flush()
	for _, line := range strings.Split(strings.TrimRight(buf.String(), "\n"), "\n") {
		fmt.Fprintln(w, strings.TrimRight(line, " "))
	}
}

// duration formats seconds with a unit that keeps three or four digits.
func duration(s float64) string {
	switch {
	case s == 0:
		return "0"
	case s < 1e-6:
		return fmt.Sprintf("%.2fns", s*1e9)
	case s < 1e-3:
		return fmt.Sprintf("%.2fµs", s*1e6)
	case s < 1:
		return fmt.Sprintf("%.2fms", s*1e3)
	}
	return fmt.Sprintf("%.3fs", s)
}

// count formats a count or a byte size: exact below 10k, else with a
// k/M/G suffix.
func count(v float64) string {
	switch {
	case v < 1e4 && v == math.Trunc(v):
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v < 1e4:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case v < 1e7:
		return fmt.Sprintf("%.1fk", v/1e3)
	case v < 1e10:
		return fmt.Sprintf("%.1fM", v/1e6)
	}
	return fmt.Sprintf("%.1fG", v/1e9)
}
