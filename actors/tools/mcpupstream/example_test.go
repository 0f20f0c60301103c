package mcpupstream_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/actors/tools/mcpupstream"
)

// Proxy an upstream MCP server, here a go-sdk server with one destructive
// tool behind the streamable HTTP handler.
func ExampleNew() {
	server := mcp.NewServer(&mcp.Implementation{Name: "files", Version: "1"}, nil)
	type deleteArgs struct {
		Path string `json:"path"`
	}
	yes := true
	mcp.AddTool(server, &mcp.Tool{
		Name:        "delete_file",
		Description: "Delete a file permanently.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: &yes},
	}, func(_ context.Context, _ *mcp.CallToolRequest, args deleteArgs) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "deleted " + args.Path}}}, nil, nil
	})
	upstream := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil))
	defer upstream.Close()

	ctx := context.Background()
	src, err := mcpupstream.New(ctx, mcpupstream.Options{
		Name:     "files",
		Endpoint: upstream.URL,
		Headers:  http.Header{"Authorization": {"Bearer s3cret"}},
	})
	if err != nil {
		panic(err)
	}
	defer src.Close()

	tool, _ := src.Lookup(ctx, "delete_file")
	fmt.Println(tool.Path, tool.RequiresApproval, tool.ApprovalText)
	out, err := src.Call(ctx, "delete_file", map[string]any{"path": "/tmp/a"})
	if err != nil {
		panic(err)
	}
	fmt.Println(out)
	// Output:
	// files.delete_file true Call upstream tool delete_file
	// deleted /tmp/a
}
