// Command gen generates the raw cuVS bindings in generated/ from the cuVS
// and DLPack C headers.
//
//	go run ./gen [flags]          regenerate generated/
//	go run ./gen diff OLD NEW     compare two APIs (api.json files or header trees)
//
// Headers are found through -cuvs-include / -dlpack-include, then the
// CUVS_INCLUDE_DIR / DLPACK_INCLUDE_DIR environment variables, then
// $CONDA_PREFIX/include. With no cuVS headers found, the bindings are
// regenerated from the committed generated/api.json, which leaves the tree
// unchanged unless the generator itself changed.
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
	"github.com/cuvs-go/cuvs/gen/internal/parse"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

type config struct {
	cuvsInclude, dlpackInclude, cuvsVersion, out, fromAPI string
	check, quiet, hnsw, multiGPU, ctypes                  bool
}

func (c *config) flags(fs *flag.FlagSet) {
	fs.StringVar(&c.cuvsInclude, "cuvs-include", "", "folder holding cuvs/core/c_api.h (default $CUVS_INCLUDE_DIR, then $CONDA_PREFIX/include)")
	fs.StringVar(&c.dlpackInclude, "dlpack-include", "", "folder holding dlpack/dlpack.h (default $DLPACK_INCLUDE_DIR, then $CONDA_PREFIX/include, then the cuVS include folder)")
	fs.StringVar(&c.cuvsVersion, "cuvs-version", "", "cuVS version the headers are from (default $CUVS_VERSION, else read from the source tree or conda metadata)")
	fs.BoolVar(&c.hnsw, "hnsw", true, "generate the HNSW functions (CUVS_BUILD_CAGRA_HNSWLIB)")
	fs.BoolVar(&c.multiGPU, "multi-gpu", true, "generate the multi-GPU functions (CUVS_BUILD_MG_ALGOS)")
}

func run(args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "diff" {
		return runDiff(args[1:], stdout)
	}
	var c config
	fs := flag.NewFlagSet("gen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c.flags(fs)
	fs.StringVar(&c.out, "out", "", "output folder (default generated/ at the module root)")
	fs.StringVar(&c.fromAPI, "from-api", "", "regenerate from this api.json instead of headers")
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
	api, source, err := c.load()
	if err != nil {
		return err
	}
	files, err := emit.Files(api)
	if err != nil {
		return err
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
		fmt.Fprintf(stderr, "gen: %s: %d functions, %d structs, %d enums, %d typedefs; %d files changed; %s\n",
			source, len(api.Functions), len(api.Structs), len(api.Enums), len(api.Typedefs), len(changed),
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

// load parses headers when they can be found, else reads api.json.
func (c *config) load() (*model.API, string, error) {
	if c.fromAPI != "" {
		a, err := model.ReadFile(c.fromAPI)
		return a, c.fromAPI, err
	}
	opts, ok, err := c.headerOptions()
	if err != nil {
		return nil, "", err
	}
	if !ok {
		p := filepath.Join(c.out, emit.APIJSON)
		a, err := model.ReadFile(p)
		if errors.Is(err, os.ErrNotExist) {
			return nil, "", fmt.Errorf("no cuVS headers found (set CUVS_INCLUDE_DIR or -cuvs-include) and no %s to regenerate from", p)
		}
		return a, "committed api.json (no cuVS headers found)", err
	}
	a, err := parse.Headers(opts)
	return a, "headers in " + opts.CuvsInclude, err
}

func (c *config) headerOptions() (parse.Options, bool, error) {
	o := parse.Options{HNSW: c.hnsw, MultiGPU: c.multiGPU}
	conda := os.Getenv("CONDA_PREFIX")
	o.CuvsInclude = first(c.cuvsInclude, os.Getenv("CUVS_INCLUDE_DIR"))
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
	o.CuvsVersion = first(c.cuvsVersion, os.Getenv("CUVS_VERSION"), versionNear(o.CuvsInclude), condaVersion(conda))
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
	for _, n := range names {
		p := filepath.Join(dir, n)
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
	asJSON := fs.Bool("json", false, "print the changes as JSON lines")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 2 {
		return errors.New("usage: gen diff [flags] OLD NEW (each an api.json file or a cuVS header tree)")
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
	_, err := io.WriteString(stdout, model.FormatChanges(apis[0], apis[1], cs))
	return err
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
