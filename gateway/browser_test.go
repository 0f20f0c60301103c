package gateway_test

import (
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/mcpgrain/mcpgrain/internal/app"
	"github.com/mcpgrain/mcpgrain/internal/mcpclient"
)

// route is one request to a route of the node's mux.
type route struct{ method, path, body string }

// everyRoute lists a request to each route the node serves with code
// mode, the demo API, approvals, the probe and the profiler (see
// gateway.NewHandler, approvals.Register and the app's Mount), plus two
// paths no route claims (the catch-all 404).
func everyRoute(sid, eid string) []route {
	decision := `{"action":"accept"}`
	form := "action=accept"
	return []route{
		{"GET", "/healthz", ""}, {"GET", "/readyz", ""}, {"GET", "/metrics", ""},
		{"POST", "/debug/probe/rebind", ""}, {"POST", "/debug/probe/rebind/reminders", ""},
		{"GET", "/debug/pprof/", ""}, {"GET", "/debug/pprof/cmdline", ""}, {"GET", "/debug/pprof/symbol", ""},
		{"GET", "/debug/pprof/profile?seconds=1", ""}, {"GET", "/debug/pprof/trace?seconds=1", ""},
		{"POST", "/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`}, {"GET", "/mcp", ""}, {"DELETE", "/mcp", ""},
		{"GET", "/api/executions", ""}, {"GET", "/api/executions/" + eid, ""},
		{"POST", "/api/executions/" + eid + "/resume", decision},
		{"GET", "/api/mcp-sessions/" + sid + "/executions/" + eid, ""},
		{"POST", "/api/mcp-sessions/" + sid + "/executions/" + eid + "/resume", decision},
		{"GET", "/approve/" + eid, ""}, {"POST", "/approve/" + eid, form}, {"POST", "/approve/" + eid + "/login", "token=x"},
		{"GET", "/approvals", ""}, {"POST", "/approvals/login", "token=x"}, {"POST", "/approvals/" + eid, form},
		{"GET", "/approvals/events", ""}, {"GET", "/approvals/inbox.js", ""},
		{"GET", "/demo/todos", ""}, {"POST", "/demo/todos", `{"title":"rebound"}`},
		{"GET", "/demo/todos/1", ""}, {"DELETE", "/demo/todos/1", ""},
		{"GET", "/.well-known/oauth-protected-resource/mcp", ""}, {"GET", "/no/such/route", ""},
	}
}

// send makes one real HTTP request to the node at addr, under host as the
// Host header, with extra headers; it returns the status and body.
func send(t *testing.T, addr, host string, rt route, hdr map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(rt.method, "http://"+addr+rt.path, strings.NewReader(rt.body))
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	switch {
	case strings.HasPrefix(rt.body, "{"):
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
	case rt.body != "":
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", rt.method, rt.path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, string(b)
}

// TestDNSRebindingAndCrossOriginRequestsAreRefusedOnEveryRoute: a --no-auth
// node on loopback, with an execution waiting for approval. A page of
// another site whose name was rebound to 127.0.0.1 (Host and Origin
// evil.example, Sec-Fetch-Site same-origin — to the browser it is the
// page's own origin) gets 403 on every route the mux serves: it can
// neither list the pause, read the page's CSRF token, nor decide. A
// cross-origin page on the real Host gets 403 for every unsafe method. The
// pause is then still waiting, the loopback names (127.0.0.1, localhost)
// still work, a trusted origin is let through, and the approval page flow
// approves it.
func TestDNSRebindingAndCrossOriginRequestsAreRefusedOnEveryRoute(t *testing.T) {
	info := startCodeNode(t, func(c *app.Config) {
		c.MCP.NoAuth = true
		c.EnableProbe, c.EnablePprof = true, true
		c.MCP.TrustedOrigins = []string{"https://app.example"}
	})
	addr := info.HTTPAddr
	_, port, _ := net.SplitHostPort(addr)
	cs := connectMode(t, addr, "ignored", "")
	eid := pause(t, cs, "waiting_for_interaction")
	sid := cs.ID()

	evil := "evil.example:" + port
	rebound := map[string]string{"Origin": "http://" + evil, "Sec-Fetch-Site": "same-origin", "Mcp-Session-Id": sid}
	crossSite := map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site", "Mcp-Session-Id": sid}
	for _, rt := range everyRoute(sid, eid) {
		status, body := send(t, addr, evil, rt, rebound)
		if status != http.StatusForbidden || !strings.Contains(body, "invalid Host header") || strings.Contains(body, eid) {
			t.Errorf("rebound %s %s: %d %.200q, want 403 invalid Host header", rt.method, rt.path, status, body)
		}
		if rt.method == "GET" {
			continue // safe: the cross-origin rule is for writes (reads are the browser's CORS to refuse)
		}
		status, body = send(t, addr, addr, rt, crossSite)
		if status != http.StatusForbidden || !strings.Contains(body, "cross-origin request") {
			t.Errorf("cross-site %s %s: %d %.200q, want 403 cross-origin request", rt.method, rt.path, status, body)
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	// Nothing was decided; both loopback names still reach the routes.
	for _, host := range []string{addr, "localhost:" + port, "[::1]:" + port} {
		if status, body := send(t, addr, host, route{"GET", "/api/executions/" + eid, ""}, nil); status != 200 || !strings.Contains(body, "demo.createTodo") {
			t.Fatalf("Host %s: %d %q, want the waiting execution", host, status, body)
		}
	}
	// A trusted origin's write reaches the handler (which refuses the bad
	// action: 400, not the guard's 403).
	trusted := map[string]string{"Origin": "https://app.example", "Sec-Fetch-Site": "cross-site"}
	if status, body := send(t, addr, addr, route{"POST", "/api/executions/" + eid + "/resume", `{"action":"maybe"}`}, trusted); status != 400 {
		t.Fatalf("trusted origin: %d %q, want the handler's 400", status, body)
	}

	// The approval page flow, as the browser on the node's own origin runs
	// it: the page, its CSRF token, the same-origin form post.
	same := map[string]string{"Origin": "http://" + addr, "Sec-Fetch-Site": "same-origin"}
	status, page := send(t, addr, addr, route{"GET", "/approve/" + eid, ""}, map[string]string{"Sec-Fetch-Site": "none"})
	m := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(page)
	if status != 200 || m == nil {
		t.Fatalf("approval page: %d, csrf %v", status, m)
	}
	if status, body := send(t, addr, addr, route{"POST", "/approve/" + eid, "action=accept&csrf=" + url.QueryEscape(m[1])}, same); status != 200 || !strings.Contains(body, "accepted") {
		t.Fatalf("approve form: %d %.300q", status, body)
	}
	res, sc := callTool(t, cs, "resume", map[string]any{"executionId": eid})
	if res.IsError || sc["status"] != "completed" {
		t.Fatalf("resume after the page's approval: %s", mcpclient.Text(res))
	}
	if status, body := send(t, addr, addr, route{"GET", "/demo/todos", ""}, nil); status != 200 || strings.Count(body, `"title":"ship it"`) != 1 {
		t.Fatalf("to-dos after the approval: %d %s", status, body)
	}
}
