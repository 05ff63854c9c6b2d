package model

import (
	"fmt"
	"sort"
	"strings"
)

// Change is one difference between two APIs.
type Change struct {
	Kind string // "added", "removed", "changed"
	What string // "function", "struct", "field", "enum", "value", "typedef"
	Name string
	Old  string // the old form, for "changed"
	New  string // the new form, for "changed" and "added"
}

// Diff lists what changed from old to new: functions, structs and their
// fields, enums and their values, typedefs. Header positions and
// declaration order are not compared. The result is sorted.
func Diff(old, new *API) []Change {
	var cs []Change
	add := func(kind, what, name, o, n string) {
		cs = append(cs, Change{Kind: kind, What: what, Name: name, Old: o, New: n})
	}

	of, nf := map[string]*Function{}, map[string]*Function{}
	for _, f := range old.Functions {
		of[f.Name] = f
	}
	for _, f := range new.Functions {
		nf[f.Name] = f
	}
	for n, f := range nf {
		if o, ok := of[n]; !ok {
			add("added", "function", n, "", Signature(f))
		} else if Signature(o) != Signature(f) {
			add("changed", "function", n, Signature(o), Signature(f))
		}
	}
	for n, f := range of {
		if _, ok := nf[n]; !ok {
			add("removed", "function", n, Signature(f), "")
		}
	}

	os, ns := map[string]*Struct{}, map[string]*Struct{}
	for _, s := range old.Structs {
		os[s.CName()] = s
	}
	for _, s := range new.Structs {
		ns[s.CName()] = s
	}
	for n, s := range ns {
		o, ok := os[n]
		if !ok {
			add("added", "struct", n, "", fmt.Sprintf("%d fields, %d bytes", len(s.Fields), s.Size))
			continue
		}
		ofl := map[string]Field{}
		for _, f := range o.Fields {
			ofl[f.Name] = f
		}
		nfl := map[string]bool{}
		for _, f := range s.Fields {
			nfl[f.Name] = true
			of, ok := ofl[f.Name]
			switch {
			case !ok:
				add("added", "field", n+"."+f.Name, "", f.Type.C(f.Name))
			case of.Type.String() != f.Type.String():
				add("changed", "field", n+"."+f.Name, of.Type.C(f.Name), f.Type.C(f.Name))
			case of.Offset != f.Offset:
				add("changed", "field", n+"."+f.Name, fmt.Sprintf("offset %d", of.Offset), fmt.Sprintf("offset %d", f.Offset))
			}
		}
		for _, f := range o.Fields {
			if !nfl[f.Name] {
				add("removed", "field", n+"."+f.Name, f.Type.C(f.Name), "")
			}
		}
		if o.Size != s.Size {
			add("changed", "struct", n, fmt.Sprintf("%d bytes", o.Size), fmt.Sprintf("%d bytes", s.Size))
		}
	}
	for n, s := range os {
		if _, ok := ns[n]; !ok {
			add("removed", "struct", n, fmt.Sprintf("%d fields, %d bytes", len(s.Fields), s.Size), "")
		}
	}

	oe, ne := map[string]*Enum{}, map[string]*Enum{}
	for _, e := range old.Enums {
		oe[e.CName()] = e
	}
	for _, e := range new.Enums {
		ne[e.CName()] = e
	}
	for n, e := range ne {
		o, ok := oe[n]
		if !ok {
			add("added", "enum", n, "", fmt.Sprintf("%d values", len(e.Values)))
			continue
		}
		ov := map[string]int64{}
		for _, v := range o.Values {
			ov[v.Name] = v.Value
		}
		nv := map[string]bool{}
		for _, v := range e.Values {
			nv[v.Name] = true
			old, ok := ov[v.Name]
			switch {
			case !ok:
				add("added", "value", n+"."+v.Name, "", fmt.Sprint(v.Value))
			case old != v.Value:
				add("changed", "value", n+"."+v.Name, fmt.Sprint(old), fmt.Sprint(v.Value))
			}
		}
		for _, v := range o.Values {
			if !nv[v.Name] {
				add("removed", "value", n+"."+v.Name, fmt.Sprint(v.Value), "")
			}
		}
	}
	for n, e := range oe {
		if _, ok := ne[n]; !ok {
			add("removed", "enum", n, fmt.Sprintf("%d values", len(e.Values)), "")
		}
	}

	ot, nt := map[string]*Typedef{}, map[string]*Typedef{}
	for _, t := range old.Typedefs {
		ot[t.Name] = t
	}
	for _, t := range new.Typedefs {
		nt[t.Name] = t
	}
	for n, t := range nt {
		if o, ok := ot[n]; !ok {
			add("added", "typedef", n, "", t.Type.String())
		} else if o.Type.String() != t.Type.String() {
			add("changed", "typedef", n, o.Type.String(), t.Type.String())
		}
	}
	for n, t := range ot {
		if _, ok := nt[n]; !ok {
			add("removed", "typedef", n, t.Type.String(), "")
		}
	}

	rank := map[string]int{"function": 0, "struct": 1, "field": 2, "enum": 3, "value": 4, "typedef": 5}
	sort.Slice(cs, func(i, j int) bool {
		a, b := cs[i], cs[j]
		if rank[a.What] != rank[b.What] {
			return rank[a.What] < rank[b.What]
		}
		if a.Kind != b.Kind {
			return a.Kind < b.Kind
		}
		return a.Name < b.Name
	})
	return cs
}

// Signature is a function's C prototype.
func Signature(f *Function) string {
	return (&Type{Kind: KFunc, Result: f.Result, Params: f.Params}).C(f.Name)
}

// FormatChanges renders changes as a Markdown changelog section.
func FormatChanges(old, new *API, cs []Change) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## cuVS C API: %s → %s\n\n", orQ(old.CuvsVersion), orQ(new.CuvsVersion))
	if len(cs) == 0 {
		b.WriteString("No changes.\n")
		return b.String()
	}
	counts := map[string]int{}
	for _, c := range cs {
		counts[c.Kind]++
	}
	fmt.Fprintf(&b, "%d added, %d removed, %d changed.\n", counts["added"], counts["removed"], counts["changed"])
	section := ""
	for _, c := range cs {
		title := sectionTitle(c.What)
		if title != section {
			fmt.Fprintf(&b, "\n### %s\n\n", title)
			section = title
		}
		switch c.Kind {
		case "added":
			fmt.Fprintf(&b, "- added `%s`: `%s`\n", c.Name, c.New)
		case "removed":
			fmt.Fprintf(&b, "- removed `%s` (was `%s`)\n", c.Name, c.Old)
		default:
			fmt.Fprintf(&b, "- changed `%s`: `%s` → `%s`\n", c.Name, c.Old, c.New)
		}
	}
	return b.String()
}

func sectionTitle(what string) string {
	switch what {
	case "function":
		return "Functions"
	case "struct", "field":
		return "Structs and fields"
	case "enum", "value":
		return "Enums and values"
	}
	return "Typedefs"
}

func orQ(s string) string {
	if s == "" {
		return "?"
	}
	return s
}
