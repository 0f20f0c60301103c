package toolpacks_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/actors/toolpacks"
)

// Validate a --tool-packs flag once, build the node's server from it, and
// serve it over Streamable HTTP; a client then calls a pack's tool.
func Example() {
	if err := toolpacks.Validate([]string{"demo", "x"}); err != nil {
		fmt.Println(err)
	}
	packs := strings.Split("demo", ",")
	if err := toolpacks.Validate(packs); err != nil {
		panic(err)
	}
	server, closeServer, err := toolpacks.NewServer(&mcp.Implementation{Name: "mcpgrain", Version: "example"}, packs, toolpacks.Options{})
	if err != nil {
		panic(err)
	}
	defer closeServer()
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)
	ts := httptest.NewServer(handler)
	defer ts.Close()

	ctx := context.Background()
	client := mcp.NewClient(&mcp.Implementation{Name: "example-client", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: ts.URL}, nil)
	if err != nil {
		panic(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hello"}})
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Content[0].(*mcp.TextContent).Text)
	// Output:
	// unknown tool pack "x" (known: code, demo, conformance)
	// hello
}
