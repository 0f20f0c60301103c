package handle

import (
	"context"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A tools/call's context tells Mint its tool; another request's none.
func TestWithToolNotesTheCalledTool(t *testing.T) {
	ctx := context.Background()
	if got := toolOf(withTool(ctx, &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: "greet"}})); got != "greet" {
		t.Errorf("tools/call: tool %q", got)
	}
	if got := toolOf(withTool(ctx, &mcp.ListToolsRequest{})); got != "" {
		t.Errorf("tools/list: tool %q", got)
	}
	if got := toolOf(withTool(ctx, &mcp.CallToolRequest{})); got != "" {
		t.Errorf("a call without params: tool %q", got)
	}
}

// maxWithToolAllocs bounds the objects of noting a call's tool: the value
// context (the request in it). 2 before: the name was boxed.
const maxWithToolAllocs = 1

func TestWithToolAllocations(t *testing.T) {
	if raceDetector {
		t.Skip("the race detector changes allocation counts")
	}
	req := &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: "greet"}}
	var ctx context.Context
	allocs := testing.AllocsPerRun(100, func() { ctx = withTool(context.Background(), req) })
	t.Logf("%.1f allocations a call", allocs)
	if toolOf(ctx) != "greet" {
		t.Fatal("tool lost")
	}
	if allocs > maxWithToolAllocs {
		t.Fatalf("%.1f allocations a call, want ≤ %d", allocs, maxWithToolAllocs)
	}
}
