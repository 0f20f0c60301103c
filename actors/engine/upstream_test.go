package engine_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/actors/engine"
	"github.com/mcpgrain/mcpgrain/actors/policy"
	"github.com/mcpgrain/mcpgrain/actors/sandbox"
	"github.com/mcpgrain/mcpgrain/actors/tools"
	"github.com/mcpgrain/mcpgrain/actors/tools/mcpupstream"
	"github.com/mcpgrain/mcpgrain/cluster/clock"
)

// TestUpstreamToolsPauseUnlessMarkedReadOnly: an upstream MCP server's tool
// runs without approval only when it says readOnlyHint true (MCP presumes
// any other tool destructive), unless a policy says otherwise. The upstream
// is a real go-sdk server over HTTP; each tool counts the calls it got.
func TestUpstreamToolsPauseUnlessMarkedReadOnly(t *testing.T) {
	yes, no := true, false
	cases := []struct {
		tool   string
		a      *mcp.ToolAnnotations
		pauses bool
	}{
		{"plain", nil, true},
		{"titled", &mcp.ToolAnnotations{Title: "Titled"}, true},
		{"additive", &mcp.ToolAnnotations{DestructiveHint: &no}, true},
		{"idempotent", &mcp.ToolAnnotations{IdempotentHint: true}, true},
		{"closed_world", &mcp.ToolAnnotations{OpenWorldHint: &no}, true},
		{"destructive", &mcp.ToolAnnotations{DestructiveHint: &yes}, true},
		{"read_only_yet_destructive", &mcp.ToolAnnotations{ReadOnlyHint: true, DestructiveHint: &yes}, true},
		{"read_only", &mcp.ToolAnnotations{ReadOnlyHint: true}, false},
		{"read_only_not_destructive", &mcp.ToolAnnotations{ReadOnlyHint: true, DestructiveHint: &no}, false},
		{"trusted_plain", nil, false},                                    // approved by policy
		{"watched_read", &mcp.ToolAnnotations{ReadOnlyHint: true}, true}, // paused by policy
	}
	var mu sync.Mutex
	calls := map[string]int{}
	server := mcp.NewServer(&mcp.Implementation{Name: "up", Version: "1"}, nil)
	for _, tc := range cases {
		server.AddTool(&mcp.Tool{Name: tc.tool, InputSchema: map[string]any{"type": "object"}, Annotations: tc.a},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				mu.Lock()
				calls[tc.tool]++
				mu.Unlock()
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ran " + tc.tool}}}, nil
			})
	}
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil))
	t.Cleanup(ts.Close)
	src, err := mcpupstream.New(t.Context(), mcpupstream.Options{Name: "up", Endpoint: ts.URL})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = src.Close() })
	reg, err := tools.NewRegistry(src)
	if err != nil {
		t.Fatal(err)
	}
	set, err := policy.New([]policy.Rule{
		{Pattern: "up.trusted_plain", Action: policy.Approve},
		{Pattern: "up.watched_read", Action: policy.RequireApproval},
	})
	if err != nil {
		t.Fatal(err)
	}
	e := engine.New(engine.Config{Tools: reg, Policy: set, Clock: clock.NewFake(time.UnixMilli(2_000_000_000_000)),
		ApprovalWindow: time.Minute, Limits: sandbox.Limits{WallTime: 10 * time.Second}})
	t.Cleanup(e.Shutdown)

	for _, tc := range cases {
		out := e.ExecuteWithPause(context.Background(), `return await tools.up.`+tc.tool+`({})`, alice)
		mu.Lock()
		n := calls[tc.tool]
		mu.Unlock()
		switch {
		case tc.pauses && (out.Status != engine.StatusPaused || n != 0):
			t.Errorf("%s: %s with %d calls, want paused before any call (%+v)", tc.tool, out.Status, n, out)
		case !tc.pauses && (out.Status != engine.StatusCompleted || n != 1 || out.Result.Value != "ran "+tc.tool):
			t.Errorf("%s: %s with %d calls, want completed without approval (%+v)", tc.tool, out.Status, n, out)
		}
		if out.Status == engine.StatusPaused {
			if out.Pause.ApprovalText != "Call upstream tool "+tc.tool {
				t.Errorf("%s: approval text %q", tc.tool, out.Pause.ApprovalText)
			}
			e.Resume(context.Background(), out.Pause.ID, engine.System, engine.Response{Action: engine.Decline})
		}
	}
}
