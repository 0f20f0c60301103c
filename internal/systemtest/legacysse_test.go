package systemtest

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/internal/mcpclient"
)

// connectSSE connects a go-sdk client over the HTTP+SSE transport
// (protocol 2024-11-05) to the node's /sse.
func connectSSE(t testing.TB, addr, token string) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "sse-test"}, nil)
	cs, err := c.Connect(t.Context(), &mcp.SSEClientTransport{
		Endpoint:   "http://" + addr + "/sse",
		HTTPClient: &http.Client{Transport: mcpclient.Bearer(token, http.DefaultTransport)},
	}, &mcp.ClientSessionOptions{ProtocolVersion: "2024-11-05"})
	if err != nil {
		t.Fatalf("connect over SSE: %v", err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// An SSE-only client (go-sdk's SSE transport) lists the tools, calls one,
// and runs an execute that pauses and is approved over the HTTP API.
func TestLegacySSEClientListsCallsAndResumesAnApprovedExecute(t *testing.T) {
	info := startCodeNode(t, nil)
	cs := connectSSE(t, info.HTTPAddr, aliceToken)
	if v := cs.InitializeResult().ProtocolVersion; v != "2024-11-05" {
		t.Fatalf("negotiated %q, want 2024-11-05", v)
	}
	tools, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	names := map[string]bool{}
	for _, tl := range tools.Tools {
		names[tl.Name] = true
	}
	if !names["execute"] || !names["resume"] {
		t.Fatalf("tools %v", names)
	}
	res, sc := callTool(t, cs, "execute", map[string]any{"code": `return (await tools.demo.listTodos({})).length`})
	if res.IsError || sc["status"] != "completed" || sc["result"] != float64(0) {
		t.Fatalf("execute read: %s %v", mcpclient.Text(res), sc)
	}

	id := pause(t, cs, "waiting_for_interaction")
	if n := len(todos(t, info.HTTPAddr, aliceToken)); n != 0 {
		t.Fatalf("paused call ran: %d todos", n)
	}
	url := fmt.Sprintf("http://%s/api/executions/%s/resume", info.HTTPAddr, id)
	if r := api(t, "POST", url, bobToken, `{"action":"accept"}`); r.status != 200 || r.body["status"] != "approved" {
		t.Fatalf("accept: %d %v", r.status, r.body)
	}
	res, sc = callTool(t, cs, "resume", map[string]any{"executionId": id, "action": "accept"})
	if res.IsError || sc["status"] != "completed" {
		t.Fatalf("resume: %s", mcpclient.Text(res))
	}
	if got := todos(t, info.HTTPAddr, aliceToken); len(got) != 1 || got[0]["title"] != "ship it" {
		t.Fatalf("todos %v", got)
	}
}

// Another principal's POST to someone's SSE session is refused with the
// answer an unknown session gets, and reaches nothing; requests no
// transport serves name the supported ones.
func TestLegacySSERefusesOtherPrincipalsAndNamesSupportedTransports(t *testing.T) {
	info := startCodeNode(t, nil)
	base := "http://" + info.HTTPAddr
	req, err := http.NewRequestWithContext(t.Context(), "GET", base+"/sse", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+aliceToken)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	buf := make([]byte, 4096)
	n, err := resp.Body.Read(buf)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /sse: %d %v", resp.StatusCode, err)
	}
	ev := string(buf[:n])
	_, endpoint, ok := strings.Cut(ev, "event: endpoint\ndata: ")
	if !ok {
		t.Fatalf("first event %q", ev)
	}
	endpoint = strings.TrimSpace(endpoint)
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2024-11-05","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`
	post := func(token, path, body string) (int, string) {
		r, err := http.NewRequestWithContext(t.Context(), "POST", base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		r.Header.Set("Authorization", "Bearer "+token)
		r.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	foreign, foreignBody := post(carolToken, endpoint, init)
	unknown, unknownBody := post(carolToken, strings.Replace(endpoint, "sessionId=", "sessionId=X", 1), init)
	if foreign != 404 || foreign != unknown || foreignBody != unknownBody {
		t.Fatalf("foreign POST %d %s; unknown session %d %s", foreign, foreignBody, unknown, unknownBody)
	}
	if code, body := post(aliceToken, endpoint, init); code != 202 {
		t.Fatalf("owner's POST: %d %s", code, body)
	}
	n, err = resp.Body.Read(buf)
	if err != nil || !strings.Contains(string(buf[:n]), `"protocolVersion":"2024-11-05"`) {
		t.Fatalf("initialize answer on the stream: %q %v", buf[:n], err)
	}

	for _, c := range []struct{ method, path, accept string }{
		{"POST", "/sse", ""}, {"GET", "/sse", "application/json"}, {"GET", "/messages", ""}, {"POST", "/messages?sessionId=x", ""},
	} {
		r, err := http.NewRequestWithContext(t.Context(), c.method, base+c.path, strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		r.Header.Set("Authorization", "Bearer "+aliceToken)
		r.Header.Set("Accept", c.accept)
		res, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		_ = res.Body.Close()
		if res.StatusCode < 400 || !strings.Contains(string(b), "GET /sse") || !strings.Contains(string(b), "/mcp") {
			t.Fatalf("%s %s: %d %s", c.method, c.path, res.StatusCode, b)
		}
	}
}
