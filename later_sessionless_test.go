package mcpgrain_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain"
)

// laterOnHandle adds to laterTools a tool that asks without waiting on a
// ctx bound to a handle it mints (a 2026-07-28 tool's only durable state).
func laterOnHandle(s *mcp.Server) {
	laterTools(s)
	mcp.AddTool(s, &mcp.Tool{Name: "ask_later_on_handle"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		h, err := mcpgrain.NewHandle(ctx)
		if err != nil {
			return nil, nil, err
		}
		hctx, err := mcpgrain.OnHandle(ctx, h)
		if err != nil {
			return nil, nil, err
		}
		p, err := mcpgrain.AskLater(hctx, req, mcpgrain.Question{Summary: "On a handle"})
		if err != nil {
			return nil, nil, err
		}
		return textResult(p.ID + " " + p.URL), nil, nil
	})
}

// In the 2026-07-28 era AskLater answers at once with the question's id
// and approval URL (on a ctx bound to a handle too); the question is
// listed; later requests — each on a fresh continuation grain — read it
// with AskStatus, AwaitAsk of the undecided question is ErrAwaitElsewhere
// at once (no session to wait in), a stateful session of the same
// principal reads it too, and an accept over HTTP is read from both eras.
func TestAskLaterInTheSessionlessEra(t *testing.T) {
	origin := runNode(t, mcpgrain.Server{Name: "later", Register: laterOnHandle})
	mc := mcp.NewClient(&mcp.Implementation{Name: "later-test"}, &mcp.ClientOptions{MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true}})
	modern, err := mc.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: origin + "/mcp"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer modern.Close()
	if v := modern.InitializeResult().ProtocolVersion; v != "2026-07-28" {
		t.Fatalf("protocol %s, want 2026-07-28", v)
	}
	lc := mcp.NewClient(&mcp.Implementation{Name: "later-test"}, nil)
	legacy, err := lc.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: origin + "/mcp", DisableStandaloneSSE: true},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer legacy.Close()

	id, url, _ := strings.Cut(callText(t, modern, "ask_later", map[string]any{"summary": "Sessionless"}), " ")
	if url != origin+"/approve/"+id {
		t.Fatalf("AskLater answered %q %q, want the id and %s/approve/<id>", id, url, origin)
	}
	if pausedID(t, origin, "Sessionless") != id {
		t.Fatal("another question is listed")
	}
	for _, cs := range []*mcp.ClientSession{modern, legacy} {
		if got := callText(t, cs, "status", map[string]any{"id": id}); got != "pending false " {
			t.Fatalf("status: %q, want pending", got)
		}
	}
	if got := callText(t, modern, "await", map[string]any{"id": id}); !strings.Contains(got, mcpgrain.ErrAwaitElsewhere.Error()) {
		t.Fatalf("await in the 2026-07-28 era: %q, want ErrAwaitElsewhere", got)
	}
	resp, err := http.Post(origin+"/api/executions/"+id+"/resume", "application/json", strings.NewReader(`{"action":"accept"}`))
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("accept: %v %v", err, resp)
	}
	_ = resp.Body.Close()
	for _, cs := range []*mcp.ClientSession{modern, legacy} {
		for _, tool := range []string{"status", "await"} {
			if got := callText(t, cs, tool, map[string]any{"id": id}); got != "decided true anonymous" {
				t.Fatalf("%s after the accept: %q", tool, got)
			}
		}
	}

	hid, hurl, _ := strings.Cut(callText(t, modern, "ask_later_on_handle", map[string]any{}), " ")
	if hurl != origin+"/approve/"+hid || pausedID(t, origin, "On a handle") != hid {
		t.Fatalf("AskLater on a handle answered %q %q", hid, hurl)
	}
	if got := callText(t, modern, "status", map[string]any{"id": hid}); got != "pending false " {
		t.Fatalf("status of the handle-bound question: %q", got)
	}
	// A legacy session asks, the 2026-07-28 era reads.
	lid, _, _ := strings.Cut(callText(t, legacy, "ask_later", map[string]any{"summary": "Stateful"}), " ")
	if got := callText(t, modern, "status", map[string]any{"id": lid}); got != "pending false " {
		t.Fatalf("a session's question read in the 2026-07-28 era: %q", got)
	}
}
