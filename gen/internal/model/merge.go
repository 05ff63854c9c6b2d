package model

import (
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// Release is one cuVS release of a merged API: its name (major.minor, e.g.
// "26.08") and the header versions its declarations were parsed from.
type Release struct {
	Name          string `json:"name"`
	CuvsVersion   string `json:"cuvs_version"`
	DLPackVersion string `json:"dlpack_version"`
	// TypeNames maps, for this release, each C name of a type or
	// enumerator whose declaration is a variant to the variant's name
	// (cuvsCagraIndexParams_t → cuvsCagraIndexParams_t_v2608); FuncNames
	// maps each variant function of this release to its symbol
	// (cuvsCagraBuild_v2608 → cuvsCagraBuild). Both sorted.
	TypeNames []Rename `json:"type_names,omitempty"`
	FuncNames []Rename `json:"func_names,omitempty"`
}

// Rename is one name of a release and the merged name it stands for.
type Rename struct {
	From string `json:"from"`
	To   string `json:"to"`
}

var releaseVersion = regexp.MustCompile(`^v?(\d+)\.(\d+)(\.\d+)?`)

// ReleaseOf is the release (major.minor) of a cuVS version: v26.08.01 is
// 26.08. It is "" for a version it cannot read.
func ReleaseOf(version string) string {
	m := releaseVersion.FindStringSubmatch(version)
	if m == nil {
		return ""
	}
	return m[1] + "." + m[2]
}

// Suffix is what the C and Go names of a release's variant of a declaration
// end with, when that declaration differs from the one of the oldest release
// that has it: "_v" and the release without its dot (26.08 gives _v2608).
func Suffix(release string) string { return "_v" + strings.ReplaceAll(release, ".", "") }

// Merge combines the APIs of several releases, oldest first, into the one
// API the bindings are emitted from:
//
//   - a declaration that is the same in every release that has it is kept
//     once under its C name;
//   - a declaration whose definition differs between releases keeps its C
//     name for the oldest release that has it, and each later release whose
//     definition differs gets a variant named with Suffix (struct
//     cuvsCagraIndexParams_v2608, cuvsCagraIndexParams_t_v2608,
//     cuvsCagraBuild_v2608). "Differs" follows references: a typedef, struct
//     or function that names a type that has a variant in a release has a
//     variant there too, since its Go type differs;
//   - an enum whose members keep their values gets the union of its members
//     (its type is int32 in every release); one whose members change value
//     gets variants like any other declaration, its enumerators suffixed too.
//
// Every merged function records the releases that have it (Releases) and,
// for a variant, the library's symbol it binds (Symbol).
func Merge(apis []*API) (*API, error) {
	if len(apis) == 0 {
		return nil, fmt.Errorf("no API to merge")
	}
	rels := make([]string, len(apis))
	for i, a := range apis {
		rels[i] = ReleaseOf(a.CuvsVersion)
		if rels[i] == "" {
			return nil, fmt.Errorf("cuVS version %q names no release (want vMAJOR.MINOR.PATCH)", a.CuvsVersion)
		}
		if i > 0 && !releaseLess(rels[i-1], rels[i]) {
			return nil, fmt.Errorf("releases out of order or repeated: %s then %s", rels[i-1], rels[i])
		}
	}
	m := &merger{apis: apis, rels: rels}
	m.index()
	m.assign()
	return m.emit()
}

// releaseLess orders releases numerically.
func releaseLess(a, b string) bool {
	var am, an, bm, bn int
	fmt.Sscanf(a, "%d.%d", &am, &an)
	fmt.Sscanf(b, "%d.%d", &bm, &bn)
	return am < bm || am == bm && an < bn
}

// SortReleases sorts APIs by their release, oldest first.
func SortReleases(apis []*API) {
	sort.SliceStable(apis, func(i, j int) bool {
		return releaseLess(ReleaseOf(apis[i].CuvsVersion), ReleaseOf(apis[j].CuvsVersion))
	})
}

// a declaration of one release, keyed as keyOf says.
type mdecl struct {
	enum *Enum
	st   *Struct
	td   *Typedef
	fn   *Function
}

type merger struct {
	apis []*API
	rels []string
	ix   []*Index
	// decls[r][key]: the declaration key in release r; order[r]: keys in
	// that release's order (types, then functions).
	decls []map[string]mdecl
	order [][]string
	// group[r][key]: the index of the first release whose definition of key
	// is the same as r's.
	group []map[string]int
	// first[key]: the first release that has key.
	first map[string]int
	// unionEnum[key]: the enum's members merge (no value changes).
	unionEnum map[string]bool
}

func enumKey(e *Enum) string     { return "T:" + e.CName() }
func structKey(s *Struct) string { return "T:" + s.CName() }
func typedefKey(n string) string { return "T:" + n }
func funcKey(n string) string    { return "F:" + n }

func (m *merger) index() {
	m.first = map[string]int{}
	m.unionEnum = map[string]bool{}
	for r, a := range m.apis {
		ix := NewIndex(a)
		m.ix = append(m.ix, ix)
		ds := map[string]mdecl{}
		var ord []string
		add := func(k string, d mdecl) {
			if _, ok := ds[k]; ok {
				return
			}
			ds[k] = d
			ord = append(ord, k)
			if _, ok := m.first[k]; !ok {
				m.first[k] = r
			}
		}
		g := &gen0{a}
		for _, d := range g.sorted() {
			switch {
			case d.enum != nil:
				add(enumKey(d.enum), d)
			case d.st != nil:
				add(structKey(d.st), d)
			case d.td != nil:
				add(typedefKey(d.td.Name), d)
			}
		}
		for _, f := range a.Functions {
			add(funcKey(f.Name), mdecl{fn: f})
		}
		m.decls = append(m.decls, ds)
		m.order = append(m.order, ord)
	}
	// Enums whose members never change value merge into one.
	for k := range m.first {
		if !strings.HasPrefix(k, "T:") {
			continue
		}
		vals, isEnum, ok := map[string]int64{}, false, true
		for r := range m.apis {
			d, has := m.decls[r][k]
			if !has || d.enum == nil {
				continue
			}
			isEnum = true
			for _, v := range d.enum.Values {
				if old, seen := vals[v.Name]; seen && old != v.Value {
					ok = false
				}
				vals[v.Name] = v.Value
			}
		}
		if isEnum && ok {
			m.unionEnum[k] = true
		}
	}
}

type gen0 struct{ a *API }

// sorted lists the type declarations of an API in header order.
func (g *gen0) sorted() []mdecl {
	type od struct {
		order int
		d     mdecl
	}
	var ds []od
	for _, e := range g.a.Enums {
		ds = append(ds, od{e.Order, mdecl{enum: e}})
	}
	for _, s := range g.a.Structs {
		ds = append(ds, od{s.Order, mdecl{st: s}})
	}
	for _, t := range g.a.Typedefs {
		ds = append(ds, od{t.Order, mdecl{td: t}})
	}
	sort.SliceStable(ds, func(i, j int) bool { return ds[i].order < ds[j].order })
	out := make([]mdecl, len(ds))
	for i, d := range ds {
		out[i] = d.d
	}
	return out
}

// refKey is the declaration key a type reference of release r points at,
// "" when it points at none (builtins, incomplete structs).
func (m *merger) refKey(r int, t *Type) string {
	ix := m.ix[r]
	switch t.Kind {
	case KStruct:
		if s, ok := ix.Structs["struct "+t.Name]; ok {
			return structKey(s)
		}
	case KEnum:
		if e, ok := ix.Enums["enum "+t.Name]; ok {
			return enumKey(e)
		}
	case KTypedef:
		if s, ok := ix.Structs[t.Name]; ok {
			return structKey(s)
		}
		if e, ok := ix.Enums[t.Name]; ok {
			return enumKey(e)
		}
		if _, ok := ix.Typedefs[t.Name]; ok {
			return typedefKey(t.Name)
		}
	}
	return ""
}

// refs walks every type reference of t.
func refs(t *Type, f func(*Type)) {
	if t == nil {
		return
	}
	f(t)
	refs(t.Elem, f)
	refs(t.Result, f)
	for _, p := range t.Params {
		refs(p.Type, f)
	}
}

func (d mdecl) types() []*Type {
	var ts []*Type
	switch {
	case d.st != nil:
		for _, f := range d.st.Fields {
			ts = append(ts, f.Type)
		}
	case d.td != nil:
		ts = append(ts, d.td.Type)
	case d.fn != nil:
		ts = append(ts, d.fn.Result)
		for _, p := range d.fn.Params {
			ts = append(ts, p.Type)
		}
	}
	return ts
}

// raw is a declaration's definition without where it was written; for a
// function, without its parameter names.
func (m *merger) raw(k string, d mdecl) string {
	var v any
	switch {
	case d.enum != nil:
		if m.unionEnum[k] {
			return "enum"
		}
		v = d.enum.Values
	case d.st != nil:
		s := *d.st
		s.Header, s.Order, s.Tag, s.Typedef = "", 0, "", ""
		v = s
	case d.td != nil:
		v = d.td.Type
	case d.fn != nil:
		ps := make([]*Type, len(d.fn.Params))
		for i, p := range d.fn.Params {
			ps[i] = p.Type
		}
		v = struct {
			R *Type
			P []*Type
			V bool
		}{d.fn.Result, ps, d.fn.Variadic}
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// group assigns each declaration of each release to the first release with
// the same definition, refining by the groups of what it references until
// nothing changes.
func (m *merger) assign() {
	n := len(m.apis)
	raw := make([]map[string]string, n)
	for r := range m.apis {
		raw[r] = map[string]string{}
		for k, d := range m.decls[r] {
			raw[r][k] = m.raw(k, d)
		}
	}
	sig := func(r int, k string) string {
		var b strings.Builder
		b.WriteString(raw[r][k])
		for _, t := range m.decls[r][k].types() {
			refs(t, func(x *Type) {
				if rk := m.refKey(r, x); rk != "" {
					fmt.Fprintf(&b, "|%s=%d", rk, m.group[r][rk])
				}
			})
		}
		return b.String()
	}
	m.group = make([]map[string]int, n)
	for r := range m.apis {
		m.group[r] = map[string]int{}
		for k := range m.decls[r] {
			m.group[r][k] = 0
		}
	}
	for iter := 0; ; iter++ {
		changed := false
		next := make([]map[string]int, n)
		for r := range m.apis {
			next[r] = map[string]int{}
			for k := range m.decls[r] {
				s := sig(r, k)
				g := r
				for q := 0; q < r; q++ {
					if _, ok := m.decls[q][k]; ok && sig(q, k) == s {
						g = q
						break
					}
				}
				next[r][k] = g
				if g != m.group[r][k] || iter == 0 {
					changed = true
				}
			}
		}
		m.group = next
		if !changed || iter > 4*len(m.first) {
			return
		}
	}
}

// suffix is the name suffix of key's variant in release r: "" for the
// variant of the first release that has key.
func (m *merger) suffix(r int, k string) string {
	g := m.group[r][k]
	if g == m.first[k] {
		return ""
	}
	return Suffix(m.rels[g])
}

// rename rewrites a type of release r to the merged names.
func (m *merger) rename(r int, t *Type) *Type {
	if t == nil {
		return nil
	}
	c := *t
	if k := m.refKey(r, t); k != "" {
		c.Name += m.suffix(r, k)
	}
	c.Elem = m.rename(r, t.Elem)
	c.Result = m.rename(r, t.Result)
	if t.Params != nil {
		c.Params = make([]*Param, len(t.Params))
		for i, p := range t.Params {
			c.Params[i] = &Param{Name: p.Name, Type: m.rename(r, p.Type)}
		}
	}
	return &c
}

func first(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func addSuffix(s, suf string) string {
	if s == "" {
		return ""
	}
	return s + suf
}

func (m *merger) emit() (*API, error) {
	out := &API{Format: FormatVersion}
	var cv, dv []string
	headers := map[string]bool{}
	for r, a := range m.apis {
		out.Releases = append(out.Releases, Release{Name: m.rels[r], CuvsVersion: a.CuvsVersion, DLPackVersion: a.DLPackVersion})
		cv = append(cv, a.CuvsVersion)
		if len(dv) == 0 || dv[len(dv)-1] != a.DLPackVersion {
			dv = append(dv, a.DLPackVersion)
		}
		for _, h := range a.Headers {
			headers[h] = true
		}
	}
	out.CuvsVersion = strings.Join(cv, " + ")
	out.DLPackVersion = strings.Join(dv, " + ")
	for h := range headers {
		out.Headers = append(out.Headers, h)
	}
	sort.Strings(out.Headers)

	for r := range m.apis {
		rel := &out.Releases[r]
		for _, k := range m.order[r] {
			suf := m.suffix(r, k)
			if suf == "" {
				continue
			}
			add := func(n string) {
				if n != "" {
					rel.TypeNames = append(rel.TypeNames, Rename{n, n + suf})
				}
			}
			switch d := m.decls[r][k]; {
			case d.enum != nil:
				add(d.enum.Tag)
				add(d.enum.Typedef)
				for _, v := range d.enum.Values {
					add(v.Name)
				}
			case d.st != nil:
				add(d.st.Tag)
				add(d.st.Typedef)
			case d.td != nil:
				add(d.td.Name)
			case d.fn != nil:
				rel.FuncNames = append(rel.FuncNames, Rename{d.fn.Name + suf, d.fn.Name})
			}
		}
		for _, l := range [][]Rename{rel.TypeNames, rel.FuncNames} {
			sort.Slice(l, func(i, j int) bool { return l[i].From < l[j].From })
		}
	}

	done := map[string]bool{}
	order := 0
	for r := range m.apis {
		for _, k := range m.order[r] {
			suf := m.suffix(r, k)
			name := k + suf
			d := m.decls[r][k]
			if d.fn != nil || done[name] {
				continue
			}
			done[name] = true
			// The tag and typedef names any release of the group gives it
			// (26.08 tags some structs 26.06 only typedef'd).
			tag, typedef := "", ""
			for q := r; q < len(m.apis); q++ {
				qd, ok := m.decls[q][k]
				if !ok || m.group[q][k] != m.group[r][k] {
					continue
				}
				switch {
				case qd.enum != nil:
					tag, typedef = first(tag, qd.enum.Tag), first(typedef, qd.enum.Typedef)
				case qd.st != nil:
					tag, typedef = first(tag, qd.st.Tag), first(typedef, qd.st.Typedef)
				}
			}
			switch {
			case d.enum != nil:
				e := &Enum{Tag: addSuffix(tag, suf), Typedef: addSuffix(typedef, suf), Header: d.enum.Header, Order: order}
				if m.unionEnum[k] {
					seen := map[string]bool{}
					for q := r; q < len(m.apis); q++ {
						if qd, ok := m.decls[q][k]; ok {
							for _, v := range qd.enum.Values {
								if !seen[v.Name] {
									seen[v.Name] = true
									e.Values = append(e.Values, v)
								}
							}
						}
					}
				} else {
					for _, v := range d.enum.Values {
						e.Values = append(e.Values, EnumValue{Name: v.Name + suf, Value: v.Value})
					}
				}
				out.Enums = append(out.Enums, e)
			case d.st != nil:
				s := &Struct{Tag: addSuffix(tag, suf), Typedef: addSuffix(typedef, suf), Header: d.st.Header, Order: order,
					Size: d.st.Size, Align: d.st.Align}
				for _, f := range d.st.Fields {
					s.Fields = append(s.Fields, Field{Name: f.Name, Type: m.rename(r, f.Type), Offset: f.Offset})
				}
				out.Structs = append(out.Structs, s)
			case d.td != nil:
				out.Typedefs = append(out.Typedefs, &Typedef{Name: d.td.Name + suf, Type: m.rename(r, d.td.Type), Header: d.td.Header, Order: order})
			}
			order++
		}
	}

	// Functions: a variant goes right after the older variant, a release's
	// other new ones right after the previous function of that release, so
	// headers stay together.
	var fns []*Function
	at := map[string]int{}
	for r := range m.apis {
		prev := -1
		for _, f := range m.apis[r].Functions {
			k := funcKey(f.Name)
			name := f.Name + m.suffix(r, k)
			if i, ok := at[name]; ok {
				fns[i].Releases = append(fns[i].Releases, m.rels[r])
				prev = i
				continue
			}
			nf := &Function{Name: name, Header: f.Header, Result: m.rename(r, f.Result), Variadic: f.Variadic, Releases: []string{m.rels[r]}}
			if name != f.Name {
				nf.Symbol = f.Name
			}
			for _, p := range f.Params {
				nf.Params = append(nf.Params, &Param{Name: p.Name, Type: m.rename(r, p.Type)})
			}
			pos := prev + 1
			for i, g := range fns { // a variant goes after the older one
				if g.SymbolOf() == f.Name {
					pos = i + 1
				}
			}
			fns = append(fns, nil)
			copy(fns[pos+1:], fns[pos:])
			fns[pos] = nf
			for n, i := range at {
				if i >= pos {
					at[n] = i + 1
				}
			}
			at[name] = pos
			prev = pos
		}
	}
	out.Functions = fns
	if err := out.Validate(); err != nil {
		return nil, fmt.Errorf("merged API: %w", err)
	}
	return out, nil
}

// SymbolOf is the library symbol a merged function binds.
func (f *Function) SymbolOf() string {
	if f.Symbol != "" {
		return f.Symbol
	}
	return f.Name
}
