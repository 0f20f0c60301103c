package testcluster

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/actors/session"
	"github.com/mcpgrain/mcpgrain/internal/mcpclient"
)

// Connect connects a go-sdk client to the node at addr with a bearer token
// and protocol version ("" for go-sdk's default); the session closes when
// the test ends.
func Connect(t testing.TB, addr, token, version string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	return connectTo(t, "http://"+addr+"/mcp", token, version, opts)
}

// ConnectMode connects a 2025-11-25 client with ?elicitation_mode=mode
// ("" for the default).
func ConnectMode(t testing.TB, addr, token, mode string) *mcp.ClientSession {
	t.Helper()
	endpoint := "http://" + addr + "/mcp"
	if mode != "" {
		endpoint += "?elicitation_mode=" + mode
	}
	return connectTo(t, endpoint, token, "2025-11-25", nil)
}

// MRTRClient connects a sessionless client that answers input requests
// itself (go-sdk's multi-round-trip handling off).
func MRTRClient(t testing.TB, addr, token string) *mcp.ClientSession {
	t.Helper()
	return Connect(t, addr, token, "", &mcp.ClientOptions{MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true}})
}

func connectTo(t testing.TB, endpoint, token, version string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "test"}, opts)
	cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{
		Endpoint:   endpoint,
		HTTPClient: &http.Client{Transport: mcpclient.Bearer(token, http.DefaultTransport)},
	}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// ConfirmRetry is the retry of the conformance tool
// test_input_required_result_request_state with the confirmation answered
// and the requestState it was given.
func ConfirmRetry(state string) *mcp.CallToolParams {
	return &mcp.CallToolParams{
		Name:           "test_input_required_result_request_state",
		InputResponses: mcp.InputResponseMap{"confirm": &mcp.ElicitResult{Action: "accept", Content: map[string]any{"ok": true}}},
		RequestState:   state,
	}
}

// CallTool calls a tool (within a minute) and returns its result with the
// structured content decoded.
func CallTool(t testing.TB, cs *mcp.ClientSession, tool string, args map[string]any) (*mcp.CallToolResult, map[string]any) {
	t.Helper()
	return CallToolWithin(t, cs, tool, args, 60*time.Second)
}

// CallToolWithin is CallTool with a deadline of its own, for a call that
// may legitimately run longer than a minute on a loaded machine.
func CallToolWithin(t testing.TB, cs *mcp.ClientSession, tool string, args map[string]any, within time.Duration) (*mcp.CallToolResult, map[string]any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("call %s: %v", tool, err)
	}
	return res, Structured(t, res)
}

// Structured is a tool result's structured content as a map.
func Structured(t testing.TB, res *mcp.CallToolResult) map[string]any {
	t.Helper()
	var m map[string]any
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("structured content %s: %v", b, err)
	}
	return m
}

// Echo calls the demo echo tool and checks it answered text.
func Echo(t testing.TB, cs *mcp.ClientSession, text string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": text}})
	if err != nil || res.IsError {
		t.Fatalf("echo %q: %+v %v", text, res, err)
	}
	if tc, ok := res.Content[0].(*mcp.TextContent); !ok || tc.Text != text {
		t.Fatalf("echo %q: %+v", text, res.Content)
	}
}

// Pause runs CreateCode and returns the paused execution's id; the
// execute call must answer wantStatus.
func Pause(t testing.TB, cs *mcp.ClientSession, wantStatus string) string {
	t.Helper()
	res, sc := CallTool(t, cs, "execute", map[string]any{"code": CreateCode})
	if res.IsError || sc["status"] != wantStatus {
		t.Fatalf("execute: want %s, got %s / %v", wantStatus, mcpclient.Text(res), sc)
	}
	id, _ := sc["executionId"].(string)
	if !strings.HasPrefix(id, "exec_") {
		t.Fatalf("executionId %q", id)
	}
	return id
}

// APIResponse is the answer of an HTTP API call: its status and JSON body.
type APIResponse struct {
	Status int
	Body   map[string]any
}

// API calls an HTTP JSON API (token and body optional) and decodes its
// answer.
func API(t testing.TB, method, url, token, body string) APIResponse {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var m map[string]any
	if len(b) > 0 {
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("%s %s: %d %q is not JSON", method, url, resp.StatusCode, b)
		}
	}
	return APIResponse{resp.StatusCode, m}
}

// Todos reads the demo API's items over HTTP: the list of the
// organization of token's principal.
func Todos(t testing.TB, addr, token string) []map[string]any {
	t.Helper()
	req, err := http.NewRequest("GET", "http://"+addr+"/demo/todos", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET /demo/todos: %d %s", resp.StatusCode, b)
	}
	var out []map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out
}

// RawResponse is a raw answer of the MCP endpoint.
type RawResponse struct {
	Status int
	Header http.Header
	Body   []byte
}

// Raw sends one HTTP request to the MCP endpoint of the node at addr.
func Raw(t testing.TB, method, addr string, headers map[string]string, body string) RawResponse {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+addr+"/mcp", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return RawResponse{resp.StatusCode, resp.Header, b}
}

// RPCCode is the error code of a JSON-RPC error body.
func RPCCode(t testing.TB, body []byte) int {
	t.Helper()
	var r struct {
		Error struct {
			Code int `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatalf("not a JSON-RPC error body: %q", body)
	}
	return r.Error.Code
}

// ConnectOwnedBy connects through node via with token until the minted
// session is owned by node owner, as the placement table of nodes 0, 1
// and 2 says (each try has a 1/3 chance).
func ConnectOwnedBy(t testing.TB, c *Cluster, via, owner int, token string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	table := c.Placement(session.KindName, 0, 1, 2)
	for range 40 {
		cs := Connect(t, c.Node(via).HTTP, token, "2025-11-25", opts)
		if o, _ := table.Owner(session.KindName, cs.ID()); o.ID == c.Node(owner).ID {
			return cs
		}
		_ = cs.Close()
	}
	t.Fatal("could not get a session owned by the wanted node")
	return nil
}
