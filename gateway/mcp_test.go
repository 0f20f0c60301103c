package gateway_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/internal/app"
	"github.com/mcpgrain/mcpgrain/internal/mcpclient"
)

func TestStatefulSessionRoundTrip(t *testing.T) {
	addr := startNode(t, nil)
	cs := connect(t, addr, aliceToken, "2025-11-25", nil)
	if cs.ID() == "" {
		t.Fatal("no session id")
	}
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}})
	if err != nil {
		t.Fatal(err)
	}
	if tc, ok := res.Content[0].(*mcp.TextContent); !ok || tc.Text != "hi" {
		t.Fatalf("echo: %+v", res.Content)
	}
}

func TestGatewayRejectsBadRequestsWithSpecStatuses(t *testing.T) {
	addr := startNode(t, func(c *app.Config) { c.MCP.RateLimit, c.MCP.RateBurst = 1000, 1000 })
	alice := connect(t, addr, aliceToken, "2025-11-25", nil)
	sid := alice.ID()
	authz := "Bearer " + aliceToken
	ctJSON := "application/json"
	accept := "application/json, text/event-stream"
	initBody := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`
	big := `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"` + strings.Repeat("x", 5<<20) + `"}}`
	cases := []struct {
		name    string
		method  string
		headers map[string]string
		body    string
		status  int
		code    int // JSON-RPC code if the body is a JSON-RPC error (0: don't check)
	}{
		{"no token", "POST", map[string]string{"Content-Type": ctJSON, "Accept": accept}, initBody, 401, -32001},
		{"unknown token", "POST", map[string]string{"Authorization": "Bearer mcpg_nobody_0123456789", "Content-Type": ctJSON, "Accept": accept}, initBody, 401, -32001},
		{"other principal's session", "POST", map[string]string{"Authorization": "Bearer " + bobToken, "Mcp-Session-Id": sid, "Content-Type": ctJSON, "Accept": accept, "Mcp-Protocol-Version": "2025-11-25"}, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, 403, -32003},
		{"other principal's delete", "DELETE", map[string]string{"Authorization": "Bearer " + bobToken, "Mcp-Session-Id": sid}, "", 403, -32003},
		{"unknown session", "POST", map[string]string{"Authorization": authz, "Mcp-Session-Id": "NOSUCHSESSION", "Content-Type": ctJSON, "Accept": accept}, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, 404, -32001},
		{"malformed session id", "POST", map[string]string{"Authorization": authz, "Mcp-Session-Id": "bad id", "Content-Type": ctJSON, "Accept": accept}, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, 404, -32001},
		{"missing session id", "POST", map[string]string{"Authorization": authz, "Content-Type": ctJSON, "Accept": accept}, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, 400, -32600},
		{"GET without session id", "GET", map[string]string{"Authorization": authz, "Accept": "text/event-stream"}, "", 400, -32600},
		{"bad protocol version", "POST", map[string]string{"Authorization": authz, "Mcp-Session-Id": sid, "Content-Type": ctJSON, "Accept": accept, "Mcp-Protocol-Version": "1999-01-01"}, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, 400, -32022},
		{"oversized body", "POST", map[string]string{"Authorization": authz, "Mcp-Session-Id": sid, "Content-Type": ctJSON, "Accept": accept}, big, 413, -32600},
		{"unsupported method", "PUT", map[string]string{"Authorization": authz}, "", 405, -32001},
		{"DNS rebinding host", "POST", map[string]string{"Authorization": authz, "Host": "evil.example.com", "Content-Type": ctJSON, "Accept": accept}, initBody, 403, 0},
		{"cross-origin browser request", "POST", map[string]string{"Authorization": authz, "Origin": "https://evil.example.com", "Sec-Fetch-Site": "cross-site", "Content-Type": ctJSON, "Accept": accept}, initBody, 403, -32001},
		// From here go-sdk's handler in the session grain answers.
		{"wrong content type", "POST", map[string]string{"Authorization": authz, "Mcp-Session-Id": sid, "Content-Type": "text/plain", "Accept": accept, "Mcp-Protocol-Version": "2025-11-25"}, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, 415, 0},
		{"malformed JSON", "POST", map[string]string{"Authorization": authz, "Mcp-Session-Id": sid, "Content-Type": ctJSON, "Accept": accept, "Mcp-Protocol-Version": "2025-11-25"}, `{"jsonrpc":`, 400, 0},
		// An unknown method is JSON-RPC's "method not found" for its id (the
		// session runtime's answer in place of go-sdk's plain-text 400).
		{"unknown method", "POST", map[string]string{"Authorization": authz, "Mcp-Session-Id": sid, "Content-Type": ctJSON, "Accept": accept, "Mcp-Protocol-Version": "2025-11-25"}, `{"jsonrpc":"2.0","id":2,"method":"no/such"}`, 200, -32601},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(tc.method, "http://"+addr+"/mcp", bytes.NewReader([]byte(tc.body)))
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range tc.headers {
				if k == "Host" {
					req.Host = v
					continue
				}
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d; body %q", resp.StatusCode, tc.status, body)
			}
			if tc.code != 0 {
				if c := rpcCode(t, body); c != tc.code {
					t.Fatalf("JSON-RPC code %d, want %d; body %q", c, tc.code, body)
				}
				// An error the gateway writes after reading the body answers
				// the request by its id (before it, or without one: null).
				wantID := "null"
				if tc.status != 401 && strings.Contains(tc.body, `"id":2`) {
					wantID = "2"
				}
				var env struct{ ID json.RawMessage }
				if err := json.Unmarshal(body, &env); err != nil || string(env.ID) != wantID {
					t.Fatalf("id %s, want %s; body %q", env.ID, wantID, body)
				}
			}
			if tc.code == -32022 && !bytes.Contains(body, []byte(`"requested":"1999-01-01"`)) {
				t.Fatalf("unsupported version without its data: %q", body)
			}
			if tc.status == 401 && resp.Header.Get("WWW-Authenticate") == "" {
				t.Fatal("401 without WWW-Authenticate")
			}
			if tc.status == 403 && bytes.Contains(body, []byte("alice")) {
				t.Fatal("403 leaks the owner")
			}
		})
	}
	// The owner still uses the session after all that.
	if _, err := alice.ListTools(t.Context(), nil); err != nil {
		t.Fatalf("owner after rejected requests: %v", err)
	}
}

// customParams and customResult are the shapes of the calls
// TestUnknownMethodInAStatefulSessionIsMethodNotFound sends.
type customParams struct {
	mcp.ParamsBase
	TaskID string `json:"taskId,omitempty"`
}

type customResult struct{ mcp.ResultBase }

// TestUnknownMethodInAStatefulSessionIsMethodNotFound: in a go-sdk
// client's stateful session (2025-11-25), calls of methods the session's
// server does not have — tasks/get (the tasks extension is 2026-07-28's,
// sessionless) and nope/nope — each get JSON-RPC -32601 for their own id,
// and the session lives on: go-sdk's plain-text 400 would end the client's
// connection.
func TestUnknownMethodInAStatefulSessionIsMethodNotFound(t *testing.T) {
	addr := startNode(t, nil)
	methods := []string{"tasks/get", "nope/nope"}
	c := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil)
	for _, m := range methods {
		if err := mcp.AddSendingCustomMethod[*customParams, *customResult](c, m); err != nil {
			t.Fatal(err)
		}
	}
	cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{
		Endpoint:   "http://" + addr + "/mcp",
		HTTPClient: &http.Client{Transport: mcpclient.Bearer(aliceToken, http.DefaultTransport)},
	}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	for _, m := range methods {
		_, err := mcp.CallCustomMethod[*customParams, *customResult](t.Context(), cs, m, &customParams{TaskID: "task-1"})
		var je *jsonrpc.Error
		if !errors.As(err, &je) || je.Code != jsonrpc.CodeMethodNotFound || !strings.Contains(je.Message, m) {
			t.Fatalf("%s: %v, want JSON-RPC -32601 naming the method", m, err)
		}
	}
	if _, err := cs.ListTools(t.Context(), nil); err != nil {
		t.Fatalf("the session after the unknown methods: %v", err)
	}
	// On the wire: HTTP 200, application/json, the error for the call's id.
	r := raw(t, "POST", addr, map[string]string{"Authorization": "Bearer " + aliceToken, "Mcp-Session-Id": cs.ID(), "Content-Type": "application/json",
		"Accept": "application/json, text/event-stream", "Mcp-Protocol-Version": "2025-11-25"}, `{"jsonrpc":"2.0","id":"x-9","method":"nope/nope","params":{}}`)
	if r.status != 200 || !strings.HasPrefix(r.header.Get("Content-Type"), "application/json") ||
		string(r.body) != `{"jsonrpc":"2.0","id":"x-9","error":{"code":-32601,"message":"Method not found: nope/nope"}}`+"\n" {
		t.Fatalf("raw unknown method: %d %s %q", r.status, r.header.Get("Content-Type"), r.body)
	}
}

func TestDeleteEndsSessionThen404(t *testing.T) {
	addr := startNode(t, nil)
	cs := connect(t, addr, aliceToken, "2025-11-25", nil)
	sid := cs.ID()
	h := map[string]string{"Authorization": "Bearer " + aliceToken, "Mcp-Session-Id": sid}
	if r := raw(t, "DELETE", addr, h, ""); r.status != http.StatusNoContent {
		t.Fatalf("DELETE: %d %q", r.status, r.body)
	}
	h["Content-Type"], h["Accept"], h["Mcp-Protocol-Version"] = "application/json", "application/json, text/event-stream", "2025-11-25"
	r := raw(t, "POST", addr, h, `{"jsonrpc":"2.0","id":9,"method":"tools/list"}`)
	if r.status != http.StatusNotFound || rpcCode(t, r.body) != -32001 {
		t.Fatalf("after DELETE: %d %q", r.status, r.body)
	}
	if r := raw(t, "DELETE", addr, map[string]string{"Authorization": "Bearer " + aliceToken, "Mcp-Session-Id": sid}, ""); r.status != http.StatusNotFound {
		t.Fatalf("second DELETE: %d", r.status)
	}
}

func TestRateLimitAnswers429WithRetryAfter(t *testing.T) {
	addr := startNode(t, func(c *app.Config) { c.MCP.RateLimit, c.MCP.RateBurst = 0.5, 2 })
	h := map[string]string{"Authorization": "Bearer " + bobToken, "Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
	body := `{"jsonrpc":"2.0","id":2,"method":"tools/list"}` // 400 (no session) but counted
	for i := range 2 {
		if r := raw(t, "POST", addr, h, body); r.status != http.StatusBadRequest {
			t.Fatalf("request %d: %d", i, r.status)
		}
	}
	r := raw(t, "POST", addr, h, body)
	if r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") == "" {
		t.Fatalf("third request: %d Retry-After %q", r.status, r.header.Get("Retry-After"))
	}
	// Another principal is not affected.
	h["Authorization"] = "Bearer " + aliceToken
	if r := raw(t, "POST", addr, h, body); r.status != http.StatusBadRequest {
		t.Fatalf("other principal: %d", r.status)
	}
}
