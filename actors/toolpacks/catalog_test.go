package toolpacks_test

import (
	"context"
	"errors"
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
	changed := make(chan string, 4)
	watch := func(s *mcp.Server, who string) *mcp.ClientSession {
		return connect(t, s, &mcp.ClientOptions{PromptListChangedHandler: func(context.Context, *mcp.PromptListChangedRequest) {
			changed <- who
		}}, legacyProtocol)
	}
	a, b := newServerIn(t, catalog), newServerIn(t, catalog)
	watch(b, "b")
	wantText(t, callTool(t, watch(a, "a"), &mcp.CallToolParams{Name: "test_trigger_prompt_change"}),
		"The prompt list changed: notifications/prompts/list_changed was sent.")
	heard := map[string]bool{receive(t, changed, "a list change"): true, receive(t, changed, "a second list change"): true}
	if !heard["a"] || !heard["b"] {
		t.Fatalf("sessions that heard the change: %v, want a and b", heard)
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
