// Command hello is the smallest MCP server on mcpgrain: one tool, greet,
// defined with go-sdk's own API. Run it as a node:
//
//	go run ./examples/hello dev --no-auth
//
// and call greet at http://127.0.0.1:8080/mcp with any MCP client. The
// same binary runs a cluster member with `hello node` (docs/sdk.md).
package main

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain"
)

// GreetArgs are the greet tool's arguments.
type GreetArgs struct {
	Name string `json:"name" jsonschema:"who to greet"`
}

// greet says hello to args.Name.
func greet(_ context.Context, _ *mcp.CallToolRequest, args GreetArgs) (*mcp.CallToolResult, any, error) {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "Hello, " + args.Name + "!"}}}, nil, nil
}

func main() {
	mcpgrain.Main(mcpgrain.Server{
		Name:    "hello",
		Version: "1.0.0",
		Register: func(s *mcp.Server) {
			mcp.AddTool(s, &mcp.Tool{Name: "greet", Description: "Say hello to someone."}, greet)
		},
	})
}
