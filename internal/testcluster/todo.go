package testcluster

import (
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/mcpgrain/mcpgrain/actors/tools/demo"
)

// TodoAPI serves the demo to-do API from the test process, shared by
// every node (so side effects are counted across node deaths and
// restarts), and returns it with the --openapi flag value that makes it
// code-mode tool source "todo".
func TodoAPI(t testing.TB) (*demo.API, string) {
	t.Helper()
	api := demo.NewAPI()
	ts := httptest.NewServer(api.Handler())
	t.Cleanup(ts.Close)
	spec := filepath.Join(t.TempDir(), "todo.json")
	if err := os.WriteFile(spec, api.Spec(ts.URL), 0o600); err != nil {
		t.Fatal(err)
	}
	return api, "todo=" + spec
}
