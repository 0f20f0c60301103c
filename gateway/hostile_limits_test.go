package gateway_test

import (
	"bytes"
	"database/sql"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	_ "modernc.org/sqlite"

	"github.com/mcpgrain/mcpgrain/actors/policy"
	"github.com/mcpgrain/mcpgrain/cluster"
	"github.com/mcpgrain/mcpgrain/internal/app"
	"github.com/mcpgrain/mcpgrain/internal/mcpclient"
	"github.com/mcpgrain/mcpgrain/internal/testcluster"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// The hostile-input suite, part two: what an attacker can make a node
// hold or store. Each test names the bound and fails without it.

// h2Conn is a raw HTTP/2 client connection that ignores whatever the
// server advertises, as a hostile client would.
type h2Conn struct {
	t        *testing.T
	conn     net.Conn
	fr       *http2.Framer
	settings map[http2.SettingID]uint32 // the server's initial SETTINGS
}

// dialH2 connects to addr with prior knowledge (plaintext HTTP/2, as gRPC
// speaks it) and reads the server's SETTINGS.
func dialH2(t *testing.T, addr string) *h2Conn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := conn.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(conn, conn)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	c := &h2Conn{t: t, conn: conn, fr: fr, settings: map[http2.SettingID]uint32{}}
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("reading the server's SETTINGS: %v", err)
		}
		if sf, ok := f.(*http2.SettingsFrame); ok && !sf.IsAck() {
			_ = sf.ForeachSetting(func(s http2.Setting) error {
				c.settings[s.ID] = s.Val
				return nil
			})
			return c
		}
	}
}

// call sends one gRPC call on stream 1 with the given authorization value,
// split into CONTINUATION frames as needed, and returns how the server
// ended it: "grpc-status N", "rst CODE", "goaway CODE" or "closed".
func (c *h2Conn) call(path, authorization string) string {
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	for _, f := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", path}, {":authority", "x"},
		{"content-type", "application/grpc"}, {"te", "trailers"}, {"authorization", authorization}} {
		_ = enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	b := block.Bytes()
	// Written concurrently: a server that stops reading must not block the
	// test; whatever it answers is read below.
	go func() {
		const chunk = 16 << 10
		first := min(chunk, len(b))
		if c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: b[:first], EndHeaders: first == len(b)}) != nil {
			return
		}
		for off := first; off < len(b); off += chunk {
			end := min(off+chunk, len(b))
			if c.fr.WriteContinuation(1, end == len(b), b[off:end]) != nil {
				return
			}
		}
		_ = c.fr.WriteData(1, true, []byte{0, 0, 0, 0, 0}) // an empty request message
	}()
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			return "closed"
		}
		switch f := f.(type) {
		case *http2.RSTStreamFrame:
			return "rst " + f.ErrCode.String()
		case *http2.GoAwayFrame:
			return "goaway " + f.ErrCode.String()
		case *http2.MetaHeadersFrame:
			for _, h := range f.Fields {
				if h.Name == "grpc-status" {
					return "grpc-status " + h.Value
				}
			}
		}
	}
}

// TestGRPCBoundsWhatAnUnauthenticatedCallerCanSend: gRPC's defaults let a
// caller send 16 MiB of metadata per call (and unbounded calls per
// connection) before the bearer token is even looked at. The public gRPC
// endpoint advertises and enforces 16 KiB of metadata, 100 calls per
// connection and 256 KiB request messages; the cluster listener 64 KiB of
// metadata.
func TestGRPCBoundsWhatAnUnauthenticatedCallerCanSend(t *testing.T) {
	info := startCodeNode(t, nil)
	const path = "/mcpgrain.v1.ApprovalService/ListPausedExecutions"

	// The server advertises its bounds.
	c := dialH2(t, info.GRPCAddr)
	if got := c.settings[http2.SettingMaxHeaderListSize]; got != app.GRPCMaxHeaderListSize {
		t.Errorf("gRPC SETTINGS_MAX_HEADER_LIST_SIZE %d, want %d", got, app.GRPCMaxHeaderListSize)
	}
	if got := c.settings[http2.SettingMaxConcurrentStreams]; got != app.GRPCMaxConcurrentStreams {
		t.Errorf("gRPC SETTINGS_MAX_CONCURRENT_STREAMS %d, want %d", got, app.GRPCMaxConcurrentStreams)
	}
	// A client that ignores them gets its call reset or its connection
	// closed, never an answer that would show the metadata was taken in.
	if got := c.call(path, "Bearer "+strings.Repeat("a", 1<<20)); strings.HasPrefix(got, "grpc-status") {
		t.Errorf("1 MiB of metadata was read and answered (%s), want the stream refused", got)
	}
	// A small wrong token on a fresh connection is still a plain refusal.
	if got := dialH2(t, info.GRPCAddr).call(path, "Bearer "+strings.Repeat("a", 32)); got != "grpc-status 16" {
		t.Errorf("unknown token: %s, want grpc-status 16 (Unauthenticated)", got)
	}

	// A well-behaved gRPC client does not even send it.
	client := approvalClient(t, info.GRPCAddr)
	ctx := metadata.AppendToOutgoingContext(t.Context(), "authorization", "Bearer "+strings.Repeat("a", 1<<20))
	if _, err := client.ListPausedExecutions(ctx, &pb.ListPausedExecutionsRequest{}); status.Code(err) == codes.Unauthenticated || err == nil {
		t.Errorf("1 MiB of metadata through grpc-go: %v, want it refused before the server looks at it", err)
	}

	// An authenticated caller's request message is bounded too.
	_, err := client.DecideExecution(withToken(t, aliceToken), &pb.DecideExecutionRequest{
		ExecutionId: "exec_x", Action: "decline", ContentJson: `{"reason":"` + strings.Repeat("x", 512<<10) + `"}`})
	if status.Code(err) != codes.ResourceExhausted {
		t.Errorf("a 512 KiB decision: %v, want ResourceExhausted (message over %d bytes)", err, app.GRPCMaxRecvMsgSize)
	}

	// The cluster listener (actor remote) bounds metadata as well.
	if got := dialH2(t, info.ClusterAddr).settings[http2.SettingMaxHeaderListSize]; got != cluster.RemoteMaxHeaderListSize {
		t.Errorf("cluster listener SETTINGS_MAX_HEADER_LIST_SIZE %d, want %d", got, cluster.RemoteMaxHeaderListSize)
	}
}

// TestHugeRequestIDsAndMethodsAreRefusedAtTheGateway: go-sdk echoes a
// request's id in its answer (and an unknown method's name in its error),
// and every answer on an SSE stream is kept in the session's event log for
// an hour: 20 pings with 4 MiB ids grew the store by 92 MiB in 4 s. The
// gateway refuses ids and methods over 256 bytes with a JSON-RPC -32600
// that echoes neither, in a single message and in a batch; ids up to the
// bound work as before.
func TestHugeRequestIDsAndMethodsAreRefusedAtTheGateway(t *testing.T) {
	info := startCodeNode(t, nil)
	cs := connectMode(t, info.HTTPAddr, aliceToken, "")
	headers := map[string]string{"Authorization": "Bearer " + aliceToken, "Content-Type": "application/json",
		"Accept": "application/json, text/event-stream", "Mcp-Session-Id": cs.ID(), "Mcp-Protocol-Version": "2025-11-25"}
	huge := `"` + strings.Repeat("i", 4<<20-200) + `"` // just under the 4 MiB body limit
	for name, body := range map[string]string{
		"4 MiB id":                 `{"jsonrpc":"2.0","id":` + huge + `,"method":"ping"}`,
		"257-byte id":              `{"jsonrpc":"2.0","id":"` + strings.Repeat("i", 255) + `","method":"ping"}`,
		"4 MiB method":             `{"jsonrpc":"2.0","id":1,"method":` + huge + `}`,
		"4 MiB id in a batch":      `[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":` + huge + `,"method":"ping"}]`,
		"after a junk batch entry": `[1,{"jsonrpc":"2.0","id":` + huge + `,"method":"ping"}]`,
		"4 MiB notification name":  `{"jsonrpc":"2.0","method":` + huge + `}`,
	} {
		r := raw(t, "POST", info.HTTPAddr, headers, body)
		if r.status != 400 || rpcCode(t, r.body) != -32600 || len(r.body) > 512 {
			t.Errorf("%s: %d, %d bytes (%.200s), want 400 -32600 echoing nothing", name, r.status, len(r.body), r.body)
		}
	}
	// The longest id accepted still gets its answer.
	id := `"` + strings.Repeat("i", 254) + `"`
	r := raw(t, "POST", info.HTTPAddr, headers, `{"jsonrpc":"2.0","id":`+id+`,"method":"ping"}`)
	if r.status != 200 || !strings.Contains(string(r.body), id) {
		t.Fatalf("a %d-byte id: %d %.300s", len(id), r.status, r.body)
	}
	if err := cs.Ping(t.Context(), nil); err != nil {
		t.Fatalf("the session after the refusals: %v", err)
	}
}

// TestEventLogKeepsWhatASessionStoresWithinItsBudget: every SSE event of
// a response is kept for resumability, an hour in the store, so a session
// could make the node store whatever it got answered. An event over the
// per-event bound is delivered but not kept; a session's stored events stay
// within its byte budget, oldest dropped first; a recent stream still
// resumes.
func TestEventLogKeepsWhatASessionStoresWithinItsBudget(t *testing.T) {
	const maxEvent, budget = 48 << 10, 256 << 10
	dbPath := filepath.Join(t.TempDir(), "events.db")
	info, stop := startNodeStoppable(t, func(c *app.Config) {
		c.Store = "sqlite:" + dbPath
		c.MCP.Packs = []string{"demo"}
		c.MCP.MaxEventBytes, c.MCP.SessionEventBytes = maxEvent, budget
	})
	cs := connect(t, info.HTTPAddr, aliceToken, "2025-11-25", nil)
	headers := map[string]string{"Authorization": "Bearer " + aliceToken, "Content-Type": "application/json",
		"Accept": "application/json, text/event-stream", "Mcp-Session-Id": cs.ID(), "Mcp-Protocol-Version": "2025-11-25"}
	echo := func(id, n int) rawResponse {
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":%q}}}`, id, strings.Repeat("e", n))
		r := raw(t, "POST", info.HTTPAddr, headers, body)
		if r.status != 200 || !strings.Contains(string(r.body), fmt.Sprintf(`"id":%d,"result"`, id)) {
			t.Fatalf("echo %d: %d %.200s", id, r.status, r.body)
		}
		return r
	}
	// 40 answers of 40 KiB: 1.6 MB answered, at most the budget kept.
	for i := range 40 {
		echo(100+i, 40<<10)
	}
	// An answer over the per-event bound is delivered all the same...
	echo(200, 60<<10)
	if v := scrapeMetrics(t, info.HTTPAddr).value("mcpgrain_event_log_unlogged_total", nil); v != 1 {
		t.Errorf("mcpgrain_event_log_unlogged_total %v, want 1 (the 60 KiB answer)", v)
	}
	// ... and a recent stream still resumes: its answer is replayed.
	r := echo(300, 10)
	first := regexp.MustCompile(`(?m)^id: (\S+)$`).FindSubmatch(r.body)
	if first == nil {
		t.Fatalf("no event id in %.300s", r.body)
	}
	resume := raw(t, "GET", info.HTTPAddr, map[string]string{"Authorization": "Bearer " + aliceToken, "Accept": "text/event-stream",
		"Mcp-Session-Id": cs.ID(), "Mcp-Protocol-Version": "2025-11-25", "Last-Event-ID": string(first[1])}, "")
	if resume.status != 200 || !strings.Contains(string(resume.body), `"id":300,"result"`) {
		t.Fatalf("resuming a recent stream: %d %.300s", resume.status, resume.body)
	}

	// A graceful stop flushes (and trims if a quarter of the budget was
	// written since the last trim); then count what the store kept: at
	// most the budget plus what a quarter of it and one event add before
	// the next trim.
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", dbPath)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var stored, biggest int64
	if err := db.QueryRow(`SELECT COALESCE(SUM(LENGTH(data)), 0), COALESCE(MAX(LENGTH(data)), 0) FROM mcp_events WHERE session = ?`, cs.ID()).Scan(&stored, &biggest); err != nil {
		t.Fatal(err)
	}
	if stored > budget+budget/4+maxEvent || biggest > maxEvent {
		t.Fatalf("the store kept %d bytes of the session's events (largest %d), want at most %d (largest at most %d)", stored, biggest, budget+budget/4+maxEvent, maxEvent)
	}
	if stored < budget/2 {
		t.Fatalf("the store kept only %d bytes: the budget (%d) should keep the newest events", stored, budget)
	}
}

// debugGet sends method path with token ("" for none) and returns the
// status, the Retry-After header and the body.
func debugCall(t *testing.T, method, url, token, body string) (int, string, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Retry-After"), string(b)
}

// TestDebugRoutesNeedTheAdminRole: with --enable-pprof, anyone could read
// /debug/pprof/cmdline (--token and --state-key with it: the state key
// forges requestState for any principal); with --enable-probe anyone could
// create grain rows (one per id) and 2,000 durable reminders per request.
// Both now need a bearer token with the admin role; the command line is
// never served; probes are rate-limited per principal and a request sets
// at most probe.MaxReminders reminders.
func TestDebugRoutesNeedTheAdminRole(t *testing.T) {
	dbPath := filepath.Join(t.TempDir(), "debug.db")
	info := startNodeInfo(t, func(c *app.Config) {
		c.Store = "sqlite:" + dbPath
		c.EnablePprof, c.EnableProbe = true, true
	})
	base := "http://" + info.HTTPAddr
	for _, path := range []string{"/debug/pprof/", "/debug/pprof/cmdline", "/debug/pprof/heap", "/debug/pprof/symbol"} {
		if st, _, body := debugCall(t, "GET", base+path, "", ""); st != 401 {
			t.Errorf("GET %s without a token: %d %.100q, want 401", path, st, body)
		}
		if st, _, body := debugCall(t, "GET", base+path, bobToken, ""); st != 403 || !strings.Contains(body, "insufficient_role") {
			t.Errorf("GET %s as a member: %d %.100q, want 403 insufficient_role", path, st, body)
		}
	}
	if st, _, body := debugCall(t, "GET", base+"/debug/pprof/cmdline", aliceToken, ""); st != 404 || strings.Contains(body, "test") {
		t.Errorf("GET /debug/pprof/cmdline as an admin: %d %.200q, want 404 (never served)", st, body)
	}
	if st, _, _ := debugCall(t, "GET", base+"/debug/pprof/", aliceToken, ""); st != 200 {
		t.Errorf("GET /debug/pprof/ as an admin: %d", st)
	}

	for i := range 20 {
		id := fmt.Sprintf("anon-%d", i)
		if st, _, _ := debugCall(t, "POST", base+"/debug/probe/"+id+"?delta=1", "", ""); st != 401 {
			t.Fatalf("probe without a token: %d, want 401", st)
		}
		if st, _, _ := debugCall(t, "POST", base+"/debug/probe/"+id+"?delta=1", bobToken, ""); st != 403 {
			t.Fatalf("probe as a member: %d, want 403", st)
		}
	}
	var specs []string
	for i := range 101 {
		specs = append(specs, fmt.Sprintf(`{"name":"r%d","due_at_ms":%d}`, i, time.Now().Add(time.Hour).UnixMilli()))
	}
	if st, _, body := debugCall(t, "POST", base+"/debug/probe/admin/reminders", aliceToken, `{"reminders":[`+strings.Join(specs, ",")+`]}`); st != 400 {
		t.Errorf("101 reminders in one request: %d %.200q, want 400", st, body)
	}
	if st, _, body := debugCall(t, "POST", base+"/debug/probe/admin?delta=1", aliceToken, ""); st != 200 {
		t.Fatalf("probe as an admin: %d %.200q", st, body)
	}

	// Nothing the refused requests named reached the store.
	db, err := sql.Open("sqlite", dbPath)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var rows, reminders int
	if err := db.QueryRow(`SELECT COUNT(*) FROM grains WHERE grain LIKE 'probe/%'`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow(`SELECT COUNT(*) FROM reminders WHERE grain LIKE 'probe/%'`).Scan(&reminders); err != nil {
		t.Fatal(err)
	}
	if rows != 1 || reminders != 0 {
		t.Fatalf("%d probe rows and %d probe reminders in the store, want 1 (the admin's) and 0", rows, reminders)
	}
}

// TestProbesAreRateLimitedPerPrincipal: --probe-rate-limit (bursts of
// twice the rate, at least 1) answers 429 with Retry-After beyond it.
func TestProbesAreRateLimitedPerPrincipal(t *testing.T) {
	info := startNodeInfo(t, func(c *app.Config) { c.EnableProbe, c.ProbeRateLimit = true, 0.001 }) // a burst of 1, then one per 1,000 s
	base := "http://" + info.HTTPAddr
	if st, _, body := debugCall(t, "POST", base+"/debug/probe/p?delta=1", aliceToken, ""); st != 200 {
		t.Fatalf("first probe: %d %.200q", st, body)
	}
	if st, retry, _ := debugCall(t, "POST", base+"/debug/probe/p?delta=1", aliceToken, ""); st != 429 || retry == "" {
		t.Fatalf("second probe: %d Retry-After %q, want 429 with Retry-After", st, retry)
	}
}

// TestSignInLinksFromAnotherSiteAreRefused: a link with ?token= signed in
// whoever followed it, from any site: an attacker's page could sign a
// victim's browser in as the attacker (login CSRF), and the victim would
// then see and decide the attacker's executions as their own. A cross-site
// (or same-site, other-origin) navigation now gets the sign-in form and no
// cookie; the user's own navigation (Sec-Fetch-Site: none, or a browser
// that sends none) still signs in.
func TestSignInLinksFromAnotherSiteAreRefused(t *testing.T) {
	info := startCodeNode(t, nil)
	cs := connectMode(t, info.HTTPAddr, aliceToken, "")
	id := pause(t, cs, "waiting_for_interaction")
	link := "http://" + info.HTTPAddr + "/approve/" + id + "?token=" + carolToken
	follow := func(hdr map[string]string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", link, nil)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, string(b)
	}
	for _, hdr := range []map[string]string{
		{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate"},
		{"Sec-Fetch-Site": "same-site", "Sec-Fetch-Mode": "navigate"},
	} {
		resp, body := follow(hdr)
		if resp.StatusCode != 403 || len(resp.Cookies()) != 0 || !strings.Contains(body, "another site") {
			t.Errorf("%v: %d, cookies %v, want 403 with the sign-in form and no cookie", hdr, resp.StatusCode, resp.Cookies())
		}
	}
	for _, hdr := range []map[string]string{{"Sec-Fetch-Site": "none", "Sec-Fetch-Mode": "navigate"}, nil} {
		resp, _ := follow(hdr)
		var paths []string
		for _, c := range resp.Cookies() {
			paths = append(paths, c.Path)
		}
		// One cookie per page that signs in: the approval page and the inbox.
		if resp.StatusCode != 303 || strings.Join(paths, " ") != "/approve/ /approvals" {
			t.Errorf("%v: %d, cookies %v, want 303 and the sign-in cookie for /approve/ and /approvals", hdr, resp.StatusCode, resp.Cookies())
		}
	}
}

// TestFailedSignInsAreLimitedPerAddress: tokens could be guessed as fast
// as the node answered, on every surface. Failed sign-ins now take from a
// per-address budget (--auth-failure-rate / --auth-failure-burst); an
// address out of it gets 429 with Retry-After (gRPC: RESOURCE_EXHAUSTED)
// for every attempt with credentials — a valid token too — on every
// surface, whichever surface the failures were on.
func TestFailedSignInsAreLimitedPerAddress(t *testing.T) {
	const burst = 3
	limited := func(c *app.Config) { c.MCP.AuthFailureRate, c.MCP.AuthFailureBurst = 0.001, burst }
	mcpCall := func(addr, token string) rawResponse {
		return raw(t, "POST", addr, map[string]string{"Authorization": "Bearer " + token, "Content-Type": "application/json",
			"Accept": "application/json, text/event-stream", "Mcp-Protocol-Version": "2025-11-25"}, `{"jsonrpc":"2.0","id":1,"method":"ping"}`)
	}
	const wrong = "mcpg_wrong_token_0123456789"

	t.Run("failures on /mcp close every surface", func(t *testing.T) {
		info := startCodeNode(t, limited)
		for i := range burst {
			if r := mcpCall(info.HTTPAddr, wrong); r.status != 401 {
				t.Fatalf("wrong token %d: %d", i+1, r.status)
			}
		}
		r := mcpCall(info.HTTPAddr, wrong)
		if r.status != 429 || r.header.Get("Retry-After") == "" || rpcCode(t, r.body) != -32001 {
			t.Fatalf("wrong token %d: %d Retry-After %q %s, want 429 with Retry-After", burst+1, r.status, r.header.Get("Retry-After"), r.body)
		}
		if r := mcpCall(info.HTTPAddr, aliceToken); r.status != 429 {
			t.Errorf("a valid token from the blocked address on /mcp: %d, want 429", r.status)
		}
		if r := api(t, "GET", "http://"+info.HTTPAddr+"/api/executions", aliceToken, ""); r.status != 429 || r.body["error"] != "rate_limited" {
			t.Errorf("approval API: %d %v, want 429 rate_limited", r.status, r.body)
		}
		if _, err := approvalClient(t, info.GRPCAddr).ListPausedExecutions(withToken(t, aliceToken), &pb.ListPausedExecutionsRequest{}); status.Code(err) != codes.ResourceExhausted {
			t.Errorf("gRPC: %v, want ResourceExhausted", err)
		}
		req, _ := http.NewRequest("GET", "http://"+info.HTTPAddr+"/approve/exec_x", nil)
		req.AddCookie(&http.Cookie{Name: "mcpgrain_approval_token", Value: aliceToken})
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" {
			t.Errorf("approval page: %d, want 429 with Retry-After", resp.StatusCode)
		}
	})
	t.Run("the page's sign-in form counts", func(t *testing.T) {
		info := startCodeNode(t, limited)
		login := func(token string) int {
			resp, err := http.PostForm("http://"+info.HTTPAddr+"/approve/exec_x/login", url.Values{"token": {token}})
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			return resp.StatusCode
		}
		for i := range burst {
			if st := login(wrong); st != 401 {
				t.Fatalf("wrong token %d: %d", i+1, st)
			}
		}
		if st := login(aliceToken); st != 429 {
			t.Fatalf("after %d failures, a valid token: %d, want 429", burst, st)
		}
		if r := mcpCall(info.HTTPAddr, aliceToken); r.status != 429 {
			t.Errorf("/mcp after failures on the page: %d, want 429", r.status)
		}
	})
	t.Run("gRPC counts", func(t *testing.T) {
		info := startCodeNode(t, limited)
		client := approvalClient(t, info.GRPCAddr)
		for i := range burst {
			if _, err := client.ListPausedExecutions(withToken(t, wrong), &pb.ListPausedExecutionsRequest{}); status.Code(err) != codes.Unauthenticated {
				t.Fatalf("wrong token %d: %v", i+1, err)
			}
		}
		if _, err := client.ListPausedExecutions(withToken(t, aliceToken), &pb.ListPausedExecutionsRequest{}); status.Code(err) != codes.ResourceExhausted {
			t.Fatalf("after %d failures, a valid token: %v, want ResourceExhausted", burst, err)
		}
	})
	t.Run("requests without credentials are not failures", func(t *testing.T) {
		info := startCodeNode(t, limited)
		for range 3 * burst {
			if r := raw(t, "POST", info.HTTPAddr, map[string]string{"Content-Type": "application/json"}, `{}`); r.status != 401 {
				t.Fatalf("no token: %d", r.status)
			}
		}
		if r := mcpCall(info.HTTPAddr, aliceToken); r.status == 429 {
			t.Fatal("requests without a token used up the address's failures")
		}
	})
}

// TestViewersSeeButNeverDecide: roles meant nothing (any key of the
// organization decided; the role was only recorded as org_write_access).
// A viewer now lists and shows on every surface and is refused every
// decision — HTTP 403 insufficient_role, gRPC PERMISSION_DENIED, the CLI
// exits 1 saying so, the page shows the call without buttons — and the
// pause stays live for a member to decide. With --approvers admin a member
// is refused too.
func TestViewersSeeButNeverDecide(t *testing.T) {
	withVera := func(approvers string) func(*app.Config) {
		return func(c *app.Config) {
			k, err := c.MCP.Keys.Merge(mustKeys(t, veraToken, "vera", "acme", "viewer"))
			if err != nil {
				t.Fatal(err)
			}
			c.MCP.Keys, c.MCP.Approvers = k, policy.Approvers(approvers)
		}
	}
	// Subtests: each node, with its gRPC clients, is gone before the next
	// starts (two in one process race on gRPC's global logger under -race).
	t.Run("viewer", func(t *testing.T) {
		info := startCodeNode(t, withVera(""))
		base := "http://" + info.HTTPAddr
		alice := connectMode(t, info.HTTPAddr, aliceToken, "")
		id := pause(t, alice, "waiting_for_interaction")

		// Seeing: the API, gRPC and the page.
		if r := api(t, "GET", base+"/api/executions", veraToken, ""); r.status != 200 || len(r.body["executions"].([]any)) != 1 {
			t.Fatalf("viewer's list: %d %v", r.status, r.body)
		}
		if r := api(t, "GET", base+"/api/executions/"+id, veraToken, ""); r.status != 200 {
			t.Fatalf("viewer's show: %d %v", r.status, r.body)
		}
		client := approvalClient(t, info.GRPCAddr)
		if _, err := client.GetPausedExecution(withToken(t, veraToken), &pb.GetPausedExecutionRequest{ExecutionId: id}); err != nil {
			t.Fatalf("viewer's gRPC show: %v", err)
		}
		req, _ := http.NewRequest("GET", base+"/approve/"+id, nil)
		req.AddCookie(&http.Cookie{Name: "mcpgrain_approval_token", Value: veraToken})
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		page, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(page), "demo.createTodo") || strings.Contains(string(page), "<button") || !strings.Contains(string(page), "not decide") {
			t.Fatalf("viewer's page: %d, buttons shown: %v\n%s", resp.StatusCode, strings.Contains(string(page), "<button"), page)
		}

		// Deciding: refused everywhere.
		if r := api(t, "POST", base+"/api/executions/"+id+"/resume", veraToken, `{"action":"accept"}`); r.status != 403 || r.body["error"] != "insufficient_role" {
			t.Errorf("viewer's decision over HTTP: %d %v, want 403 insufficient_role", r.status, r.body)
		}
		if _, err := client.DecideExecution(withToken(t, veraToken), &pb.DecideExecutionRequest{ExecutionId: id, Action: "accept"}); status.Code(err) != codes.PermissionDenied {
			t.Errorf("viewer's decision over gRPC: %v, want PermissionDenied", err)
		}
		out, err := mcpgrainCLI(t, testcluster.Binary(t), "approve", "accept", id, "--grpc", info.GRPCAddr, "--token-file", tokenFile(t, veraToken))
		if err == nil || !strings.Contains(out, "insufficient_role") {
			t.Errorf("viewer's decision with the CLI: %v\n%s", err, out)
		}

		// Nothing was decided: a member decides once.
		if r := api(t, "POST", base+"/api/executions/"+id+"/resume", bobToken, `{"action":"accept"}`); r.status != 200 {
			t.Fatalf("member's decision after the refusals: %d %v", r.status, r.body)
		}
		if res, _ := callTool(t, alice, "resume", map[string]any{"executionId": id}); res.IsError {
			t.Fatalf("resume: %s", mcpclient.Text(res))
		}
		if n := len(todos(t, info.HTTPAddr, aliceToken)); n != 1 {
			t.Fatalf("%d to-dos, want 1", n)
		}
	})
	// --approvers admin: members see but do not decide; admins do.
	t.Run("approvers admin", func(t *testing.T) {
		info := startCodeNode(t, withVera("admin"))
		base := "http://" + info.HTTPAddr
		alice := connectMode(t, info.HTTPAddr, aliceToken, "")
		id := pause(t, alice, "waiting_for_interaction")
		if r := api(t, "POST", base+"/api/executions/"+id+"/resume", bobToken, `{"action":"accept"}`); r.status != 403 || r.body["error"] != "insufficient_role" || !strings.Contains(r.body["message"].(string), "only admins") {
			t.Errorf("member's decision with --approvers admin: %d %v", r.status, r.body)
		}
		if _, err := approvalClient(t, info.GRPCAddr).DecideExecution(withToken(t, bobToken), &pb.DecideExecutionRequest{ExecutionId: id, Action: "accept"}); status.Code(err) != codes.PermissionDenied {
			t.Errorf("member's gRPC decision with --approvers admin: %v", err)
		}
		if r := api(t, "POST", base+"/api/executions/"+id+"/resume", aliceToken, `{"action":"decline"}`); r.status != 200 {
			t.Fatalf("admin's decision with --approvers admin: %d %v", r.status, r.body)
		}
	})
}
