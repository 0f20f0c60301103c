package toolpacks_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/actors/toolpacks"
)

// newServerIn builds a conformance server on catalog.
func newServerIn(t *testing.T, catalog *toolpacks.Catalog) *mcp.Server {
	t.Helper()
	s, closeSrv, err := toolpacks.NewServer(testImpl, []string{"conformance"}, toolpacks.Options{Catalog: catalog})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeSrv)
	return s
}

// A change applied through a catalog reaches the sessions of every server
// of the catalog, and the broadcast gets its name for the other nodes.
func TestCatalogChangeReachesEveryServerAndTheBroadcast(t *testing.T) {
	catalog := toolpacks.NewCatalog()
	broadcast := make(chan string, 1)
	catalog.SetBroadcast(func(_ context.Context, name string) error { broadcast <- name; return nil })
	changed := make(chan string, 8)
	watch := func(s *mcp.Server, who string) *mcp.ClientSession {
		return connect(t, s, &mcp.ClientOptions{PromptListChangedHandler: func(context.Context, *mcp.PromptListChangedRequest) {
			changed <- who
		}}, legacyProtocol)
	}
	a, b := newServerIn(t, catalog), newServerIn(t, catalog)
	watch(b, "b")
	wantText(t, callTool(t, watch(a, "a"), &mcp.CallToolParams{Name: "test_trigger_prompt_change"}),
		"The prompt list changed: notifications/prompts/list_changed was sent.")
	// go-sdk debounces a server's list_changed notifications, but on a
	// loaded machine the add and the remove may be announced apart: a
	// session may hear the change twice. Both must hear it; receive fails
	// the test if one never does.
	heard := map[string]bool{}
	for !heard["a"] || !heard["b"] {
		heard[receive(t, changed, fmt.Sprintf("a list change (heard so far: %v)", heard))] = true
	}
	if name := receive(t, broadcast, "the broadcast"); name != "conformance/transient-prompt" {
		t.Fatalf("broadcast %q", name)
	}
}

// A change the broadcast could not take to every node is still made here,
// and the trigger says what did not happen.
func TestCatalogChangeThatMissesNodesIsAToolError(t *testing.T) {
	catalog := toolpacks.NewCatalog()
	catalog.SetBroadcast(func(context.Context, string) error { return errors.New("node n2 did not answer") })
	changed := make(chan struct{}, 1)
	cs := connect(t, newServerIn(t, catalog), &mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
		changed <- struct{}{}
	}}, legacyProtocol)
	wantToolError(t, callTool(t, cs, &mcp.CallToolParams{Name: "test_trigger_tool_change"}), "reached only part of the cluster", "node n2 did not answer")
	receive(t, changed, "the local list change")
}

// A node asked to apply a change no pack of it defines says so; a closed
// server's changes are forgotten.
func TestCatalogApplyLocalOfAnUnknownChange(t *testing.T) {
	catalog := toolpacks.NewCatalog()
	if err := catalog.ApplyLocal("conformance/transient-tool"); err == nil || !strings.Contains(err.Error(), "unknown catalog change") {
		t.Fatalf("a change before any server: %v", err)
	}
	_, closeSrv, err := toolpacks.NewServer(testImpl, []string{"conformance"}, toolpacks.Options{Catalog: catalog})
	if err != nil {
		t.Fatal(err)
	}
	if err := catalog.ApplyLocal("conformance/transient-tool"); err != nil {
		t.Fatalf("a change of the server's pack: %v", err)
	}
	closeSrv()
	if err := catalog.ApplyLocal("conformance/transient-tool"); err == nil {
		t.Fatal("a closed server's change was still applied")
	}
}
