package readmeapi

import (
	"strings"
	"testing"
)

// toyHeader is the table's header and delimiter, for tables over
// testdata/safe/toy.
const toyHeader = "| package.Type | build / fit | search / apply | Go memory (`…Slice`) | Prepare (`Run`) | Extend | Merge | paths | `io` | Close |\n" +
	"| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n"

// toyRows are the true rows for testdata/safe/toy.
var toyRows = []string{
	"| `toy.Index` | `Build` | `Index.Search` | `SearchSlice` | — | — | — | `Index.Serialize`, `Deserialize` | `Index.SerializeTo`, `DeserializeFrom` | `Index.Close` |",
	"| `toy.Model` | `Fit` | `Model.Transform` | — | — | — | — | — | — | — |",
	"| `toy` | — | `Pairwise` | — | — | — | — | — | — | — |",
}

// TestCheck: check finds each kind of disagreement between a table and a
// package's API, and none in a true table.
func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name string
		row  int    // which of toyRows to replace, -1 for none, len(toyRows) to drop the last
		with string // its replacement
		want string // in the one error expected; "" for none
	}{
		{name: "true", row: -1},
		{name: "a method that does not exist", row: 0,
			with: "| `toy.Index` | `Build` | `Index.Search` | `SearchSlice` | — | `Index.Extend` | — | `Index.Serialize`, `Deserialize` | `Index.SerializeTo`, `DeserializeFrom` | `Index.Close` |",
			want: `toy.Index, column "Extend": Index.Extend: safe/toy's Index has no exported method Extend`},
		{name: "a function that does not exist", row: 0,
			with: "| `toy.Index` | `Build` | `Index.Search` | `SearchSlice` | — | — | `Merge` | `Index.Serialize`, `Deserialize` | `Index.SerializeTo`, `DeserializeFrom` | `Index.Close` |",
			want: `toy.Index, column "Merge": Merge: safe/toy has no exported function Merge`},
		{name: "none where there is one", row: 0,
			with: "| `toy.Index` | `Build` | `Index.Search` | `SearchSlice` | — | — | — | `Index.Serialize`, `Deserialize` | `Index.SerializeTo`, `DeserializeFrom` | — |",
			want: `toy.Index, column "Close" says "—" but safe/toy has Index.Close`},
		{name: "none where there is one, a function", row: 2,
			with: "| `toy` | — | — | — | — | — | — | — | — | — |",
			want: `toy, column "search / apply" says "—" but safe/toy has Pairwise`},
		{name: "a name left out", row: 0,
			with: "| `toy.Index` | `Build` | `Index.Search` | `SearchSlice` | — | — | — | `Deserialize` | `Index.SerializeTo`, `DeserializeFrom` | `Index.Close` |",
			want: `toy.Index, column "paths" says "` + "`Deserialize`" + `" but safe/toy has Index.Serialize`},
		{name: "another row's method", row: 1,
			with: "| `toy.Model` | `Fit` | `Model.Transform`, `Index.Search` | — | — | — | — | — | — | — |",
			want: `toy.Model, column "search / apply": Index.Search: a method of Index in the row of toy.Model`},
		{name: "unexported", row: 0,
			with: "| `toy.Index` | `Build` | `Index.Search` | `SearchSlice` | — | — | — | `Index.Serialize`, `Deserialize` | `Index.SerializeTo`, `DeserializeFrom` | `Index.Close`, `Index.Unexported` |",
			want: "has no exported method Unexported"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rows := append([]string(nil), toyRows...)
			if tc.row >= 0 {
				rows[tc.row] = tc.with
			}
			assertCheck(t, toyHeader+strings.Join(rows, "\n")+"\n", tc.want)
		})
	}
}

// TestCheckWrongColumn: a name in the column of another kind (the first
// error; the name is then also missing from its own column).
func TestCheckWrongColumn(t *testing.T) {
	table := toyHeader + strings.Join([]string{
		"| `toy.Index` | `Build` | `Index.Search` | `SearchSlice` | — | — | — | `Index.Serialize`, `Deserialize` | `Index.SerializeTo`, `DeserializeFrom`, `Index.Close` | — |",
		toyRows[1], toyRows[2],
	}, "\n") + "\n"
	errs := checkTable(t, table)
	if len(errs) != 2 ||
		!strings.Contains(errs[0], "column \"`io`\": Index.Close is not of this column's kind (it is of \"Close\")") ||
		!strings.Contains(errs[1], `column "Close" says "—" but safe/toy has Index.Close`) {
		t.Errorf("errors:\n%s", strings.Join(errs, "\n"))
	}
}

// TestCheckNoRowForFunction: a function of no row's type in a package of
// several rows and no row of its functions.
func TestCheckNoRowForFunction(t *testing.T) {
	assertCheck(t, toyHeader+toyRows[0]+"\n"+toyRows[1]+"\n",
		`safe/toy.Pairwise is of the column "search / apply" but of none of the package's rows`)
}

// TestReadTableErrors: tables the test cannot read are errors, not passes.
func TestReadTableErrors(t *testing.T) {
	for _, tc := range []struct{ readme, want string }{
		{"no table here\n", "no table whose first header is"},
		{strings.Replace(toyHeader, "| Close |", "| Free |", 1) + toyRows[0] + "\n", `column 10 is "Free", want "Close"`},
		{toyHeader + "| `toy.Index` | `Build` |\n", "2 cells, want 10"},
		{toyHeader + strings.Replace(toyRows[0], "`Index.Search`", "Index.Search", 1) + "\n", `"Index.Search" is not a ` + "`Name`"},
		{toyHeader + strings.Replace(toyRows[0], "`Index.Search`", "", 1) + "\n", `"" is not a ` + "`Name`"},
		{toyHeader, "a table without rows"},
	} {
		_, err := readTable(tc.readme)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("readTable(%q): %v, want an error with %q", tc.readme, err, tc.want)
		}
	}
}

func checkTable(t *testing.T, table string) []string {
	t.Helper()
	rows, err := readTable("Some text.\n\n" + table + "\nMore text.\n")
	if err != nil {
		t.Fatal(err)
	}
	return check(rows, "testdata/safe")
}

func assertCheck(t *testing.T, table, want string) {
	t.Helper()
	errs := checkTable(t, table)
	switch {
	case want == "" && len(errs) > 0:
		t.Errorf("a true table: errors\n%s", strings.Join(errs, "\n"))
	case want != "" && (len(errs) != 1 || !strings.Contains(errs[0], want)):
		t.Errorf("errors:\n%s\nwant one with %q", strings.Join(errs, "\n"), want)
	}
}
