package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/exchange"
	"github.com/mcpgrain/mcpgrain/gateway/auth"
	"github.com/mcpgrain/mcpgrain/internal/app"
	"github.com/mcpgrain/mcpgrain/internal/mcpclient"
	"github.com/mcpgrain/mcpgrain/internal/testenv"
)

// The proxy tests of issue 27: MCP streams that stay quiet while a call
// works or waits, through a reverse proxy that cuts a response when no
// byte flows for proxyIdle (as nginx's proxy_read_timeout and the idle
// timeouts of load balancers do, at 60–125 s), with the gateway's
// keepalive every keepaliveEvery. Self-contained (its own node, tokens and
// proxy), so it does not depend on the package's other test helpers.
const (
	proxyIdle      = 2500 * time.Millisecond
	keepaliveEvery = 250 * time.Millisecond // a tenth: keepalives delayed on a loaded machine still arrive in time
	quietHold      = 2 * proxyIdle          // how long each call stays quiet
	kaToken        = "mcpg_kate_token_0123456789ab"
)

// TestKeepaliveCarriesQuietStreamsThroughAnIdleCuttingProxy: through a
// proxy that cuts streams idle for 2.5 s, with the keepalive at 250 ms, a
// go-sdk client (2025-11-25, browser mode) sees a long execute (its tool
// call waits two idle timeouts), a browser-mode resume that waits two
// idle timeouts for the decision made on the HTTP API, and its own quiet
// GET stream all survive: the proxy cut nothing, and keepalive comments
// crossed it on the GET stream and on the POST streams.
func TestKeepaliveCarriesQuietStreamsThroughAnIdleCuttingProxy(t *testing.T) {
	up := newSlowUpstream(t)
	info := startKeepaliveNode(t, keepaliveEvery, up.url)
	proxy := newIdleCutProxy(t, "http://"+info.HTTPAddr, proxyIdle)
	cs := connectThrough(t, proxy.url+"/mcp?elicitation_mode=browser", "2025-11-25")

	// A long execute: its tool call waits until released.
	done := make(chan error, 1)
	go func() {
		res, err := callWithin(cs, "execute", map[string]any{"code": `const r = await tools.up.slow({}); return r;`})
		if err == nil && res.IsError {
			err = errors.New(mcpclient.Text(res))
		}
		done <- err
	}()
	up.awaitCall(t, done)
	time.Sleep(quietHold) // the scenario: the call stays quiet for two idle timeouts
	close(up.release)
	if err := <-done; err != nil {
		t.Fatalf("the long execute did not survive the proxy: %v", err)
	}

	// A browser-mode resume waiting for the decision.
	res, err := callWithin(cs, "execute", map[string]any{"code": `const t = await tools.demo.createTodo({title: "kept alive"}); return t;`})
	if err != nil {
		t.Fatalf("execute: %v", err)
	}
	sc := structuredOf(res)
	id, _ := sc["executionId"].(string)
	if sc["status"] != "user_approval_required" || id == "" {
		t.Fatalf("execute: want user_approval_required, got %s", mcpclient.Text(res))
	}
	opened := proxy.openedPOSTs()
	resumed := make(chan map[string]any, 1)
	go func() {
		res, err := callWithin(cs, "resume", map[string]any{"executionId": id})
		if err != nil {
			resumed <- map[string]any{"error": err.Error()}
			return
		}
		resumed <- structuredOf(res)
	}()
	proxy.awaitPOSTOpened(t, opened)
	time.Sleep(quietHold) // the scenario: the resume waits for two idle timeouts
	decide(t, info.HTTPAddr, id)
	select {
	case sc := <-resumed:
		if sc["status"] != "completed" {
			t.Fatalf("the waiting resume did not survive the proxy: %v", sc)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the waiting resume did not return")
	}

	flows := proxy.snapshot()
	minGET := int64(proxyIdle / keepaliveEvery) // it outlived an idle timeout on keepalives alone
	var getKept, postKept bool
	for _, f := range flows {
		if f.cut {
			t.Errorf("the proxy cut a %s stream after %d keepalives", f.method, f.keepalives)
		}
		getKept = getKept || f.method == http.MethodGet && f.keepalives >= minGET
		postKept = postKept || f.method == "POST tools/call" && f.keepalives > 0
	}
	if !getKept || !postKept {
		t.Errorf("keepalives crossing the proxy: want ≥ %d on the GET stream and some on POST streams; flows %+v", minGET, flows)
	}
}

// TestKeepaliveCarriesSessionlessStreamsThroughAnIdleCuttingProxy: a
// 2026-07-28 execute has no priming event, so its response does not start
// until the call answers; the gateway opens its event stream at the
// first quiet interval, and the long call survives the same proxy, as
// does the client's quiet subscriptions/listen stream. Without the
// keepalive the proxy cuts both.
func TestKeepaliveCarriesSessionlessStreamsThroughAnIdleCuttingProxy(t *testing.T) {
	for _, tc := range []struct {
		name      string
		keepalive time.Duration
	}{{"keepalive", keepaliveEvery}, {"no keepalive", -1}} {
		t.Run(tc.name, func(t *testing.T) {
			up := newSlowUpstream(t)
			info := startKeepaliveNode(t, tc.keepalive, up.url)
			proxy := newIdleCutProxy(t, "http://"+info.HTTPAddr, proxyIdle)
			cs := connectThrough(t, proxy.url+"/mcp", "")
			if !proxy.saw("POST subscriptions/listen") {
				t.Fatal("the client opened no subscriptions/listen stream")
			}
			done := make(chan error, 1)
			go func() {
				res, err := callWithin(cs, "execute", map[string]any{"code": `const r = await tools.up.slow({}); return r;`})
				if err == nil && res.IsError {
					err = errors.New(mcpclient.Text(res))
				}
				done <- err
			}()
			up.awaitCall(t, done)
			if tc.keepalive < 0 {
				deadline := time.After(60 * time.Second)
				for cutCall, cutListen := false, false; !cutCall || !cutListen; {
					select {
					case m := <-proxy.cuts:
						cutCall = cutCall || m == "POST tools/call"
						cutListen = cutListen || m == "POST subscriptions/listen"
					case <-deadline:
						t.Fatalf("without keepalive the proxy should cut the quiet execute (%v) and listen stream (%v)", cutCall, cutListen)
					}
				}
				return
			}
			time.Sleep(quietHold) // the scenario: the call stays quiet for two idle timeouts
			close(up.release)
			if err := <-done; err != nil {
				t.Fatalf("the long execute did not survive the proxy: %v", err)
			}
			listened := false
			for _, f := range proxy.snapshot() {
				if f.cut {
					t.Errorf("the proxy cut a %s stream", f.method)
				}
				listened = listened || f.method == "POST subscriptions/listen" && f.keepalives >= int64(proxyIdle/keepaliveEvery)
			}
			if !listened {
				t.Errorf("the listen stream carried too few keepalives: %+v", proxy.snapshot())
			}
		})
	}
}

// TestKeepaliveCarriesATypeScriptClientsLongCallThroughAnIdleCuttingProxy:
// the official TypeScript SDK's client (tools/tsclient, 2025-11-25) makes
// a long execute through the same proxy; its SSE parser reads the
// keepalive comments and the call returns its result.
func TestKeepaliveCarriesATypeScriptClientsLongCallThroughAnIdleCuttingProxy(t *testing.T) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "tools", "tsclient", "node_modules", "@modelcontextprotocol", "sdk")); err != nil {
		testenv.Unavailable(t, "the TypeScript SDK is not installed (run: npm ci --prefix tools/tsclient)")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		testenv.Unavailable(t, "no node on PATH")
	}
	up := newSlowUpstream(t)
	info := startKeepaliveNode(t, keepaliveEvery, up.url)
	proxy := newIdleCutProxy(t, "http://"+info.HTTPAddr, proxyIdle)

	ctx, cancel := context.WithTimeout(t.Context(), 120*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join(root, "tools", "tsclient", "keepalive-client.mjs"))
	cmd.Env = append(os.Environ(), "MCP_URL="+proxy.url+"/mcp", "MCP_TOKEN="+kaToken, "MCP_TOOL=execute",
		`MCP_ARGS={"code":"const r = await tools.up.slow({}); return r;"}`)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	up.awaitCall(t, done)
	time.Sleep(quietHold) // the scenario: the call stays quiet for two idle timeouts
	close(up.release)
	if err := <-done; err != nil {
		t.Fatalf("TypeScript client: %v\n%s\n%s", err, stdout.String(), stderr.String())
	}
	var out struct {
		Result struct {
			IsError bool `json:"isError"`
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"result"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil || out.Result.IsError || len(out.Result.Content) == 0 || !strings.Contains(out.Result.Content[0].Text, "slow done") {
		t.Fatalf("TypeScript client's result %q: %v", stdout.String(), err)
	}
	kept := false
	for _, f := range proxy.snapshot() {
		if f.cut {
			t.Errorf("the proxy cut a %s stream", f.method)
		}
		kept = kept || f.method == "POST tools/call" && f.keepalives > 0
	}
	if !kept {
		t.Errorf("no keepalive crossed the proxy on the call's stream: %+v", proxy.snapshot())
	}
}

// TestWithoutKeepaliveTheIdleCuttingProxyCutsQuietStreams is the control:
// the same proxy, the keepalive off (--stream-keepalive 0): the quiet GET
// stream and the long execute's POST stream are cut. (So the test above
// fails without the keepalive.)
func TestWithoutKeepaliveTheIdleCuttingProxyCutsQuietStreams(t *testing.T) {
	up := newSlowUpstream(t)
	info := startKeepaliveNode(t, -1, up.url)
	proxy := newIdleCutProxy(t, "http://"+info.HTTPAddr, proxyIdle)
	cs := connectThrough(t, proxy.url+"/mcp", "2025-11-25")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "execute", Arguments: map[string]any{"code": `const r = await tools.up.slow({}); return r;`}})
		done <- err
	}()
	up.awaitCall(t, done)
	deadline := time.After(60 * time.Second)
	for cutGET, cutPOST := false, false; !cutGET || !cutPOST; {
		select {
		case m := <-proxy.cuts:
			cutGET = cutGET || m == http.MethodGet
			cutPOST = cutPOST || m == "POST tools/call"
		case <-deadline:
			t.Fatalf("without keepalive the proxy should cut the quiet streams (GET cut %v, POST cut %v)", cutGET, cutPOST)
		}
	}
	close(up.release)
}

// slowUpstream is an upstream MCP server whose tool "slow" (read-only: no
// approval) waits until release is closed.
type slowUpstream struct {
	url     string
	entered chan struct{}
	release chan struct{}
}

func newSlowUpstream(t *testing.T) *slowUpstream {
	t.Helper()
	u := &slowUpstream{entered: make(chan struct{}, 1), release: make(chan struct{})}
	srv := mcp.NewServer(&mcp.Implementation{Name: "slow"}, nil)
	srv.AddTool(&mcp.Tool{Name: "slow", InputSchema: map[string]any{"type": "object"}, Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			select {
			case u.entered <- struct{}{}:
			default:
			}
			select {
			case <-u.release:
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "slow done"}}}, nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(ts.Close)
	t.Cleanup(func() {
		select {
		case <-u.release:
		default:
			close(u.release)
		}
	})
	u.url = ts.URL
	return u
}

// awaitCall waits until the slow tool was called.
func (u *slowUpstream) awaitCall(t *testing.T, done <-chan error) {
	t.Helper()
	select {
	case <-u.entered:
	case err := <-done:
		t.Fatalf("execute ended before its tool call: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("the tool call did not start")
	}
}

// startKeepaliveNode runs a single node with code mode, the demo API and
// the upstream "up", its gateway's keepalive every keepalive (negative:
// none).
func startKeepaliveNode(t *testing.T, keepalive time.Duration, upstream string) app.Info {
	t.Helper()
	keys, err := auth.NewKeys(auth.Entry{Token: kaToken, User: "kate", Org: "keepalive", Role: "admin"})
	if err != nil {
		t.Fatal(err)
	}
	cfg := app.Config{
		NodeID: "k1", Bind: "127.0.0.1:0", HTTP: "127.0.0.1:0",
		Store:  "sqlite:" + filepath.Join(t.TempDir(), "k.db"),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		MCP: app.MCPConfig{Packs: []string{"code"}, Keys: keys, RateLimit: 1000, RateBurst: 1000,
			StateKey: []byte("0123456789abcdef0123456789abcdef"), StreamKeepalive: keepalive,
			Code: app.CodeConfig{DemoAPI: true, Upstreams: []app.UpstreamSource{{Name: "up", URL: upstream}}}},
	}
	ctx, cancel := context.WithCancel(context.Background())
	ready, done := make(chan app.Info, 1), make(chan error, 1)
	go func() { done <- app.Run(ctx, cfg, func(i app.Info) { ready <- i }) }()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case i := <-ready:
		return i
	case err := <-done:
		t.Fatalf("node did not start: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("node did not start in 60s")
	}
	return app.Info{}
}

// connectThrough connects a go-sdk client to endpoint, speaking version
// (2025-11-25: sessions, a standalone GET stream; "": the client's
// latest, 2026-07-28, sessionless).
func connectThrough(t *testing.T, endpoint, version string) *mcp.ClientSession {
	t.Helper()
	// A list-changed handler makes a 2026-07-28 client open a
	// subscriptions/listen stream.
	c := mcp.NewClient(&mcp.Implementation{Name: "keepalive-test"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint: endpoint, HTTPClient: &http.Client{Transport: mcpclient.Bearer(kaToken, http.DefaultTransport)},
	}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

func callWithin(cs *mcp.ClientSession, tool string, args map[string]any) (*mcp.CallToolResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	return cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
}

func structuredOf(res *mcp.CallToolResult) map[string]any {
	m, _ := res.StructuredContent.(map[string]any)
	return m
}

// decide accepts execution id on the node's HTTP API (not through the
// proxy: the decision is another surface).
func decide(t *testing.T, addr, id string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/api/executions/"+id+"/resume", bytes.NewReader([]byte(`{"action":"accept"}`)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+kaToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("accept: %d %s", resp.StatusCode, b)
	}
}

// idleCutProxy is a reverse proxy (httputil.ReverseProxy, flushing at
// once) that cuts a response when no byte of it arrives from the upstream
// for idle — the wait for the head included, as nginx's
// proxy_read_timeout does. It records every response it relayed: its
// method, the keepalive comments that crossed it, whether it was cut.
type idleCutProxy struct {
	url    string
	idle   time.Duration
	base   http.RoundTripper
	cuts   chan string // each cut response's request: "GET", "POST tools/call" …
	opened chan string // each response whose head arrived, named as in cuts

	mu    sync.Mutex
	flows []*proxyFlow
	posts int // POST responses opened
}

// proxyFlow is one relayed response.
type proxyFlow struct {
	method     string // and, for a POST, its JSON-RPC method
	keepalives atomic.Int64
	cut        atomic.Bool
}

// flowRecord is a proxyFlow's state at a moment.
type flowRecord struct {
	method     string
	keepalives int64
	cut        bool
}

func newIdleCutProxy(t *testing.T, target string, idle time.Duration) *idleCutProxy {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	p := &idleCutProxy{idle: idle, base: http.DefaultTransport, cuts: make(chan string, 1024), opened: make(chan string, 1024)}
	rp := &httputil.ReverseProxy{
		Rewrite:       func(r *httputil.ProxyRequest) { r.SetURL(u) },
		FlushInterval: -1,
		Transport:     p,
	}
	ts := httptest.NewServer(rp)
	t.Cleanup(ts.Close)
	p.url = ts.URL
	return p
}

// RoundTrip implements http.RoundTripper: the upstream request, cut when
// idle.
func (p *idleCutProxy) RoundTrip(r *http.Request) (*http.Response, error) {
	f := &proxyFlow{method: r.Method}
	if r.Method == http.MethodPost && r.Body != nil {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return nil, err
		}
		var m struct{ Method string }
		_ = json.Unmarshal(body, &m)
		f.method += " " + m.Method
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	ctx, cancel := context.WithCancel(r.Context())
	timer := time.AfterFunc(p.idle, func() {
		f.cut.Store(true)
		p.note(p.cuts, f.method)
		cancel()
	})
	resp, err := p.base.RoundTrip(r.WithContext(ctx))
	if err != nil || !timer.Reset(p.idle) {
		timer.Stop()
		cancel()
		if err == nil {
			resp.Body.Close()
			err = errors.New("idle proxy: no response head within the idle timeout")
		}
		return nil, err
	}
	p.mu.Lock()
	p.flows = append(p.flows, f)
	if r.Method == http.MethodPost {
		p.posts++
	}
	p.mu.Unlock()
	p.note(p.opened, f.method)
	resp.Body = &idleBody{ReadCloser: resp.Body, flow: f, timer: timer, idle: p.idle, cancel: cancel}
	return resp, nil
}

func (p *idleCutProxy) note(ch chan string, method string) {
	select {
	case ch <- method:
	default:
	}
}

// openedPOSTs is how many POST responses the proxy opened so far.
func (p *idleCutProxy) openedPOSTs() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.posts
}

// awaitPOSTOpened waits until the proxy opened more than n POST responses.
func (p *idleCutProxy) awaitPOSTOpened(t *testing.T, n int) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for p.openedPOSTs() <= n {
		select {
		case <-p.opened:
		case <-deadline:
			t.Fatal("the proxy did not open the POST stream")
		}
	}
}

// saw reports whether the proxy relayed a response to method.
func (p *idleCutProxy) saw(method string) bool {
	for _, f := range p.snapshot() {
		if f.method == method {
			return true
		}
	}
	return false
}

func (p *idleCutProxy) snapshot() []flowRecord {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]flowRecord, 0, len(p.flows))
	for _, f := range p.flows {
		out = append(out, flowRecord{method: f.method, keepalives: f.keepalives.Load(), cut: f.cut.Load()})
	}
	return out
}

// idleBody is a response body whose every byte resets the idle timer.
type idleBody struct {
	io.ReadCloser
	flow   *proxyFlow
	timer  *time.Timer
	idle   time.Duration
	cancel context.CancelFunc
}

func (b *idleBody) Read(buf []byte) (int, error) {
	n, err := b.ReadCloser.Read(buf)
	if n > 0 {
		if !b.timer.Reset(b.idle) {
			return 0, errors.New("idle proxy: stream cut after the idle timeout")
		}
		b.flow.keepalives.Add(int64(bytes.Count(buf[:n], exchange.KeepaliveComment)))
	}
	return n, err
}

func (b *idleBody) Close() error {
	b.timer.Stop()
	b.cancel()
	return b.ReadCloser.Close()
}
