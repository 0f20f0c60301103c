package gateway_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/internal/app"
)

// executeDescription is the execute tool's description in cs's tools/list.
func executeDescription(t *testing.T, cs *mcp.ClientSession) string {
	t.Helper()
	list, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range list.Tools {
		if tool.Name == "execute" {
			return tool.Description
		}
	}
	t.Fatalf("no execute tool in %v", list.Tools)
	return ""
}

// TestExecuteDescriptionDeclaresTheAPI: a node's tools/list shows the
// TypeScript declarations of the demo source's operations in execute's
// description, to legacy and sessionless clients alike.
func TestExecuteDescriptionDeclaresTheAPI(t *testing.T) {
	info := startCodeNode(t, nil)
	for _, version := range []string{"2025-11-25", ""} {
		desc := executeDescription(t, connect(t, info.HTTPAddr, aliceToken, version, nil))
		for _, want := range []string{"## API\n```ts\ndeclare const tools: {\n", "  demo: {\n", "    listTodos(args?: {\n",
			"    createTodo(args: {\n", "      title: string;\n"} {
			if !strings.Contains(desc, want) {
				t.Errorf("%q client: execute description lacks %q:\n%s", version, want, desc)
			}
		}
	}
}

// TestExecuteDescriptionFollowsUpstreamListChanged: when an upstream MCP
// source announces a new tool list, the node registers execute again with
// the new declarations, and a connected client hears list_changed.
func TestExecuteDescriptionFollowsUpstreamListChanged(t *testing.T) {
	up := mcp.NewServer(&mcp.Implementation{Name: "up", Version: "1"}, nil)
	noop := func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{}, nil
	}
	schema := map[string]any{"type": "object", "properties": map[string]any{"path": map[string]any{"type": "string"}}}
	up.AddTool(&mcp.Tool{Name: "read_file", Description: "Read a file.", InputSchema: schema}, noop)
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return up }, nil))
	t.Cleanup(srv.Close)

	info := startCodeNode(t, func(c *app.Config) {
		c.MCP.Code.Upstreams = []app.UpstreamSource{{Name: "up", URL: srv.URL}}
	})
	changed := make(chan struct{}, 8)
	cs := connect(t, info.HTTPAddr, aliceToken, "2025-11-25", &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
	})
	if desc := executeDescription(t, cs); !strings.Contains(desc, "    read_file(args?: {\n") || strings.Contains(desc, "write_file") {
		t.Fatalf("execute description before the change:\n%s", desc)
	}
	up.AddTool(&mcp.Tool{Name: "write_file", Description: "Write a file.", InputSchema: schema}, noop)
	deadline := time.After(60 * time.Second)
	for {
		select {
		case <-changed:
		case <-deadline:
			t.Fatal("no notifications/tools/list_changed with write_file declared")
		}
		if strings.Contains(executeDescription(t, cs), "    write_file(args?: {\n") {
			return
		}
	}
}
