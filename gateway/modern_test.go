package gateway_test

import (
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestSessionlessClientWorksWithoutASession(t *testing.T) {
	addr := startNode(t, nil)
	cs := connect(t, addr, aliceToken, "", nil) // go-sdk's default: 2026-07-28
	if cs.ID() != "" {
		t.Fatalf("sessionless client got session id %q", cs.ID())
	}
	if got := cs.InitializeResult().ProtocolVersion; got != "2026-07-28" {
		t.Fatalf("negotiated %q, want 2026-07-28", got)
	}
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "modern"}})
	if err != nil || res.IsError {
		t.Fatalf("echo: %+v %v", res, err)
	}
	if tc := res.Content[0].(*mcp.TextContent); tc.Text != "modern" {
		t.Fatalf("echo: %q", tc.Text)
	}
}

func TestInputRequiredRetryWithSealedRequestState(t *testing.T) {
	addr := startNode(t, nil)
	alice := mrtrClient(t, addr, aliceToken)
	first, err := alice.CallTool(t.Context(), &mcp.CallToolParams{Name: "test_input_required_result_request_state"})
	if err != nil {
		t.Fatal(err)
	}
	if !first.NeedsInput() || len(first.InputRequests) != 1 {
		t.Fatalf("first call: %+v, want input_required", first)
	}
	state := first.RequestState
	if !strings.HasPrefix(state, "v2.") {
		t.Fatalf("requestState %q is not our sealed token", state)
	}
	// The tool sees its own state on the retry (it answers state-ok only then).
	res, err := alice.CallTool(t.Context(), confirmRetry(state))
	if err != nil || res.IsError {
		t.Fatalf("retry: %+v %v", res, err)
	}
	if tc := res.Content[0].(*mcp.TextContent); !strings.HasPrefix(tc.Text, "state-ok") {
		t.Fatalf("retry answered %q", tc.Text)
	}
	for name, bad := range map[string]string{
		"tampered":         state[:len(state)-2] + "xx",
		"appended suffix":  state + "-tampered",
		"not ours":         "request_state",
		"truncated claims": state[:10],
	} {
		if _, err := alice.CallTool(t.Context(), confirmRetry(bad)); err == nil || !strings.Contains(err.Error(), "invalid requestState") {
			t.Fatalf("%s state: err %v, want invalid requestState", name, err)
		}
	}
	// Another principal cannot use alice's state.
	bob := mrtrClient(t, addr, bobToken)
	if _, err := bob.CallTool(t.Context(), confirmRetry(state)); err == nil || !strings.Contains(err.Error(), "invalid requestState") {
		t.Fatalf("foreign principal: err %v, want invalid requestState", err)
	}
}

func TestSessionlessGETIsNotAllowed(t *testing.T) {
	addr := startNode(t, nil)
	r := raw(t, "GET", addr, map[string]string{"Authorization": "Bearer " + aliceToken, "Accept": "text/event-stream", "Mcp-Protocol-Version": "2026-07-28"}, "")
	if r.status != 405 || r.header.Get("Allow") != "POST" {
		t.Fatalf("GET: %d Allow %q", r.status, r.header.Get("Allow"))
	}
}
