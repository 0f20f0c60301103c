package mcpgrain_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"

	"github.com/google/jsonschema-go/jsonschema"
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
}

// confirmForm is a one-question form: a required yes/no.
var confirmForm = &jsonschema.Schema{
	Type:       "object",
	Properties: map[string]*jsonschema.Schema{"confirm": {Type: "boolean", Title: "Deploy?"}},
	Required:   []string{"confirm"},
}

// deploy asks before it acts. The same code serves both eras: in
// 2026-07-28, Elicit's error is returned and the client's retry (with the
// answer) runs deploy again.
func deploy(ctx context.Context, req *mcp.CallToolRequest, args deployArgs) (*mcp.CallToolResult, any, error) {
	answer, err := mcpgrain.Elicit(ctx, req, "confirm", "Deploy "+args.Service+"?", confirmForm)
	if err != nil {
		return nil, nil, err
	}
	text := "not deployed"
	if answer.Action == "accept" && answer.Content["confirm"] == true {
		text = "deployed " + args.Service
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, nil, nil
}

// A tool asks the user for a confirmation; a go-sdk client answers it in
// a stateful session (2025-11-25: elicitation/create) and in the
// sessionless era (2026-07-28: an input_required round). On a node the
// servers have the middleware already; a plain go-sdk server, as here,
// needs it added.
func ExampleElicit() {
	ctx := context.Background()
	s := mcp.NewServer(&mcp.Implementation{Name: "deployer", Version: "1.0.0"}, nil)
	s.AddReceivingMiddleware(mcpgrain.InputRequiredMiddleware)
	mcp.AddTool(s, &mcp.Tool{Name: "deploy"}, deploy)

	client := mcp.NewClient(&mcp.Implementation{Name: "client", Version: "1.0.0"}, &mcp.ClientOptions{
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			fmt.Println("asked:", req.Params.Message)
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}, nil
		},
	})
	for _, version := range []string{"2025-11-25", "2026-07-28"} {
		ct, st := mcp.NewInMemoryTransports()
		if _, err := s.Connect(ctx, st, nil); err != nil {
			fmt.Println(err)
			return
		}
		cs, err := client.Connect(ctx, ct, &mcp.ClientSessionOptions{ProtocolVersion: version})
		if err != nil {
			fmt.Println(err)
			return
		}
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "deploy", Arguments: map[string]any{"service": "api"}})
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("%s: %s\n", version, res.Content[0].(*mcp.TextContent).Text)
		_ = cs.Close()
	}
	// Output:
	// asked: Deploy api?
	// 2025-11-25: deployed api
	// asked: Deploy api?
	// 2026-07-28: deployed api
}

// notes is one session's notes, saved with the session (declared once, at
// package level).
var notes = mcpgrain.NewState[[]string]("notes", mcpgrain.StateOptions[[]string]{})

type addNoteArgs struct {
	Text string `json:"text"`
}

// A tool that keeps per-session state: the note is saved before the
// result is sent, so it survives the session's hibernation and the loss
// of its node.
func ExampleNewState() {
	addNote := func(ctx context.Context, _ *mcp.CallToolRequest, args addNoteArgs) (*mcp.CallToolResult, any, error) {
		all, err := notes.Update(ctx, func(n *[]string) error {
			*n = append(*n, args.Text)
			return nil
		})
		if err != nil {
			return nil, nil, err
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("%d notes", len(all))}}}, nil, nil
	}
	mcpgrain.Main(mcpgrain.Server{Name: "notes", Register: func(s *mcp.Server) {
		mcp.AddTool(s, &mcp.Tool{Name: "add_note"}, addNote)
	}})
}

// Get reads the session's value from the owner's memory; outside a
// stateful session (a sessionless request, a task) there is none.
func ExampleState_Get() {
	_, err := notes.Get(context.Background())
	fmt.Println(errors.Is(err, mcpgrain.ErrNoScope))
	// Output: true
}

// Update is a read-modify-write, serialized per session: concurrent calls
// lose nothing. A value over MaxBytes is refused, a fenced save asks the
// client to retry.
func ExampleState_Update() {
	clearNotes := func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		_, err := notes.Update(ctx, func(n *[]string) error { *n = nil; return nil })
		switch {
		case errors.Is(err, mcpgrain.ErrRetry):
			return nil, nil, err // the session moved: the client retries on its new owner
		case err != nil:
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}}, nil, nil
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "cleared"}}}, nil, nil
	}
	_ = clearNotes
}

// A new schema version migrates the values saved by the older program.
func ExampleStateOptions() {
	type note struct {
		Text string `json:"text"`
	}
	_ = mcpgrain.NewState[[]note]("notes-v2", mcpgrain.StateOptions[[]note]{
		Version:  2,
		MaxBytes: 256 << 10,
		Migrate: func(version int, raw json.RawMessage) ([]note, error) {
			var old []string // version 1: plain strings
			if err := json.Unmarshal(raw, &old); err != nil {
				return nil, err
			}
			out := make([]note, len(old))
			for i, s := range old {
				out[i] = note{Text: s}
			}
			return out, nil
		},
	})
}

// releaseArgs are the arguments of the release tools below.
type releaseArgs struct {
	Service string `json:"service"`
	Version string `json:"version"`
}

// deployNow stands for the real deployment.
func deployNow(_ context.Context, service, version string) (string, error) {
	return "dep-" + service + "-" + version, nil
}

// deployWithKey stands for a deployment system that deploys once per key.
func deployWithKey(_ context.Context, key, service, version string) (string, error) {
	return "dep-" + service + "-" + version + "-" + key, nil
}

// A tool that asks a human before it acts. The call waits until someone
// decides on an approval surface (or the window lapses), also across the
// loss of its node (the client retries the call).
func ExampleAsk() {
	deploy := func(ctx context.Context, req *mcp.CallToolRequest, args releaseArgs) (*mcp.CallToolResult, any, error) {
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
	deploy := func(ctx context.Context, req *mcp.CallToolRequest, args releaseArgs) (*mcp.CallToolResult, any, error) {
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

// A step's effect deduplicated by its key: a step interrupted after its
// effect, before its result was journaled, runs again on the client's
// retry with the same key, and the deployment system ignores the repeat.
func ExampleStepKey() {
	deploy := func(ctx context.Context, req *mcp.CallToolRequest, args releaseArgs) (*mcp.CallToolResult, any, error) {
		id, err := mcpgrain.Step(ctx, req, "deploy", func(ctx context.Context) (string, error) {
			return deployWithKey(ctx, mcpgrain.StepKey(ctx), args.Service, args.Version)
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
