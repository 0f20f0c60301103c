package conformance_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/actors/app"
	"github.com/mcpgrain/mcpgrain/actors/toolpacks/conformance"
	"github.com/mcpgrain/mcpgrain/cluster/clock"
)

// waitTimeout bounds every wait for something asynchronous.
const waitTimeout = 10 * time.Second

// recordingCatalog is an app.Catalog of one node without a cluster: it
// records what the pack defines and applies, and applies it locally.
type recordingCatalog struct {
	mu      sync.Mutex
	changes map[string]func()
	applied []string
}

func (c *recordingCatalog) Define(name string, s *mcp.Server, change func(*mcp.Server)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.changes[name] = func() { change(s) }
}

func (c *recordingCatalog) Apply(_ context.Context, name string) error {
	c.mu.Lock()
	change := c.changes[name]
	c.applied = append(c.applied, name)
	c.mu.Unlock()
	change()
	return nil
}

// connect connects a go-sdk client to s in memory at protocol version
// ("": the client's default, 2026-07-28).
func connect(t *testing.T, s *mcp.Server, copts *mcp.ClientOptions, version string) *mcp.ClientSession {
	t.Helper()
	ctx := context.Background()
	ct, st := mcp.NewInMemoryTransports()
	ss, err := s.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test-client", Version: "v0"}, copts).Connect(ctx, ct, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close(); _ = ss.Wait() })
	return cs
}

// textOf is the text of a one-text-item result.
func textOf(t *testing.T, res *mcp.CallToolResult, err error) string {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Content) != 1 {
		t.Fatalf("result %+v: want one content item", res)
	}
	tc, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		t.Fatalf("content %T, want text", res.Content[0])
	}
	return tc.Text
}

// The pack served as a user's pack is: its Setup, given only the public
// Env, on a plain go-sdk server with the public InputRequiredMiddleware
// (no toolpacks.NewServer). Its handlers, clock, catalog changes, Elicit
// and stop function all work through that surface.
func TestSetupServesThePackOnAPlainServer(t *testing.T) {
	ctx := context.Background()
	fake := clock.NewFake(time.Unix(0, 0))
	catalog := &recordingCatalog{changes: map[string]func(){}}
	h, register := conformance.Setup(app.Env{Clock: fake, Catalog: catalog})
	if h.CompletionHandler == nil || h.SubscribeHandler == nil || h.UnsubscribeHandler == nil {
		t.Fatalf("handlers %+v: want completion, subscribe and unsubscribe", h)
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "plain", Version: "v0"}, &mcp.ServerOptions{
		CompletionHandler: h.CompletionHandler, SubscribeHandler: h.SubscribeHandler, UnsubscribeHandler: h.UnsubscribeHandler,
	})
	s.AddReceivingMiddleware(app.InputRequiredMiddleware)
	stop := register(s)

	// The watched resource changes on the Env's clock.
	updates := make(chan string, 4)
	legacy := connect(t, s, &mcp.ClientOptions{ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) {
		updates <- r.Params.URI
	}}, "2025-11-25")
	if err := legacy.Subscribe(ctx, &mcp.SubscribeParams{URI: "test://watched-resource"}); err != nil {
		t.Fatal(err)
	}
	fake.Advance(2 * time.Second)
	select {
	case uri := <-updates:
		if uri != "test://watched-resource" {
			t.Errorf("update of %s", uri)
		}
	case <-time.After(waitTimeout):
		t.Fatal("no update after the Env's clock moved")
	}

	// The list-change trigger goes through the Env's catalog.
	res, err := legacy.CallTool(ctx, &mcp.CallToolParams{Name: "test_trigger_tool_change"})
	textOf(t, res, err)
	catalog.mu.Lock()
	applied := slices.Clone(catalog.applied)
	catalog.mu.Unlock()
	if !slices.Equal(applied, []string{"conformance/transient-tool"}) {
		t.Errorf("catalog changes applied: %q", applied)
	}

	wantElicitRounds(t, s)

	// stop ends the background work: no timer stays armed.
	stop()
	if n := fake.Pending(); n != 0 {
		t.Errorf("%d timers armed after stop", n)
	}
}

// wantElicitRounds checks the pack's Elicit in the 2026-07-28 era on s:
// the input_required result, then the answer on the retry.
func wantElicitRounds(t *testing.T, s *mcp.Server) {
	t.Helper()
	ctx := context.Background()
	latest := connect(t, s, &mcp.ClientOptions{
		Capabilities:   &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{}},
		MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true},
	}, "")
	const tool = "test_input_required_result_elicitation"
	res, err := latest.CallTool(ctx, &mcp.CallToolParams{Name: tool})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := res.InputRequests["user_name"].(*mcp.ElicitParams); !ok || len(res.InputRequests) != 1 || res.RequestState != "" {
		t.Fatalf("first round: input requests %v, requestState %q; want the user_name form and no state", res.InputRequests, res.RequestState)
	}
	res, err = latest.CallTool(ctx, &mcp.CallToolParams{Name: tool, InputResponses: mcp.InputResponseMap{
		"user_name": &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "Alice"}},
	}})
	if got := textOf(t, res, err); got != "Hello, Alice!" {
		t.Errorf("retry: %q", got)
	}

}
