// Command plain is examples/hello before it moved onto mcpgrain: a plain
// go-sdk server with one tool, served over Streamable HTTP. docs/guide.md
// §1 shows it and §2 the change of its main that makes it examples/hello;
// examples/hello's TestGuideDiff keeps the three in step (this program,
// comment lines aside, is the guide's; the guide's diff applied to it is
// examples/hello's program; the diff changes at most 15 lines).
package main

import (
	"context"
	"log"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"
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
	s := mcp.NewServer(&mcp.Implementation{Name: "hello", Version: "1.0.0"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "greet", Description: "Say hello to someone."}, greet)
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	log.Fatal(http.ListenAndServe("127.0.0.1:8080", h))
}
