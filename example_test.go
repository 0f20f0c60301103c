package mcpgrain_test

import (
	"context"
	"fmt"
	"os"
	"os/signal"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain"
)

type greetArgs struct {
	Name string `json:"name" jsonschema:"who to greet"`
}

func greet(_ context.Context, _ *mcp.CallToolRequest, args greetArgs) (*mcp.CallToolResult, any, error) {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "Hello, " + args.Name + "!"}}}, nil, nil
}

// A program's main: the server is defined with go-sdk's API, and the
// binary runs `prog dev` or `prog node` with mcpgrain's flags.
func ExampleMain() {
	mcpgrain.Main(mcpgrain.Server{
		Name:    "hello",
		Version: "1.0.0",
		Register: func(s *mcp.Server) {
			mcp.AddTool(s, &mcp.Tool{Name: "greet", Description: "Say hello to someone."}, greet)
		},
	})
}

// Run a one-node dev server from your own code (a test, a larger
// program), until ctx is done; the server's tools are served alongside
// the built-in demo pack.
func ExampleRun() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	s := mcpgrain.Server{
		Name:     "hello",
		Register: func(s *mcp.Server) { mcp.AddTool(s, &mcp.Tool{Name: "greet"}, greet) },
		With:     []string{"demo"},
	}
	args := []string{"dev", "--no-auth", "--http", "127.0.0.1:8080", "--data", os.TempDir()}
	if err := mcpgrain.Run(ctx, s, args, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
}

// A Server is a pack, the mechanism of mcpgrain's built-in packs.
func ExampleServer_Pack() {
	s := mcpgrain.Server{Name: "hello", Register: func(s *mcp.Server) { mcp.AddTool(s, &mcp.Tool{Name: "greet"}, greet) }}
	p, err := s.Pack()
	fmt.Println(p.Name, err)
	_, err = mcpgrain.Server{Name: "demo", Register: s.Register}.Pack()
	fmt.Println(err)
	// Output:
	// hello <nil>
	// mcpgrain: Server "demo": toolpacks: two packs are named "demo"
}

type deployArgs struct {
	Service string `json:"service"`
	Version string `json:"version"`
}

// deployNow stands for the real deployment.
func deployNow(_ context.Context, service, version string) (string, error) {
	return "dep-" + service + "-" + version, nil
}

// A tool that asks a human before it acts. The call waits until someone
// decides on an approval surface (or the window lapses), also across the
// loss of its node (the client retries the call).
func ExampleAsk() {
	deploy := func(ctx context.Context, req *mcp.CallToolRequest, args deployArgs) (*mcp.CallToolResult, any, error) {
		d, err := mcpgrain.Ask(ctx, req, mcpgrain.Question{
			Summary: "Deploy " + args.Service + " " + args.Version + "?",
			Details: map[string]any{"service": args.Service, "version": args.Version},
		})
		if err != nil {
			return nil, nil, err // interrupted: the client's retry continues the call
		}
		if !d.Accepted {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "declined by " + d.By + ": " + d.Reason}}}, nil, nil
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "approved by " + d.By}}}, nil, nil
	}
	mcpgrain.Main(mcpgrain.Server{Name: "deploy", Register: func(s *mcp.Server) {
		mcp.AddTool(s, &mcp.Tool{Name: "deploy"}, deploy)
	}})
}

// Work that must happen once per tool call goes in a Step: when the
// handler runs again for the same call (after a node loss), the step
// returns its journaled result instead of deploying again.
func ExampleStep() {
	deploy := func(ctx context.Context, req *mcp.CallToolRequest, args deployArgs) (*mcp.CallToolResult, any, error) {
		d, err := mcpgrain.Ask(ctx, req, mcpgrain.Question{Summary: "Deploy " + args.Service + "?"})
		if err != nil || !d.Accepted {
			return nil, nil, fmt.Errorf("not approved: %v %s", err, d.Reason)
		}
		id, err := mcpgrain.Step(ctx, req, "deploy", func(ctx context.Context) (string, error) {
			return deployNow(ctx, args.Service, args.Version)
		})
		if err != nil {
			return nil, nil, err
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "deployment " + id}}}, nil, nil
	}
	mcpgrain.Main(mcpgrain.Server{Name: "deploy", Register: func(s *mcp.Server) {
		mcp.AddTool(s, &mcp.Tool{Name: "deploy"}, deploy)
	}})
}
