package systemtest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	neturl "net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/internal/app"
	"github.com/mcpgrain/mcpgrain/internal/mcpclient"
	"github.com/mcpgrain/mcpgrain/internal/testcluster"
	"github.com/mcpgrain/mcpgrain/internal/testenv"
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
	if r := api(t, "POST", url, bobToken, `{"action":"accept"}`); r.status != 200 || r.body["status"] != "accepted" {
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

// openLegacyStream opens GET /sse as token and returns the stream and the
// endpoint URL its first event announced.
func openLegacyStream(t *testing.T, base, token string) (*http.Response, *bufio.Reader, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "GET", base+"/sse", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = resp.Body.Close() })
	if resp.StatusCode != 200 {
		t.Fatalf("GET /sse: %d", resp.StatusCode)
	}
	br := bufio.NewReader(resp.Body)
	name, endpoint := readEvent(t, br)
	if name != "endpoint" || !strings.HasPrefix(endpoint, "/messages?") {
		t.Fatalf("first event %q %q", name, endpoint)
	}
	return resp, br, endpoint
}

// readEvent reads the next event of an SSE stream (comments skipped).
func readEvent(t *testing.T, br *bufio.Reader) (name, data string) {
	t.Helper()
	var lines []string
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("SSE stream: %v", err)
		}
		line = strings.TrimRight(line, "\r\n")
		switch {
		case line == "" && (name != "" || len(lines) > 0):
			return name, strings.Join(lines, "\n")
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			lines = append(lines, strings.TrimPrefix(line, "data: "))
		}
	}
}

// postTo POSTs body to base+path as token.
func postTo(t *testing.T, base, path, token, body string) (int, string) {
	t.Helper()
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

const legacyInit = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2024-11-05","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`

// Another principal's POST to someone's SSE session is refused with the
// answer an unknown session (or stream) gets, and reaches nothing; the
// session ends with its stream; the transport's requests are counted
// (era sse).
func TestLegacySSERefusesOtherPrincipalsAndEndsWithItsStream(t *testing.T) {
	info := startCodeNode(t, nil)
	base := "http://" + info.HTTPAddr
	resp, br, endpoint := openLegacyStream(t, base, aliceToken)
	foreign, foreignBody := postTo(t, base, endpoint, carolToken, legacyInit)
	unknown, unknownBody := postTo(t, base, strings.Replace(endpoint, "sessionId=", "sessionId=X", 1), carolToken, legacyInit)
	noStream, noStreamBody := postTo(t, base, strings.Replace(endpoint, "stream=", "stream=X", 1), aliceToken, legacyInit)
	if foreign != 404 || foreign != unknown || foreignBody != unknownBody || noStream != unknown || noStreamBody != unknownBody {
		t.Fatalf("foreign POST %d %s; unknown session %d %s; unknown stream %d %s", foreign, foreignBody, unknown, unknownBody, noStream, noStreamBody)
	}
	if code, body := postTo(t, base, endpoint, aliceToken, legacyInit); code != 202 {
		t.Fatalf("owner's POST: %d %s", code, body)
	}
	if name, data := readEvent(t, br); name != "message" || !strings.Contains(data, `"protocolVersion":"2024-11-05"`) {
		t.Fatalf("initialize answer on the stream: %q %q", name, data)
	}

	// Closing the stream ends the session: its id is unknown to /mcp too.
	u, err := neturl.Parse(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	list := `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`
	headers := map[string]string{"Authorization": "Bearer " + aliceToken, "Mcp-Session-Id": u.Query().Get("sessionId"), "Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
	if r := raw(t, "POST", info.HTTPAddr, headers, list); r.status != 200 {
		t.Fatalf("the session while its stream is open: %d %s", r.status, r.body)
	}
	_ = resp.Body.Close()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for deadline := time.Now().Add(15 * time.Second); ; <-tick.C {
		if r := raw(t, "POST", info.HTTPAddr, headers, list); r.status == 404 {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("the session after its stream closed: %d %s", r.status, r.body)
		}
	}
	if code, _ := postTo(t, base, endpoint, aliceToken, legacyInit); code != 404 {
		t.Fatalf("POST to a closed stream: %d", code)
	}
	m := testcluster.ScrapeMetrics(t, info.HTTPAddr)
	if v := m.Value("mcpgrain_gateway_requests_total", map[string]string{"era": "sse", "method": "initialize", "code": "202"}); v != 1 {
		t.Fatalf("accepted SSE initialize requests counted: %v, want 1", v)
	}
	if v := m.Value("mcpgrain_gateway_requests_total", map[string]string{"era": "sse", "method": "initialize", "code": "404"}); v != 4 {
		t.Fatalf("refused SSE initialize requests counted: %v, want 4", v)
	}
}

// Requests no transport serves (wrong method, wrong Accept, a POST
// without the endpoint's parameters, an SSE client at /mcp) are answered
// with an error naming the supported transports and their paths.
func TestLegacySSEErrorsNameTheSupportedTransports(t *testing.T) {
	info := startCodeNode(t, nil)
	base := "http://" + info.HTTPAddr
	for _, c := range []struct {
		method, path, accept string
		status               int
	}{
		{"POST", "/sse", "", 405}, {"GET", "/sse", "application/json", 406}, {"GET", "/messages", "", 405},
		{"POST", "/messages?sessionId=x", "", 400}, {"GET", "/mcp", "text/event-stream", 400},
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
		if res.StatusCode != c.status || !strings.Contains(string(b), "GET /sse") || !strings.Contains(string(b), "/mcp") {
			t.Fatalf("%s %s: %d %s, want %d naming the transports", c.method, c.path, res.StatusCode, b, c.status)
		}
	}
}

// nodeScript returns node and the script tools/<dir>/<script>, once
// tools/<dir>/<installed> exists (its npm ci ran); the test is unavailable
// otherwise.
func nodeScript(t *testing.T, dir, script, installed string) (node, path string) {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "tools", dir, installed)); err != nil {
		testenv.Unavailable(t, "tools/%s is not installed (run: npm ci --prefix tools/%s)", dir, dir)
	}
	node, err = exec.LookPath("node")
	if err != nil {
		testenv.Unavailable(t, "no node on PATH")
	}
	return node, filepath.Join(root, "tools", dir, script)
}

// The TypeScript SDK's SSE client (tools/tsclient/sse-client.mjs) lists
// the tools, runs an execute that pauses, and resumes it once it is
// approved over the HTTP API.
func TestLegacySSETypeScriptClientResumesAnApprovedExecute(t *testing.T) {
	node, script := nodeScript(t, "tsclient", "sse-client.mjs", filepath.Join("node_modules", "@modelcontextprotocol", "sdk"))
	info := startCodeNode(t, nil)
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, script)
	cmd.Env = append(os.Environ(), "MCP_URL=http://"+info.HTTPAddr+"/sse", "MCP_TOKEN="+aliceToken, "MCP_CODE="+createCode)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Wait() }()
	lines := bufio.NewScanner(stdout)
	lines.Buffer(nil, 1<<20)
	var first struct {
		Tools   []string `json:"tools"`
		Execute struct {
			StructuredContent map[string]any `json:"structuredContent"`
		} `json:"execute"`
	}
	if !lines.Scan() || json.Unmarshal(lines.Bytes(), &first) != nil {
		t.Fatalf("TypeScript client: %q\n%s", lines.Bytes(), stderr.String())
	}
	if !slices.Contains(first.Tools, "execute") || first.Execute.StructuredContent["status"] != "waiting_for_interaction" {
		t.Fatalf("TypeScript client's tools %v, execute %v", first.Tools, first.Execute.StructuredContent)
	}
	id, _ := first.Execute.StructuredContent["executionId"].(string)
	url := fmt.Sprintf("http://%s/api/executions/%s/resume", info.HTTPAddr, id)
	if r := api(t, "POST", url, bobToken, `{"action":"accept"}`); r.status != 200 || r.body["status"] != "accepted" {
		t.Fatalf("accept: %d %v", r.status, r.body)
	}
	if _, err := io.WriteString(stdin, "decided\n"); err != nil {
		t.Fatal(err)
	}
	var second struct {
		Resume struct {
			StructuredContent map[string]any `json:"structuredContent"`
		} `json:"resume"`
	}
	if !lines.Scan() || json.Unmarshal(lines.Bytes(), &second) != nil {
		t.Fatalf("TypeScript client's resume: %q\n%s", lines.Bytes(), stderr.String())
	}
	if second.Resume.StructuredContent["status"] != "completed" {
		t.Fatalf("resume: %v", second.Resume.StructuredContent)
	}
	if got := todos(t, info.HTTPAddr, aliceToken); len(got) != 1 || got[0]["title"] != "ship it" {
		t.Fatalf("todos %v", got)
	}
}

// postsVia sends a client's POSTs to another node than its GET /sse.
type postsVia struct {
	host  string
	posts atomic.Int32
	next  http.RoundTripper
}

func (p *postsVia) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodPost {
		r = r.Clone(r.Context())
		r.URL.Host, r.Host = p.host, p.host
		p.posts.Add(1)
	}
	return p.next.RoundTrip(r)
}

// An HTTP+SSE session across real processes: the SSE stream is held by
// node 0, every POST reaches node 1, and the session grain lives wherever
// placement puts it. Tool calls, an elicitation round trip (a server
// request on the stream, the client's answer POSTed through node 1) and
// resource updates (the session's GET stream) work.
func TestLegacySSESessionPostsThroughAnotherNode(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{Nodes: 3, ExtraArgs: []string{"--tools", "demo,conformance"}})
	via := &postsVia{host: c.Node(1).HTTP, next: mcpclient.Bearer(testcluster.Token, http.DefaultTransport)}
	updated := make(chan struct{}, 1)
	client := mcp.NewClient(&mcp.Implementation{Name: "sse-test"}, &mcp.ClientOptions{
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}, nil
		},
		ResourceUpdatedHandler: func(context.Context, *mcp.ResourceUpdatedNotificationRequest) {
			select {
			case updated <- struct{}{}:
			default:
			}
		},
	})
	cs, err := client.Connect(t.Context(), &mcp.SSEClientTransport{
		Endpoint:   "http://" + c.Node(0).HTTP + "/sse",
		HTTPClient: &http.Client{Transport: via},
	}, &mcp.ClientSessionOptions{ProtocolVersion: "2024-11-05"})
	if err != nil {
		t.Fatalf("connect over SSE: %v", err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	tools, err := cs.ListTools(t.Context(), nil)
	if err != nil || len(tools.Tools) < 30 {
		t.Fatalf("tools/list: %v %v", tools, err)
	}
	echo(t, cs, "across nodes")
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "ask_confirmation", Arguments: map[string]any{"question": "ok?"}})
	if err != nil || res.IsError || !strings.Contains(fmt.Sprint(res.StructuredContent), "true") {
		t.Fatalf("elicitation round trip: %+v %v", res, err)
	}
	// Notifications outside any request come from the session's GET
	// stream, which node 0 holds and copies to the SSE stream.
	if err := cs.Subscribe(t.Context(), &mcp.SubscribeParams{URI: "test://watched-resource"}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-updated:
	case <-time.After(15 * time.Second):
		t.Fatal("no resource update on the SSE stream")
	}
	// initialize, notifications/initialized, tools/list, two calls, the
	// elicitation's answer and subscribe: all through node 1.
	if n := via.posts.Load(); n < 7 {
		t.Fatalf("%d POSTs went through node 1, want at least 7", n)
	}
}

// mcp-remote (pinned in tools/mcpremote) with --transport sse-only: a
// stdio MCP client reaches the node through it, lists the tools and
// resumes an execute approved over the HTTP API.
func TestLegacySSEThroughMCPRemoteSSEOnly(t *testing.T) {
	proxy := filepath.Join("node_modules", "mcp-remote", "dist", "proxy.js")
	node, bin := nodeScript(t, "mcpremote", proxy, proxy)
	info := startCodeNode(t, nil)
	cmd := exec.Command(node, bin, "http://"+info.HTTPAddr+"/sse", "--transport", "sse-only", "--header", "Authorization:Bearer "+aliceToken)
	cmd.Env = append(os.Environ(), "MCP_REMOTE_CONFIG_DIR="+t.TempDir())
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "mcp-remote-test"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect through mcp-remote: %v\n%s", err, stderr.String())
	}
	t.Cleanup(func() { _ = cs.Close() })
	tools, err := cs.ListTools(ctx, nil)
	if err != nil || !slices.ContainsFunc(tools.Tools, func(tl *mcp.Tool) bool { return tl.Name == "execute" }) {
		t.Fatalf("tools/list through mcp-remote: %v %v\n%s", tools, err, stderr.String())
	}
	id := pause(t, cs, "waiting_for_interaction")
	url := fmt.Sprintf("http://%s/api/executions/%s/resume", info.HTTPAddr, id)
	if r := api(t, "POST", url, bobToken, `{"action":"accept"}`); r.status != 200 || r.body["status"] != "accepted" {
		t.Fatalf("accept: %d %v", r.status, r.body)
	}
	res, sc := callTool(t, cs, "resume", map[string]any{"executionId": id, "action": "accept"})
	if res.IsError || sc["status"] != "completed" {
		t.Fatalf("resume: %s", mcpclient.Text(res))
	}
	if got := todos(t, info.HTTPAddr, aliceToken); len(got) != 1 || got[0]["title"] != "ship it" {
		t.Fatalf("todos %v", got)
	}
}

// An HTTP+SSE session follows the residency rules of any session: over
// the soft cap it is evicted, its standalone stream (held for the SSE
// stream) parks on reconnect instead of restoring it, and its next
// request restores it transparently.
func TestLegacySSESessionIsEvictedParksAndRestores(t *testing.T) {
	info := startCodeNode(t, func(c *app.Config) {
		c.NodeID = "s1"
		c.MCP.SoftCap = 1
	})
	p := metricsProbe{t, info.HTTPAddr}
	node := map[string]string{"node": "s1"}
	a := connectSSE(t, info.HTTPAddr, aliceToken)
	p.handshakesEnded(node, 1)
	b := connectMode(t, info.HTTPAddr, bobToken, "")
	if _, err := b.ListTools(t.Context(), nil); err != nil {
		t.Fatalf("second session: %v", err)
	}
	p.waitFor("cap eviction", "mcpgrain_runtime_disposals_total", map[string]string{"node": "s1", "reason": "cap"}, exactly(1))
	p.waitFor("the SSE session's stream parked", "mcpgrain_parked_streams", node, exactly(1))
	if v := p.get("mcpgrain_session_activations_total", node); v != 2 {
		t.Fatalf("the parked stream restored the session: %v activations, want 2", v)
	}
	res, sc := callTool(t, a, "execute", map[string]any{"code": `return (await tools.demo.listTodos({})).length`})
	if res.IsError || sc["status"] != "completed" {
		t.Fatalf("execute after eviction: %s", mcpclient.Text(res))
	}
	p.waitFor("restore", "mcpgrain_session_activations_total", node, exactly(3))
}
