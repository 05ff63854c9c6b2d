// Command gen generates the raw cuVS bindings in generated/ from the cuVS
// and DLPack C headers of one or more cuVS releases.
//
//	go run ./gen [flags]          regenerate generated/
//	go run ./gen diff OLD NEW     compare two APIs (model files or header trees)
//	go run ./gen coverage         which Go API reaches each C function of each release
//
// The bindings serve a window of releases; each has its model committed in
// generated/api/v<major.minor>.json (what the parser made of its headers).
// Header trees are given with -cuvs-include (repeatable, one per release,
// with -cuvs-version in the same order when the tree does not tell its
// version), else $CUVS_INCLUDE_DIR (a list, separated by ':', versions in
// $CUVS_VERSION separated by ','), else $CONDA_PREFIX/include. Each tree
// parsed replaces the model of its release or adds a release; the
// committed models of the other releases are kept (delete a model file to
// drop its release). With no headers, the bindings are regenerated from
// the committed models alone, which leaves the tree unchanged unless the
// generator itself changed. See gen/README.md.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/cuvs-go/cuvs/gen/internal/cforgo"
	"github.com/cuvs-go/cuvs/gen/internal/emit"
	"github.com/cuvs-go/cuvs/gen/internal/model"
	"github.com/cuvs-go/cuvs/gen/internal/names"
	"github.com/cuvs-go/cuvs/gen/internal/parse"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

type config struct {
	cuvsInclude, dlpackInclude, cuvsVersion, out string
	check, quiet, hnsw, multiGPU, ctypes         bool
	includes, versions, fromAPI                  []string
}

// listFlag is a repeatable string flag.
type listFlag struct{ l *[]string }

func (f listFlag) String() string {
	if f.l == nil {
		return ""
	}
	return strings.Join(*f.l, ",")
}
func (f listFlag) Set(s string) error { *f.l = append(*f.l, s); return nil }

func (c *config) flags(fs *flag.FlagSet) {
	fs.StringVar(&c.dlpackInclude, "dlpack-include", "", "folder holding dlpack/dlpack.h (default $DLPACK_INCLUDE_DIR, then $CONDA_PREFIX/include, then the cuVS include folder)")
	fs.BoolVar(&c.hnsw, "hnsw", true, "generate the HNSW functions (CUVS_BUILD_CAGRA_HNSWLIB)")
	fs.BoolVar(&c.multiGPU, "multi-gpu", true, "generate the multi-GPU functions (CUVS_BUILD_MG_ALGOS)")
}

func run(args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "diff" {
		return runDiff(args[1:], stdout)
	}
	if len(args) > 0 && args[0] == "coverage" {
		return runCoverage(args[1:], stdout, stderr)
	}
	var c config
	fs := flag.NewFlagSet("gen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c.flags(fs)
	fs.Var(listFlag{&c.includes}, "cuvs-include", "folder holding cuvs/core/c_api.h of one release; repeat for several (default $CUVS_INCLUDE_DIR, a ':' list, then $CONDA_PREFIX/include)")
	fs.Var(listFlag{&c.versions}, "cuvs-version", "cuVS version of each -cuvs-include, in the same order (default $CUVS_VERSION, a ',' list, else read from the source tree or conda metadata)")
	fs.StringVar(&c.out, "out", "", "output folder (default generated/ at the module root)")
	fs.Var(listFlag{&c.fromAPI}, "from-api", "regenerate from these models (repeatable) instead of the committed ones and headers")
	fs.BoolVar(&c.check, "check", false, "write nothing; fail if the output folder differs from what would be generated")
	fs.BoolVar(&c.quiet, "q", false, "print nothing on success")
	fs.BoolVar(&c.ctypes, "ctypes", true, "also run c-for-go (cuvs.yml) to generate "+CTypesDir+"/ in the output folder: its types and a test comparing them with ours")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if c.out == "" {
		root, err := moduleRoot()
		if err != nil {
			return err
		}
		c.out = filepath.Join(root, "generated")
	}
	start := time.Now()
	models, source, err := c.load()
	if err != nil {
		return err
	}
	api, err := model.Merge(models)
	if err != nil {
		return err
	}
	files, err := emit.Files(api)
	if err != nil {
		return err
	}
	for _, m := range models {
		b, err := m.Marshal()
		if err != nil {
			return err
		}
		files[emit.APIFile(model.ReleaseOf(m.CuvsVersion))] = b
	}
	changed, err := sync(c.out, files, c.check)
	if err != nil {
		return err
	}
	if c.ctypes {
		ch, err := c.runCForGo(api, files[emit.DeclsHeader])
		if err != nil {
			return err
		}
		changed = append(changed, ch...)
	}
	if c.check && len(changed) > 0 {
		return fmt.Errorf("%s is stale, run make generate; differing: %s", c.out, strings.Join(changed, ", "))
	}
	if !c.quiet {
		var rels []string
		for _, r := range api.Releases {
			rels = append(rels, r.Name)
		}
		fmt.Fprintf(stderr, "gen: %s: releases %s: %d functions, %d structs, %d enums, %d typedefs; %d files changed; %s\n",
			source, strings.Join(rels, ", "), len(api.Functions), len(api.Structs), len(api.Enums), len(api.Typedefs), len(changed),
			time.Since(start).Round(time.Millisecond))
	}
	return nil
}

// CTypesDir is where, inside the output folder, c-for-go's package goes:
// internal to generated/, so it is no part of the API; its only job is its
// test, a second opinion on our layouts and enum values (see
// gen/internal/cforgo).
const CTypesDir = "internal/ctypes"

// runCForGo generates c-for-go's package CTypesDir beside the other output
// from the declarations header, or with -check compares it.
func (c *config) runCForGo(api *model.API, decls []byte) ([]string, error) {
	root, err := moduleRoot()
	if err != nil {
		return nil, err
	}
	manifest := filepath.Join(root, "cuvs.yml")
	outDir := filepath.Join(c.out, filepath.FromSlash(CTypesDir))
	header := filepath.Join(c.out, emit.DeclsHeader)
	ctx := context.Background()
	if !c.check {
		before := readTree(outDir)
		if err := cforgo.Run(ctx, manifest, header, outDir, api); err != nil {
			return nil, fmt.Errorf("c-for-go: %w", err)
		}
		return diffTree(before, readTree(outDir), CTypesDir+"/"), nil
	}
	// -check: generate from the header the generator would write, in memory.
	tmp, err := os.MkdirTemp("", "cuvs-go-check-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	th := filepath.Join(tmp, emit.DeclsHeader)
	if err := os.WriteFile(th, decls, 0o644); err != nil {
		return nil, err
	}
	files, err := cforgo.Generate(ctx, manifest, th, api)
	if err != nil {
		return nil, fmt.Errorf("c-for-go: %w", err)
	}
	want := map[string][]byte{}
	for _, f := range files {
		want[f.Name] = f.Data
	}
	return diffTree(readTree(outDir), want, CTypesDir+"/"), nil
}

func readTree(dir string) map[string][]byte {
	m := map[string][]byte{}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if b, err := os.ReadFile(filepath.Join(dir, e.Name())); err == nil && !e.IsDir() {
			m[e.Name()] = b
		}
	}
	return m
}

func diffTree(a, b map[string][]byte, prefix string) []string {
	var d []string
	for n, x := range a {
		if y, ok := b[n]; !ok || !bytes.Equal(x, y) {
			d = append(d, prefix+n)
		}
	}
	for n := range b {
		if _, ok := a[n]; !ok {
			d = append(d, prefix+n)
		}
	}
	sort.Strings(d)
	return d
}

// load returns the model of every release of the window, oldest first:
// the -from-api models if given; else the committed models, each replaced
// or joined by the model parsed from a header tree of its release.
func (c *config) load() ([]*model.API, string, error) {
	if len(c.fromAPI) > 0 {
		var as []*model.API
		for _, p := range c.fromAPI {
			a, err := model.ReadFile(p)
			if err != nil {
				return nil, "", err
			}
			as = append(as, a)
		}
		return byRelease(as, strings.Join(c.fromAPI, ", "))
	}
	committed, err := readModels(c.out)
	if err != nil {
		return nil, "", err
	}
	includes := c.includes
	versions := c.versions
	if len(includes) == 0 {
		if env := os.Getenv("CUVS_INCLUDE_DIR"); env != "" {
			includes = filepath.SplitList(env)
		}
	}
	if len(versions) == 0 {
		if env := os.Getenv("CUVS_VERSION"); env != "" {
			versions = strings.Split(env, ",")
		}
	}
	if len(versions) > 0 && len(versions) != len(includes) {
		return nil, "", fmt.Errorf("%d header trees but %d cuVS versions: give one version per tree, in the same order", len(includes), len(versions))
	}
	if len(includes) == 0 {
		includes = []string{""} // $CONDA_PREFIX, if it has headers
	}
	var parsed []*model.API
	var dirs []string
	for i, inc := range includes {
		cc := *c
		cc.cuvsInclude, cc.cuvsVersion = inc, ""
		if len(versions) > 0 {
			cc.cuvsVersion = versions[i]
		}
		opts, ok, err := cc.headerOptions()
		if err != nil {
			return nil, "", err
		}
		if !ok {
			if inc != "" {
				return nil, "", fmt.Errorf("no cuVS headers in %s", inc)
			}
			continue
		}
		a, err := parse.Headers(opts)
		if err != nil {
			return nil, "", err
		}
		if model.ReleaseOf(opts.CuvsVersion) == "" {
			return nil, "", fmt.Errorf("cannot tell the cuVS version of the headers in %s: give it with -cuvs-version (or $CUVS_VERSION)", opts.CuvsInclude)
		}
		parsed = append(parsed, a)
		dirs = append(dirs, opts.CuvsInclude)
	}
	if len(parsed) == 0 {
		if len(committed) == 0 {
			return nil, "", fmt.Errorf("no cuVS headers found (set CUVS_INCLUDE_DIR or -cuvs-include) and no models in %s to regenerate from", filepath.Join(c.out, emit.APIDir))
		}
		return byRelease(committed, "committed models (no cuVS headers found)")
	}
	all := map[string]*model.API{}
	for _, a := range committed {
		all[model.ReleaseOf(a.CuvsVersion)] = a
	}
	for _, a := range parsed {
		all[model.ReleaseOf(a.CuvsVersion)] = a
	}
	var as []*model.API
	for _, a := range all {
		as = append(as, a)
	}
	return byRelease(as, "headers in "+strings.Join(dirs, ", ")+" and the other committed models")
}

// byRelease sorts models oldest first and refuses two of one release.
func byRelease(as []*model.API, source string) ([]*model.API, string, error) {
	model.SortReleases(as)
	for i := 1; i < len(as); i++ {
		if model.ReleaseOf(as[i].CuvsVersion) == model.ReleaseOf(as[i-1].CuvsVersion) {
			return nil, "", fmt.Errorf("two models of release %s (%s and %s)", model.ReleaseOf(as[i].CuvsVersion), as[i-1].CuvsVersion, as[i].CuvsVersion)
		}
	}
	return as, source, nil
}

// readModels reads the committed models of dir: api/*.json, else the
// single api.json of the one-release layout.
func readModels(dir string) ([]*model.API, error) {
	ps, _ := filepath.Glob(filepath.Join(dir, emit.APIDir, "v*.json"))
	sort.Strings(ps)
	if len(ps) == 0 {
		if p := filepath.Join(dir, emit.APIJSON); exists(p) {
			ps = []string{p}
		}
	}
	var as []*model.API
	for _, p := range ps {
		a, err := model.ReadFile(p)
		if err != nil {
			return nil, err
		}
		if want := emit.APIFile(model.ReleaseOf(a.CuvsVersion)); filepath.Base(p) != emit.APIJSON && !strings.HasSuffix(filepath.ToSlash(p), "/"+want) {
			return nil, fmt.Errorf("%s holds the model of cuVS %s: it belongs in %s", p, a.CuvsVersion, want)
		}
		as = append(as, a)
	}
	return as, nil
}

func (c *config) headerOptions() (parse.Options, bool, error) {
	o := parse.Options{HNSW: c.hnsw, MultiGPU: c.multiGPU}
	conda := os.Getenv("CONDA_PREFIX")
	o.CuvsInclude = c.cuvsInclude
	if o.CuvsInclude == "" && conda != "" && exists(filepath.Join(conda, "include", "cuvs", "core", "c_api.h")) {
		o.CuvsInclude = filepath.Join(conda, "include")
	}
	if o.CuvsInclude == "" {
		return o, false, nil
	}
	o.CuvsInclude = resolveCuvsInclude(o.CuvsInclude)
	o.DLPackInclude = first(c.dlpackInclude, os.Getenv("DLPACK_INCLUDE_DIR"))
	if o.DLPackInclude == "" {
		candidates := []string{o.CuvsInclude}
		if conda != "" {
			candidates = []string{filepath.Join(conda, "include"), o.CuvsInclude}
		}
		for _, d := range candidates {
			if exists(filepath.Join(d, "dlpack", "dlpack.h")) {
				o.DLPackInclude = d
				break
			}
		}
	}
	if o.DLPackInclude == "" {
		return o, false, fmt.Errorf("cuVS headers in %s but no dlpack/dlpack.h: set DLPACK_INCLUDE_DIR or -dlpack-include", o.CuvsInclude)
	}
	o.CuvsVersion = first(c.cuvsVersion, versionNear(o.CuvsInclude), condaVersion(conda))
	return o, true, nil
}

// resolveCuvsInclude accepts a cuVS checkout or a c/ folder too.
func resolveCuvsInclude(dir string) string {
	for _, d := range []string{dir, filepath.Join(dir, "include"), filepath.Join(dir, "c", "include")} {
		if exists(filepath.Join(d, "cuvs", "core", "c_api.h")) {
			return d
		}
	}
	return dir
}

// versionNear reads cuVS's VERSION file from a source tree holding dir,
// else takes a folder name such as v26.06.00 on the way up.
func versionNear(dir string) string {
	d, err := filepath.Abs(dir)
	if err != nil {
		return ""
	}
	named := ""
	for i := 0; i < 4; i++ {
		if b, err := os.ReadFile(filepath.Join(d, "VERSION")); err == nil {
			return "v" + strings.TrimSpace(string(b))
		}
		if named == "" && releaseDir.MatchString(filepath.Base(d)) {
			named = filepath.Base(d)
		}
		d = filepath.Dir(d)
	}
	return named
}

var releaseDir = regexp.MustCompile(`^v\d+\.\d+\.\d+$`)

// condaVersion reads libcuvs's version from conda's metadata.
func condaVersion(prefix string) string {
	if prefix == "" {
		return ""
	}
	m, _ := filepath.Glob(filepath.Join(prefix, "conda-meta", "libcuvs-[0-9]*.json"))
	sort.Strings(m)
	if len(m) == 0 {
		return ""
	}
	v := strings.TrimPrefix(filepath.Base(m[len(m)-1]), "libcuvs-")
	return "v" + strings.SplitN(v, "-", 2)[0]
}

func first(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func moduleRoot() (string, error) {
	d, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil && bytes.Contains(b, []byte("module github.com/cuvs-go/cuvs\n")) {
			return d, nil
		}
		p := filepath.Dir(d)
		if p == d {
			return "", errors.New("not inside the github.com/cuvs-go/cuvs module; pass -out")
		}
		d = p
	}
}

// sync writes files that differ into dir and reports their names; with
// check it only reports.
func sync(dir string, files map[string][]byte, check bool) ([]string, error) {
	var names []string
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	var changed []string
	if !check {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
	}
	// Models of releases that left the window, and the one-release api.json.
	stale, _ := filepath.Glob(filepath.Join(dir, emit.APIDir, "*.json"))
	stale = append(stale, filepath.Join(dir, emit.APIJSON))
	for _, p := range stale {
		rel, _ := filepath.Rel(dir, p)
		if _, ok := files[filepath.ToSlash(rel)]; ok || !exists(p) {
			continue
		}
		changed = append(changed, filepath.ToSlash(rel))
		if !check {
			if err := os.Remove(p); err != nil {
				return nil, err
			}
		}
	}
	for _, n := range names {
		p := filepath.Join(dir, filepath.FromSlash(n))
		if !check {
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return nil, err
			}
		}
		old, err := os.ReadFile(p)
		if err == nil && bytes.Equal(old, files[n]) {
			continue
		}
		changed = append(changed, n)
		if check {
			continue
		}
		tmp := p + ".tmp"
		if err := os.WriteFile(tmp, files[n], 0o644); err != nil {
			return nil, err
		}
		if err := os.Rename(tmp, p); err != nil {
			return nil, err
		}
	}
	return changed, nil
}

func runDiff(args []string, stdout io.Writer) error {
	var c config
	fs := flag.NewFlagSet("gen diff", flag.ContinueOnError)
	c.flags(fs)
	fs.StringVar(&c.cuvsVersion, "cuvs-version", "", "cuVS version of a header tree that does not tell it")
	asJSON := fs.Bool("json", false, "print the changes as JSON lines")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 2 {
		return errors.New("usage: gen diff [flags] OLD NEW (each a model file, e.g. generated/api/v26.06.json, or a cuVS header tree)")
	}
	var apis [2]*model.API
	for i, p := range fs.Args() {
		a, err := c.loadAny(p)
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		apis[i] = a
	}
	cs := model.Diff(apis[0], apis[1])
	if *asJSON {
		for _, ch := range cs {
			fmt.Fprintf(stdout, "{\"kind\":%q,\"what\":%q,\"name\":%q,\"old\":%q,\"new\":%q}\n", ch.Kind, ch.What, ch.Name, ch.Old, ch.New)
		}
		return nil
	}
	if _, err := io.WriteString(stdout, model.FormatChanges(apis[0], apis[1], cs)); err != nil {
		return err
	}
	_, err := io.WriteString(stdout, bindingsSection(apis[0], apis[1]))
	return err
}

// bindingsSection says what two releases served by one set of bindings
// mean for the Go names (model.Merge): the variants the newer release gets,
// and the functions only one of them has. It is empty when the two are not
// two releases, oldest first.
func bindingsSection(old, new *model.API) string {
	ro, rn := model.ReleaseOf(old.CuvsVersion), model.ReleaseOf(new.CuvsVersion)
	m, err := model.Merge([]*model.API{old, new})
	if ro == "" || rn == "" || err != nil {
		return ""
	}
	var lines []string
	suf := model.Suffix(rn)
	for _, s := range m.Structs {
		if strings.HasSuffix(s.Name(), suf) {
			lines = append(lines, fmt.Sprintf("- type `%s`: `%s` as %s lays it out (`%s` keeps %s's)", names.Go(s.Name()), strings.TrimSuffix(s.CName(), suf), rn, names.Go(strings.TrimSuffix(s.Name(), suf)), ro))
		}
	}
	for _, t := range m.Typedefs {
		if strings.HasSuffix(t.Name, suf) {
			lines = append(lines, fmt.Sprintf("- type `%s`: `%s` as %s declares it", names.Go(t.Name), strings.TrimSuffix(t.Name, suf), rn))
		}
	}
	for _, e := range m.Enums {
		if strings.HasSuffix(e.Name(), suf) {
			lines = append(lines, fmt.Sprintf("- type `%s`: `%s` with %s's values", names.Go(e.Name()), strings.TrimSuffix(e.CName(), suf), rn))
		}
	}
	var onlyOld, onlyNew []string
	for _, f := range m.Functions {
		switch {
		case f.Symbol != "":
			lines = append(lines, fmt.Sprintf("- `%s` binds `%s` for %s (`%s` keeps %s's: it refuses a %s library with ErrNotInRelease)", names.Go(f.Name), f.Symbol, rn, names.Go(f.Symbol), ro, rn))
		case len(f.Releases) == 1 && f.Releases[0] == ro && !hasVariant(m, f.Name):
			onlyOld = append(onlyOld, "`"+names.Go(f.Name)+"`")
		case len(f.Releases) == 1 && f.Releases[0] == rn:
			onlyNew = append(onlyNew, "`"+names.Go(f.Name)+"`")
		}
	}
	if len(onlyOld) > 0 {
		lines = append(lines, fmt.Sprintf("- only in %s (ErrNotInRelease on %s): %s", ro, rn, strings.Join(onlyOld, ", ")))
	}
	if len(onlyNew) > 0 {
		lines = append(lines, fmt.Sprintf("- only in %s (ErrNotInRelease on %s): %s", rn, ro, strings.Join(onlyNew, ", ")))
	}
	if len(lines) == 0 {
		return ""
	}
	return fmt.Sprintf("\n### Go bindings serving %s and %s\n\n%s\n", ro, rn, strings.Join(lines, "\n"))
}

func hasVariant(m *model.API, name string) bool {
	for _, f := range m.Functions {
		if f.Symbol == name {
			return true
		}
	}
	return false
}

func (c *config) loadAny(p string) (*model.API, error) {
	st, err := os.Stat(p)
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		return model.ReadFile(p)
	}
	cc := *c
	cc.cuvsInclude = p
	if cc.cuvsVersion == "" {
		cc.cuvsVersion = versionNear(resolveCuvsInclude(p))
	}
	o, ok, err := cc.headerOptions()
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, errors.New("no cuVS headers there")
	}
	return parse.Headers(o)
}
