package layers

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/mcpgrain/mcpgrain/"

type listed struct {
	ImportPath string
	Dir        string
	GoFiles    []string
	Imports    []string
	Deps       []string
}

// list runs go list over the module's packages.
func list(t *testing.T) []listed {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps=false", "-json", "github.com/mcpgrain/mcpgrain/...").Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("go list: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	var pkgs []listed
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listed
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// layer is the index in Order of the module package path, or -1 for a
// package outside the layers (tools/, deploy/).
func layer(path string) int {
	rel, ok := strings.CutPrefix(path, module)
	if path == strings.TrimSuffix(module, "/") {
		rel, ok = "", true // the root package
	}
	if !ok {
		return -1
	}
	for i, prefix := range Order {
		if rel == prefix || strings.HasPrefix(rel, prefix+"/") {
			return i
		}
	}
	return -1
}

func TestNoPackageImportsAHigherLayer(t *testing.T) {
	pkgs := list(t)
	if len(pkgs) < 20 {
		t.Fatalf("go list found %d packages; expected the whole module", len(pkgs))
	}
	for _, p := range pkgs {
		from := layer(p.ImportPath)
		if from < 0 {
			continue
		}
		for _, imp := range p.Imports {
			if to := layer(imp); to > from {
				t.Errorf("%s (layer %s) imports %s (layer %s)", p.ImportPath, Order[from], imp, Order[to])
			}
		}
	}
}

func TestLayerOf(t *testing.T) {
	for path, want := range map[string]string{
		module + "cluster":               "cluster",
		module + "cluster/clock":         "cluster",
		module + "exchange/requeststate": "exchange",
		module + "actors/session":        "actors",
		module + "internal/app":          "internal",
		module + "cmd/mcpgrain":          "cmd",
		module + "internal/cli":          "internal",
		"github.com/mcpgrain/mcpgrain":   "",
		module + "examples/hello":        "examples",
	} {
		if i := layer(path); i < 0 || Order[i] != want {
			t.Errorf("layer(%s) = %d, want %s", path, i, want)
		}
	}
	if layer(module+"clusterfoo") >= 0 || layer("example.com/cluster") >= 0 {
		t.Error("a path that only shares a prefix got a layer")
	}
}

// The HTTP front door links neither the sandbox nor its TypeScript
// toolchain: a gateway-only node stays small, and gateway code cannot
// reach into grains.
func TestGatewayDoesNotLinkTheSandbox(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", module+"gateway/...").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, banned := range []string{"github.com/grafana/sobek", "github.com/evanw/esbuild", module + "actors/"} {
			if strings.HasPrefix(dep, banned) && !strings.HasPrefix(dep, module+"actors/policy") {
				t.Errorf("gateway depends on %s", dep)
			}
		}
	}
}
