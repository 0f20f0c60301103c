package layers

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// sdkRuntime is the package the root package's handler calls are
// implemented in (a lower layer cannot import the root package).
const sdkRuntime = module + "actors/app"

// The built-in demo pack is written as a user's server is: besides the
// standard library, go-sdk and jsonschema-go it imports only the SDK's
// runtime package (actors/app), and every name it uses from there is one
// the root package mcpgrain re-exports (a user calls it as mcpgrain.X).
func TestDemoIsWrittenOnThePublicAPI(t *testing.T) {
	checkPublicPack(t, "demo", "Elicit")
}

// The built-in conformance pack is written as the demo pack is: its
// server-level handlers, clock, catalog changes and background work reach
// the node through the public pack mechanism (Pack's Setup, Env,
// Handlers), and it asks with Elicit.
func TestConformanceIsWrittenOnThePublicAPI(t *testing.T) {
	checkPublicPack(t, "conformance", "Elicit", "Env", "Handlers", "Clock", "Catalog")
}

// checkPublicPack fails unless the built-in pack actors/toolpacks/name
// imports only what a user's pack may ([publicImport]) and uses from the
// SDK's runtime package only names the root package re-exports, among
// them each of mustUse (so that the check cannot pass vacuously).
func checkPublicPack(t *testing.T, name string, mustUse ...string) {
	t.Helper()
	pkgs := list(t)
	find := func(path string) listed {
		i := slices.IndexFunc(pkgs, func(p listed) bool { return p.ImportPath == path })
		if i < 0 {
			t.Fatalf("no package %s", path)
		}
		return pkgs[i]
	}
	pack, root := find(module+"actors/toolpacks/"+name), find(strings.TrimSuffix(module, "/"))
	for _, imp := range pack.Imports {
		if !publicImport(imp) {
			t.Errorf("the %s pack imports %s: only the standard library, go-sdk, jsonschema-go and %s are a user's", name, imp, sdkRuntime)
		}
	}
	used, exported := runtimeNames(t, pack), runtimeNames(t, root)
	for _, want := range mustUse {
		if !used[want] {
			t.Errorf("the %s pack does not use %s.%s: is it still written on the SDK's pack mechanism and calls?", name, sdkRuntime, want)
		}
	}
	for n := range used {
		if !exported[n] {
			t.Errorf("the %s pack uses %s.%s, which the root package does not re-export", name, sdkRuntime, n)
		}
	}
}

// publicImport reports whether a pack written by a user may import path.
func publicImport(path string) bool {
	first, _, _ := strings.Cut(path, "/")
	switch {
	case path == sdkRuntime:
		return true
	case strings.HasPrefix(path, module):
		return false
	case !strings.Contains(first, "."):
		return true // the standard library
	}
	return strings.HasPrefix(path, "github.com/modelcontextprotocol/go-sdk/") || strings.HasPrefix(path, "github.com/google/jsonschema-go/")
}

// runtimeNames are the names p's files use from the SDK's runtime package.
func runtimeNames(t *testing.T, p listed) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	fset := token.NewFileSet()
	for _, file := range p.GoFiles {
		f, err := parser.ParseFile(fset, filepath.Join(p.Dir, file), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		local := ""
		for _, imp := range f.Imports {
			if path, _ := strconv.Unquote(imp.Path.Value); path == sdkRuntime {
				local = "app"
				if imp.Name != nil {
					local = imp.Name.Name
				}
			}
		}
		if local == "" {
			continue
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok {
				if x, ok := sel.X.(*ast.Ident); ok && x.Name == local {
					names[sel.Sel.Name] = true
				}
			}
			return true
		})
	}
	return names
}
