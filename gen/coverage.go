package main

// go run ./gen coverage: which C function of each release the safe layer
// reaches, and from which exported Go API. See gen/README.md, "Coverage".

import (
	"bytes"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/cuvs-go/cuvs/gen/internal/model"
	"github.com/cuvs-go/cuvs/gen/internal/names"
)

// coverageConfig is what the coverage report reads.
type coverageConfig struct {
	apiDir   string // the release models, v*.json
	srcDir   string // the Go packages searched (safe/)
	srcPath  string // the import path of srcDir
	genPath  string // the import path of the generated bindings
	shims    string // generated/zcuvs_shims.c ("" for none)
	maxAPIs  int    // Go APIs printed per function before "+N more" (0: all)
	allowMis bool
}

func runCoverage(args []string, stdout, stderr io.Writer) error {
	var c coverageConfig
	fs := flag.NewFlagSet("gen coverage", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.BoolVar(&c.allowMis, "allow-missing", false, "exit 0 even when a function outside the multi-GPU ones is not wrapped (the report is printed all the same)")
	fs.StringVar(&c.apiDir, "api", "", "folder of the release models (default generated/api at the module root)")
	fs.StringVar(&c.srcDir, "src", "", "folder of the Go packages searched (default safe/ at the module root)")
	all := fs.Bool("all", false, "print every Go API that reaches a function (default: the first 4 and a count)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	root, err := moduleRoot()
	if err != nil && (c.apiDir == "" || c.srcDir == "") {
		return err
	}
	const mod = "github.com/cuvs-go/cuvs"
	c.genPath = mod + "/generated"
	if c.apiDir == "" {
		c.apiDir = filepath.Join(root, "generated", "api")
	}
	if c.srcDir == "" {
		c.srcDir = filepath.Join(root, "safe")
		c.srcPath = mod + "/safe"
		c.shims = filepath.Join(root, "generated", "zcuvs_shims.c")
	} else {
		c.srcPath = "safe"
		if root != "" {
			if abs, err := filepath.Abs(c.srcDir); err == nil {
				if rel, err := filepath.Rel(root, abs); err == nil && !strings.HasPrefix(rel, "..") {
					c.srcPath = path.Join(mod, filepath.ToSlash(rel))
				}
			}
		}
	}
	c.maxAPIs = 4
	if *all {
		c.maxAPIs = 0
	}
	rep, err := c.report()
	if err != nil {
		return err
	}
	if _, err := io.WriteString(stdout, rep.format(c.maxAPIs)); err != nil {
		return err
	}
	if n := rep.missing(); n > 0 && !c.allowMis {
		return fmt.Errorf("coverage: %d C function(s) outside the multi-GPU ones are NOT WRAPPED (-allow-missing prints the report and exits 0)", n)
	}
	return nil
}

// coverageReport is, per release, every C function and what reaches it.
type coverageReport struct {
	releases []releaseCoverage
}

type releaseCoverage struct {
	name, version string
	funcs         []funcCoverage // in header order, then declaration order
}

type funcCoverage struct {
	cName, goName, header string
	multiGPU              bool
	apis                  []string // exported Go APIs reaching it, sorted
	shim                  string   // the generated C shim function that calls it itself, if any
	orphans               []string // unexported or internal code that references it but no exported API reaches
}

func (f funcCoverage) wrapped() bool { return len(f.apis) > 0 || f.shim != "" }

// refusedBySafe lists the C functions the safe layer deliberately never
// calls, with the reason. The report names them as refused, not pending.
var refusedBySafe = map[string]string{
	"cuvsMultiGpuCagraExtend": "multigpu.CagraIndex.Extend refuses it: cuVS's multi-GPU CAGRA does not implement extend (it aborts the process on 26.08.01)",
}

// isMultiGPU: the multi-GPU headers (mg_*.h: neighbors/mg_cagra.h, ...,
// cluster/mg_kmeans.h) and the multi-GPU resources of core/c_api.h
// (cuvsMultiGpu*), which wait for their own issue.
func isMultiGPU(header, cName string) bool {
	return strings.HasPrefix(path.Base(header), "mg_") || strings.HasPrefix(cName, "cuvsMultiGpu")
}

func (c *coverageConfig) report() (*coverageReport, error) {
	files, err := filepath.Glob(filepath.Join(c.apiDir, "v*.json"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no release model (v*.json) in %s", c.apiDir)
	}
	var models []*model.API
	for _, f := range files {
		a, err := model.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		models = append(models, a)
	}
	model.SortReleases(models)
	merged, err := model.Merge(models)
	if err != nil {
		return nil, err
	}
	g, err := scanGo(c.srcDir, c.srcPath, c.genPath)
	if err != nil {
		return nil, err
	}
	shim := map[string]string{}
	if c.shims != "" {
		b, err := os.ReadFile(c.shims)
		if err != nil {
			return nil, err
		}
		shim = shimCallers(b)
	}
	rep := &coverageReport{}
	for i, m := range models {
		rel := merged.Releases[i].Name
		rc := releaseCoverage{name: rel, version: m.CuvsVersion}
		// The Go name that binds each C function of this release.
		goOf := map[string]string{}
		for _, f := range merged.Functions {
			for _, r := range f.Releases {
				if r == rel {
					goOf[f.SymbolOf()] = names.Go(f.Name)
				}
			}
		}
		byHeader := map[string][]*model.Function{}
		var headers []string
		for _, f := range m.Functions {
			if byHeader[f.Header] == nil {
				headers = append(headers, f.Header)
			}
			byHeader[f.Header] = append(byHeader[f.Header], f)
		}
		sort.Strings(headers)
		for _, h := range headers {
			for _, f := range byHeader[h] {
				gn, ok := goOf[f.Name]
				if !ok {
					return nil, fmt.Errorf("release %s: %s has no binding in the merged API", rel, f.Name)
				}
				fc := funcCoverage{cName: f.Name, goName: gn, header: h, multiGPU: isMultiGPU(h, f.Name), shim: shim[f.Name]}
				fc.apis, fc.orphans = g.reach(gn)
				rc.funcs = append(rc.funcs, fc)
			}
		}
		rep.releases = append(rep.releases, rc)
	}
	return rep, nil
}

// missing counts the functions outside the multi-GPU ones that no Go API
// reaches, over all releases.
func (r *coverageReport) missing() int {
	n := 0
	for _, rc := range r.releases {
		for _, f := range rc.funcs {
			if !f.multiGPU && !f.wrapped() && refusedBySafe[f.cName] == "" {
				n++
			}
		}
	}
	return n
}

func (rc releaseCoverage) summary() string {
	var w, mg, miss, refused int
	for _, f := range rc.funcs {
		switch {
		case f.wrapped():
			w++
		case refusedBySafe[f.cName] != "":
			refused++
		case f.multiGPU:
			mg++
		default:
			miss++
		}
	}
	out := fmt.Sprintf("%s: wrapped %d of %d (%d pending multi-GPU, %d not wrapped)", rc.name, w, len(rc.funcs), mg, miss)
	if refused > 0 {
		out += fmt.Sprintf("; %d refused by the safe layer", refused)
	}
	return out
}

func (r *coverageReport) format(max int) string {
	var b strings.Builder
	for _, rc := range r.releases {
		fmt.Fprintf(&b, "cuVS %s (%s)\n", rc.name, rc.version)
		width := 0
		for _, f := range rc.funcs {
			width = max2(width, len(f.cName))
		}
		h := ""
		for _, f := range rc.funcs {
			if f.header != h {
				h = f.header
				fmt.Fprintf(&b, "  %s\n", h)
			}
			fmt.Fprintf(&b, "    %-*s  %s\n", width, f.cName, f.describe(max))
		}
		fmt.Fprintf(&b, "  %s\n\n", rc.summary())
	}
	for _, rc := range r.releases {
		fmt.Fprintln(&b, rc.summary())
	}
	return b.String()
}

func max2(a, b int) int {
	if a > b {
		return a
	}
	return b
}

func (f funcCoverage) describe(max int) string {
	var parts []string
	if f.shim != "" {
		parts = append(parts, "generated/ ("+f.shim+")")
	}
	apis := f.apis
	more := 0
	if max > 0 && len(apis) > max {
		more = len(apis) - max
		apis = apis[:max]
	}
	parts = append(parts, apis...)
	if more > 0 {
		parts = append(parts, fmt.Sprintf("+%d more", more))
	}
	if len(parts) > 0 {
		return strings.Join(parts, ", ")
	}
	s := "NOT WRAPPED"
	if why := refusedBySafe[f.cName]; why != "" {
		s = "refused: " + why
	} else if f.multiGPU {
		s = "pending (multi-GPU)"
	}
	if len(f.orphans) > 0 {
		s += " (referenced only by " + strings.Join(f.orphans, ", ") + ", which no exported API reaches)"
	}
	return s
}

// shimFunc matches the start of a top-level C function definition.
var shimFunc = regexp.MustCompile(`(?m)^[A-Za-z_][A-Za-z0-9_ \*]*?\b([A-Za-z_][A-Za-z0-9_]*)\([^;{]*\)\s*\{`)
var shimSlot = regexp.MustCompile(`cuvsgo_p_([A-Za-z0-9_]+)`)

// shimCallers finds the C functions that the generated shims call on their
// own, outside the shim that wraps each one (cuvsgo_error_text calls
// cuvsGetLastErrorText after every failing call): C name → shim function.
func shimCallers(src []byte) map[string]string {
	out := map[string]string{}
	locs := shimFunc.FindAllSubmatchIndex(src, -1)
	for i, l := range locs {
		name := string(src[l[2]:l[3]])
		end := len(src)
		if i+1 < len(locs) {
			end = locs[i+1][0]
		}
		for _, m := range shimSlot.FindAllSubmatch(src[l[1]:end], -1) {
			c := string(m[1])
			if name != "cuvsgo_"+c && out[c] == "" {
				out[c] = name
			}
		}
	}
	return out
}

// goNode is one declaration of a scanned package: a function, a method
// (name "T.M") or a package-level variable.
type goNode struct {
	pkg     *goPkg
	name    string // F, T.M or a variable's name
	recv    string // T for a method
	ptr     bool   // pointer receiver
	fn      string // F or M
	method  bool
	genRefs map[string]bool // generated.<Name> it mentions
	idents  map[string]bool // bare identifiers it mentions
	sels    map[string]bool // selector names x.<Name> on anything but an imported package
	quals   map[string]bool // "<import path>.<Name>" of the scanned packages it mentions
}

type goPkg struct {
	path, name string
	internal   bool
	imports    map[string]bool // import paths of the scanned packages it imports
	nodes      []*goNode
}

type goGraph struct {
	pkgs  map[string]*goPkg
	byGen map[string][]*goNode
}

// scanGo parses every non-test Go file under dir (import path dirPath) and
// records, per declaration, what it mentions.
func scanGo(dir, dirPath, genPath string) (*goGraph, error) {
	g := &goGraph{pkgs: map[string]*goPkg{}, byGen: map[string][]*goNode{}}
	fset := token.NewFileSet()
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != dir && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".") || strings.HasPrefix(d.Name(), "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if bytes.Contains(src, []byte("//go:build ignore")) {
			return nil
		}
		f, err := parser.ParseFile(fset, p, src, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		if f.Name.Name == "main" {
			return nil
		}
		rel, _ := filepath.Rel(dir, filepath.Dir(p))
		ip := dirPath
		if rel != "." {
			ip = path.Join(dirPath, filepath.ToSlash(rel))
		}
		pk := g.pkgs[ip]
		if pk == nil {
			pk = &goPkg{path: ip, name: f.Name.Name, imports: map[string]bool{}}
			for _, e := range strings.Split(strings.TrimPrefix(ip, dirPath), "/") {
				if e == "internal" {
					pk.internal = true
				}
			}
			g.pkgs[ip] = pk
		}
		g.scanFile(pk, f, dirPath, genPath)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return g, nil
}

func (g *goGraph) scanFile(pk *goPkg, f *ast.File, dirPath, genPath string) {
	alias := map[string]string{} // local name → import path, of generated and the scanned packages
	for _, im := range f.Imports {
		ip := strings.Trim(im.Path.Value, `"`)
		if ip != genPath && ip != dirPath && !strings.HasPrefix(ip, dirPath+"/") {
			continue
		}
		local := path.Base(ip)
		if im.Name != nil {
			local = im.Name.Name
		}
		alias[local] = ip
		if ip != genPath {
			pk.imports[ip] = true
		}
	}
	add := func(n *goNode, body ast.Node) {
		n.pkg = pk
		n.genRefs, n.idents, n.sels, n.quals = map[string]bool{}, map[string]bool{}, map[string]bool{}, map[string]bool{}
		ast.Inspect(body, func(x ast.Node) bool {
			switch x := x.(type) {
			case *ast.SelectorExpr:
				if id, ok := x.X.(*ast.Ident); ok {
					if ip, ok := alias[id.Name]; ok {
						if ip == genPath {
							n.genRefs[x.Sel.Name] = true
						} else {
							n.quals[ip+"."+x.Sel.Name] = true
						}
						return false
					}
				}
				n.sels[x.Sel.Name] = true
			case *ast.Ident:
				n.idents[x.Name] = true
			}
			return true
		})
		pk.nodes = append(pk.nodes, n)
		for r := range n.genRefs {
			g.byGen[r] = append(g.byGen[r], n)
		}
	}
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if d.Body == nil {
				continue
			}
			n := &goNode{name: d.Name.Name, fn: d.Name.Name}
			if d.Recv != nil && len(d.Recv.List) == 1 {
				t := d.Recv.List[0].Type
				if s, ok := t.(*ast.StarExpr); ok {
					n.ptr, t = true, s.X
				}
				switch x := t.(type) {
				case *ast.IndexExpr:
					t = x.X
				case *ast.IndexListExpr:
					t = x.X
				}
				if id, ok := t.(*ast.Ident); ok {
					n.recv, n.method, n.name = id.Name, true, id.Name+"."+d.Name.Name
				}
			}
			add(n, d.Body)
		case *ast.GenDecl:
			if d.Tok != token.VAR {
				continue
			}
			for _, s := range d.Specs {
				vs := s.(*ast.ValueSpec)
				for i, id := range vs.Names {
					if i < len(vs.Values) {
						add(&goNode{name: id.Name, fn: id.Name}, vs.Values[i])
					}
				}
			}
		}
	}
}

// public reports whether n is part of the exported API: an exported
// function or variable, or an exported method of an exported type, of a
// package that is not internal.
func (n *goNode) public() bool {
	if n.pkg.internal || !token.IsExported(n.fn) {
		return false
	}
	return !n.method || token.IsExported(n.recv)
}

func (n *goNode) String() string {
	switch {
	case n.method && n.ptr:
		return "(*" + n.pkg.name + "." + n.recv + ")." + n.fn
	case n.method:
		return "(" + n.pkg.name + "." + n.recv + ")." + n.fn
	}
	return n.pkg.name + "." + n.fn
}

// callers are the declarations that mention n: by name inside its package
// (a function or variable by identifier, a method by selector), a function
// or variable by a qualified name in other packages, an exported method by
// selector in the packages that import n's package.
func (g *goGraph) callers(n *goNode) []*goNode {
	var out []*goNode
	for _, pk := range g.pkgs {
		same := pk == n.pkg
		if !same && !pk.imports[n.pkg.path] {
			continue
		}
		for _, m := range pk.nodes {
			if m == n {
				continue
			}
			switch {
			case n.method && (same || token.IsExported(n.fn)) && m.sels[n.fn]:
			case !n.method && same && m.idents[n.fn]:
			case !n.method && !same && m.quals[n.pkg.path+"."+n.fn]:
			default:
				continue
			}
			out = append(out, m)
		}
	}
	return out
}

// reach is the exported Go APIs that reach the generated function goName,
// walking up from each declaration that mentions it through its callers and
// stopping at exported ones; orphans are the declarations that mention it
// but from which no exported API is reached.
func (g *goGraph) reach(goName string) (apis, orphans []string) {
	seenAPI := map[string]bool{}
	for _, start := range g.byGen[goName] {
		found := false
		seen := map[*goNode]bool{start: true}
		queue := []*goNode{start}
		for len(queue) > 0 {
			n := queue[0]
			queue = queue[1:]
			if n.public() {
				found = true
				seenAPI[n.String()] = true
				continue
			}
			for _, c := range g.callers(n) {
				if !seen[c] {
					seen[c] = true
					queue = append(queue, c)
				}
			}
		}
		if !found {
			orphans = append(orphans, start.String())
		}
	}
	for a := range seenAPI {
		apis = append(apis, a)
	}
	sort.Strings(apis)
	sort.Strings(orphans)
	if len(apis) > 0 {
		orphans = nil
	}
	return apis, orphans
}
