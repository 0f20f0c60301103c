package mcpupstream_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/actors/tools/mcpupstream"
)

// A watcher hears of a tool the upstream adds (its list_changed) and reads
// the new list, with the upstream's annotations, from MCPTools; after stop
// it hears nothing (while another watcher does).
func TestWatchHearsTheUpstreamsListChanged(t *testing.T) {
	protocols(t, func(t *testing.T, version string) {
		u := newUpstream(t)
		src := u.connect(t, mcpupstream.Options{ProtocolVersion: version})
		changed := make(chan struct{}, 8)
		stop := src.Watch(func() { changed <- struct{}{} })
		if names := toolNames(src.MCPTools(t.Context())); slices.Contains(names, "new_tool") || !slices.Contains(names, "read_file") {
			t.Fatalf("tools before the change: %v", names)
		}
		u.server.AddTool(&mcp.Tool{Name: "new_tool", Description: "Added later.", InputSchema: objectSchema,
			Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "new"}}}, nil
			})
		select {
		case <-changed:
		case <-time.After(20 * time.Second):
			t.Fatal("the watcher did not hear of the new tool")
		}
		list := src.MCPTools(t.Context())
		i := slices.IndexFunc(list, func(tool *mcp.Tool) bool { return tool.Name == "new_tool" })
		if i < 0 || list[i].Annotations == nil || !list[i].Annotations.ReadOnlyHint {
			t.Fatalf("tools after the change: %v", toolNames(list))
		}
		other := make(chan struct{}, 8)
		src.Watch(func() { other <- struct{}{} })
		stop()
		u.server.RemoveTools("new_tool")
		select {
		case <-other:
		case <-time.After(20 * time.Second):
			t.Fatal("the watcher did not hear of the removed tool")
		}
		if slices.Contains(toolNames(src.MCPTools(t.Context())), "new_tool") {
			t.Fatal("the removed tool is still listed")
		}
		select {
		case <-changed:
			t.Fatal("a stopped watcher was called")
		default:
		}
	})
}

func toolNames(list []*mcp.Tool) []string {
	var names []string
	for _, tool := range list {
		names = append(names, tool.Name)
	}
	return names
}
