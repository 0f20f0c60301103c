package systemtest

import (
	"bufio"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/mcpgrain/mcpgrain/actors/session"
	"github.com/mcpgrain/mcpgrain/cluster/grain"
	"github.com/mcpgrain/mcpgrain/cluster/store"
	"github.com/mcpgrain/mcpgrain/exchange/requeststate"
	"github.com/mcpgrain/mcpgrain/internal/app"
	"github.com/mcpgrain/mcpgrain/internal/mcpclient"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// The hostile-input and tenancy suite: one node with code mode, three
// principals (alice and bob in acme, carol in globex), and every way in
// tried with input an attacker controls. Each case names the status or
// error it must get, and checks nothing was lost or leaked.

// TestTenancyEveryDoorIsClosedToAnotherOrganization: carol (globex) knows
// alice's (acme) session id and paused execution id. Every surface refuses
// her, none reveals that the execution exists, and alice's pause is still
// live and decidable afterwards.
func TestTenancyEveryDoorIsClosedToAnotherOrganization(t *testing.T) {
	info := startCodeNode(t, nil)
	alice := connectMode(t, info.HTTPAddr, aliceToken, "")
	execID := pause(t, alice, "waiting_for_interaction")
	sid := alice.ID()
	base := "http://" + info.HTTPAddr

	// The MCP session itself: 403 -32003, for any method.
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"resume","arguments":{"executionId":"` + execID + `","action":"accept"}}}`,
	} {
		r := raw(t, "POST", info.HTTPAddr, map[string]string{"Authorization": "Bearer " + carolToken, "Content-Type": "application/json",
			"Accept": "application/json, text/event-stream", "Mcp-Session-Id": sid, "Mcp-Protocol-Version": "2025-11-25"}, body)
		if r.status != 403 || rpcCode(t, r.body) != -32003 {
			t.Fatalf("carol on alice's session: %d %s", r.status, r.body)
		}
	}
	if r := raw(t, "DELETE", info.HTTPAddr, map[string]string{"Authorization": "Bearer " + carolToken, "Mcp-Session-Id": sid}, ""); r.status != 403 {
		t.Fatalf("carol deleting alice's session: %d", r.status)
	}

	// The approval API: alice's execution does not exist for carol.
	notFound := func(what string, r apiResponse) {
		t.Helper()
		if r.status != 404 || r.body["error"] != "execution_not_found" {
			t.Fatalf("%s: %d %v, want 404 execution_not_found", what, r.status, r.body)
		}
	}
	notFound("GET execution", api(t, "GET", base+"/api/executions/"+execID, carolToken, ""))
	notFound("GET via session route", api(t, "GET", base+"/api/mcp-sessions/"+sid+"/executions/"+execID, carolToken, ""))
	notFound("decide", api(t, "POST", base+"/api/executions/"+execID+"/resume", carolToken, `{"action":"accept"}`))
	notFound("decide via session route", api(t, "POST", base+"/api/mcp-sessions/"+sid+"/executions/"+execID+"/resume", carolToken, `{"action":"decline"}`))
	// ... and an id that never existed looks exactly the same.
	notFound("unknown id", api(t, "GET", base+"/api/executions/exec_00000000000000000000000000000000", carolToken, ""))
	if r := api(t, "GET", base+"/api/executions", carolToken, ""); r.status != 200 || len(r.body["executions"].([]any)) != 0 {
		t.Fatalf("carol's list: %d %v", r.status, r.body)
	}

	// gRPC ApprovalService: NotFound, never PermissionDenied.
	client := approvalClient(t, info.GRPCAddr)
	if _, err := client.GetPausedExecution(withToken(t, carolToken), &pb.GetPausedExecutionRequest{ExecutionId: execID}); status.Code(err) != codes.NotFound {
		t.Fatalf("gRPC get: %v", err)
	}
	if _, err := client.DecideExecution(withToken(t, carolToken), &pb.DecideExecutionRequest{ExecutionId: execID, Action: "accept"}); status.Code(err) != codes.NotFound {
		t.Fatalf("gRPC decide: %v", err)
	}
	if l, err := client.ListPausedExecutions(withToken(t, carolToken), &pb.ListPausedExecutionsRequest{}); err != nil || len(l.GetExecutions()) != 0 {
		t.Fatalf("gRPC list: %v %v", l, err)
	}

	// The approval page: a signed-in carol sees "not found".
	jar, _ := cookiejar.New(nil)
	page := &http.Client{Jar: jar}
	resp, err := page.Get(base + "/approve/" + execID + "?token=" + carolToken)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 404 || strings.Contains(string(b), "createTodo") {
		t.Fatalf("page for carol: %d, shows the tool: %v", resp.StatusCode, strings.Contains(string(b), "createTodo"))
	}

	// A resume from carol's own session: execution_forbidden is only for
	// the same organization; another organization gets not found.
	carol := connectMode(t, info.HTTPAddr, carolToken, "")
	res, sc := callTool(t, carol, "resume", map[string]any{"executionId": execID, "action": "accept"})
	if !res.IsError || sc["status"] != "execution_not_found" {
		t.Fatalf("carol's resume: %s %v, want execution_not_found (an id of another organization is unknown)", mcpclient.Text(res), sc)
	}

	// Nothing was decided: alice can still approve, once, and the to-do is
	// created exactly once.
	if r := api(t, "POST", base+"/api/executions/"+execID+"/resume", aliceToken, `{"action":"accept"}`); r.status != 200 {
		t.Fatalf("alice's decision after the attempts: %d %v", r.status, r.body)
	}
	if res, _ := callTool(t, alice, "resume", map[string]any{"executionId": execID}); res.IsError {
		t.Fatalf("alice's resume: %s", mcpclient.Text(res))
	}
	if n := len(todos(t, info.HTTPAddr, aliceToken)); n != 1 {
		t.Fatalf("%d to-dos, want exactly 1", n)
	}
}

// TestSessionlessResumeCannotCrossPrincipals: 2026-07-28 requests of every
// principal share the node's continuation grains. carol (globex) and bob
// (acme, another user) know the execution id of alice's sessionless pause
// and send resume, with and without a decision, to every continuation
// grain of the node (the gateway spreads fresh requests round-robin over
// its 64): none decides, waits on or replays alice's execution, each gets
// exactly what an unknown id gets, and the requestState they would need
// does not even show the id. alice's retry then completes it once, and
// afterwards no one else gets its settled result either.
func TestSessionlessResumeCannotCrossPrincipals(t *testing.T) {
	info := startCodeNode(t, nil)
	alice := mrtrClient(t, info.HTTPAddr, aliceToken)
	args := map[string]any{"code": createCode}
	first, err := alice.CallTool(t.Context(), &mcp.CallToolParams{Name: "execute", Arguments: args})
	if err != nil || !first.NeedsInput() {
		t.Fatalf("alice's execute did not pause: %+v %v", first, err)
	}
	claims, err := requeststate.Verify(testStateKey, first.RequestState, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	execID := claims.Inner
	if !strings.HasPrefix(execID, "exec_") || strings.Contains(first.RequestState, execID) {
		t.Fatalf("requestState %q: execution id %q readable or missing", first.RequestState, execID)
	}

	intruders := map[string]*mcp.ClientSession{
		"carol (another organization)": connect(t, info.HTTPAddr, carolToken, "", nil),
		"bob (alice's organization)":   connect(t, info.HTTPAddr, bobToken, "", nil),
	}
	unknown := "exec_" + strings.Repeat("0", 32)
	tryAll := func(when string) {
		t.Helper()
		for name, cs := range intruders {
			for _, id := range []string{execID, unknown} {
				for _, action := range []string{"accept", ""} {
					resumeArgs := map[string]any{"executionId": id}
					if action != "" {
						resumeArgs["action"] = action
					}
					// 64 requests in a row reach every continuation grain once.
					for range 64 {
						res, sc := callTool(t, cs, "resume", resumeArgs)
						if !res.IsError || sc["status"] != "execution_not_found" || strings.Contains(mcpclient.Text(res), "ship it") {
							t.Fatalf("%s: %s resume %v: %s %v, want execution_not_found", when, name, resumeArgs, mcpclient.Text(res), sc)
						}
					}
				}
			}
		}
	}
	tryAll("while paused")
	if n := len(todos(t, info.HTTPAddr, aliceToken)); n != 0 {
		t.Fatalf("an intruder's resume ran alice's call: %d to-dos", n)
	}

	done, err := alice.CallTool(t.Context(), &mcp.CallToolParams{Name: "execute", Arguments: args, RequestState: first.RequestState,
		InputResponses: mcp.InputResponseMap{"approval": &mcp.ElicitResult{Action: "accept", Content: map[string]any{}}}})
	if err != nil || done.IsError || !strings.Contains(mcpclient.Text(done), "ship it") {
		t.Fatalf("alice's retry: %+v %v", done, err)
	}
	tryAll("after it settled")
	if n := len(todos(t, info.HTTPAddr, aliceToken)); n != 1 {
		t.Fatalf("%d to-dos, want exactly 1", n)
	}
}

// TestGuessedSessionIDsAllLookAlike: random and crafted session ids all
// get the same 404, whoever asks; a guess never creates a session, nor
// writes anything to the store.
func TestGuessedSessionIDsAllLookAlike(t *testing.T) {
	dbPath := filepath.Join(t.TempDir(), "guess.db")
	info := startCodeNode(t, func(c *app.Config) { c.Store = "sqlite:" + dbPath })
	real := connectMode(t, info.HTTPAddr, aliceToken, "")
	guesses := []string{real.ID() + "x", strings.ToLower(real.ID()), "../" + real.ID(), "AAAAAAAAAAAAAAAAAAAAAAAAAA", "%00", "s:" + real.ID()}
	for range 50 {
		guesses = append(guesses, rand.Text())
	}
	for _, g := range guesses {
		for _, tok := range []string{aliceToken, carolToken} {
			r := raw(t, "POST", info.HTTPAddr, map[string]string{"Authorization": "Bearer " + tok, "Content-Type": "application/json",
				"Accept": "application/json, text/event-stream", "Mcp-Session-Id": g, "Mcp-Protocol-Version": "2025-11-25"},
				`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
			if r.status != 404 || rpcCode(t, r.body) != -32001 {
				t.Fatalf("guess %q: %d %s, want 404 -32001", g, r.status, r.body)
			}
		}
	}
	// The real session still works, and no guess became a session.
	if _, err := real.ListTools(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	if v := scrapeMetrics(t, info.HTTPAddr).value("mcpgrain_session_activations_total", nil); v != 1 {
		t.Fatalf("%v session runtimes built, want 1 (guesses built runtimes)", v)
	}
	st, err := store.Open(t.Context(), "sqlite:"+dbPath)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Load(t.Context(), grain.Key(session.KindName, real.ID())); err != nil {
		t.Fatalf("the real session's row: %v", err)
	}
	for _, g := range guesses {
		if o, err := st.Load(t.Context(), grain.Key(session.KindName, g)); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("guess %q left a row in the store: %+v %v", g, o, err)
		}
	}
}

// TestSlowAndMalformedRequestsGetDefinedAnswers: a body trickled slower
// than --body-timeout is cut with 408; malformed JSON-RPC (broken JSON,
// empty and junk batches, wrong types) gets a 4xx JSON-RPC error; none of
// it disturbs the session.
func TestSlowAndMalformedRequestsGetDefinedAnswers(t *testing.T) {
	info := startCodeNode(t, func(c *app.Config) { c.MCP.BodyTimeout = 500 * time.Millisecond })
	cs := connectMode(t, info.HTTPAddr, aliceToken, "")
	sid := cs.ID()

	// Slow loris: headers promise 100 bytes, 10 arrive, then nothing.
	conn, err := net.Dial("tcp", info.HTTPAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	began := time.Now()
	fmt.Fprintf(conn, "POST /mcp HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMcp-Session-Id: %s\r\nMcp-Protocol-Version: 2025-11-25\r\nContent-Length: 100\r\n\r\n{\"jsonrpc\"", info.HTTPAddr, aliceToken, sid)
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("slow body: no answer: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestTimeout {
		t.Fatalf("slow body: %d, want 408", resp.StatusCode)
	}
	if took := time.Since(began); took > 5*time.Second {
		t.Fatalf("slow body held for %s", took)
	}

	headers := map[string]string{"Authorization": "Bearer " + aliceToken, "Content-Type": "application/json",
		"Accept": "application/json, text/event-stream", "Mcp-Session-Id": sid, "Mcp-Protocol-Version": "2025-11-25"}
	for _, body := range []string{
		`{`, `[`, `[]`, `[1,2,3]`, `[{"jsonrpc":"2.0"}]`, `null`, `"tools/list"`, `{"jsonrpc":"2.0","id":{},"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":1,"method":7}`, `{"jsonrpc":"1.0","id":1,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":"x"}`,
		strings.Repeat(`[`, 100000),
	} {
		r := raw(t, "POST", info.HTTPAddr, headers, body)
		if r.status < 400 || r.status >= 500 {
			// A JSON-RPC error inside a 200 SSE/JSON answer is also a defined
			// answer for method-level errors; a 5xx never is.
			if r.status == 200 && strings.Contains(string(r.body), `"error"`) {
				continue
			}
			t.Fatalf("body %.40q: %d %s", body, r.status, r.body)
		}
	}
	if _, err := cs.ListTools(t.Context(), nil); err != nil {
		t.Fatalf("session after malformed requests: %v", err)
	}
}

// TestHostileCodeIsContained: code sent to execute cannot reach files,
// the network or the host process except through tools; an endless loop
// is interrupted at the wall-time limit; a huge output ends with a limit
// error naming that limit (structured content: limit wall_time, output;
// the memory bomb has TestMemoryBombIsStoppedByTheHeapLimit); the session
// serves the next call normally.
func TestHostileCodeIsContained(t *testing.T) {
	info := startCodeNode(t, func(c *app.Config) {
		c.MCP.Code.Limits.WallTime = 5 * time.Second // the huge values below must hit their limit first, even under -race
		c.MCP.Code.Limits.MaxOutput = 1 << 20
		c.MCP.Code.Limits.MaxHeapGrowth = 256 << 20
	})
	cs := connectMode(t, info.HTTPAddr, aliceToken, "")
	for _, tc := range []struct{ name, code, want, limit string }{
		{"require", `return require("fs").readFileSync("/etc/passwd", "utf8")`, "require", ""},
		{"process", `return process.env`, "process", ""},
		{"fetch", `return await fetch("http://127.0.0.1:1/")`, "fetch", ""},
		{"dynamic import", `const m = await import("node:fs"); return m`, "", ""},
		{"XMLHttpRequest", `return new XMLHttpRequest()`, "XMLHttpRequest", ""},
		{"Function constructor to global", `const g = (function(){}).constructor("return this")(); return typeof g.process + typeof g.require + typeof g.fetch`, "undefinedundefinedundefined", ""},
		{"endless loop", `while (true) {}`, "time", "wall_time"},
		{"huge output", `const s = "x".repeat(1 << 16); for (let i = 0; i < 100; i++) console.log(s); return 1`, "limit", "output"},
		{"huge result", `return "x".repeat(2 << 20)`, "limit", "output"},
		{"tool outside the registry", `return await tools.fs.readFile({path: "/etc/passwd"})`, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			began := time.Now()
			res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "execute", Arguments: map[string]any{"code": tc.code}})
			if err != nil {
				t.Fatalf("transport error (the session must answer): %v", err)
			}
			text := mcpclient.Text(res)
			if strings.Contains(text, "root:x:0:0") {
				t.Fatalf("read a host file: %s", text)
			}
			if tc.want == "undefinedundefinedundefined" {
				if !strings.Contains(text, tc.want) {
					t.Fatalf("the global object exposes host APIs: %s", text)
				}
				return
			}
			if !res.IsError {
				t.Fatalf("hostile code succeeded: %.300s", text)
			}
			if tc.want != "" && !strings.Contains(strings.ToLower(text), strings.ToLower(tc.want)) {
				t.Fatalf("error %.300q does not mention %q", text, tc.want)
			}
			if sc := structured(t, res); tc.limit != "" && sc["limit"] != tc.limit {
				t.Fatalf("stopped by the %v limit (errorKind %v), want %s: %.300s", sc["limit"], sc["errorKind"], tc.limit, text)
			}
			if took := time.Since(began); took > 20*time.Second {
				t.Fatalf("took %s", took)
			}
		})
	}
	// The session is unharmed.
	res, sc := callTool(t, cs, "execute", map[string]any{"code": `return 6 * 7`})
	if res.IsError || sc["result"] != float64(42) {
		t.Fatalf("after the hostile code: %s %v", mcpclient.Text(res), sc)
	}
}

// A memory bomb is stopped by the heap limit, on a node whose wall time it
// cannot reach (near its limit the worker's GC runs hard, and on two
// loaded cores reaching 256 MiB took more than the 5 s wall time of
// TestHostileCodeIsContained: the wall time stood in, which this test now
// tells apart). It needs a few seconds of CPU (6.4 s of wall time on a
// quiet machine), and past a second of CPU its worker lowers its priority,
// so beside four busy loops on two cores it did not end within the minute
// that the wall time and the call's deadline allowed: both are minutes
// beyond that, and the wall time and its workers' CPU time are logged. A
// test of its own, not a subtest: its node must not start while another
// in-process node serves (protoactor's remote start writes gRPC's global
// logger, which a serving node's gRPC goroutines read).
func TestMemoryBombIsStoppedByTheHeapLimit(t *testing.T) {
	const wall = 5 * time.Minute
	info := startCodeNode(t, func(c *app.Config) {
		c.MCP.Code.Limits.WallTime = wall
		c.MCP.Code.Limits.MaxHeapGrowth = 256 << 20
	})
	cs := connectMode(t, info.HTTPAddr, aliceToken, "")
	began, cpu := time.Now(), childrenCPU(t)
	res, sc := callToolWithin(t, cs, "execute", map[string]any{"code": `const a = []; while (true) a.push(new Array(1 << 16).fill(1.5));`}, wall+time.Minute)
	if !res.IsError || sc["errorKind"] != "limit" || sc["limit"] != "heap" {
		t.Fatalf("memory bomb: errorKind %v limit %v, want the heap limit: %.300s", sc["errorKind"], sc["limit"], mcpclient.Text(res))
	}
	// The bomb's worker was reaped before the call returned.
	t.Logf("stopped by the heap limit after %s (CPU of the workers reaped meanwhile %s)",
		time.Since(began).Round(time.Millisecond), (childrenCPU(t) - cpu).Round(time.Millisecond))
	res, sc = callTool(t, cs, "execute", map[string]any{"code": `return 6 * 7`})
	if res.IsError || sc["result"] != float64(42) {
		t.Fatalf("after the memory bomb: %s %v", mcpclient.Text(res), sc)
	}
}

// FuzzApprovalRoutes sends hostile paths, bodies and content types to the
// approval API and page as another organization: never a 5xx, API errors
// are JSON, and alice's paused execution stays pending (nothing decided).
func FuzzApprovalRoutes(f *testing.F) {
	for _, s := range []struct {
		post        bool
		path, ctype string
		body        string
	}{
		{true, "/api/executions/%s/resume", "application/json", `{"action":"accept"}`},
		{true, "/api/executions/%s/resume", "application/json", `{"action":"accept","content":{"reason":"` + strings.Repeat("x", 100) + `"}}`},
		{true, "/api/mcp-sessions/x/executions/%s/resume", "application/json; charset=utf-8", `{"action":"decline"}`},
		{false, "/api/executions/%s", "", ""},
		{false, "/api/executions/..%%2f..%%2fetc", "", ""},
		{true, "/approve/%s", "application/x-www-form-urlencoded", "action=accept&csrf=forged"},
		{true, "/approve/%s/login", "application/x-www-form-urlencoded", "token=" + aliceToken},
		{true, "/api/executions/%s/resume", "text/plain", `{"action":"accept"}`},
		{true, "/api/executions/%s/resume", "application/json", `[`},
	} {
		f.Add(s.post, s.path, s.ctype, []byte(s.body))
	}
	info := startCodeNode(f, nil)
	alice := connectMode(f, info.HTTPAddr, aliceToken, "")
	execID := pause(f, alice, "waiting_for_interaction")
	base := "http://" + info.HTTPAddr
	f.Fuzz(func(t *testing.T, post bool, path, ctype string, body []byte) {
		if strings.Count(path, "%s") == 1 {
			path = fmt.Sprintf(path, execID)
		}
		if !strings.HasPrefix(path, "/") || strings.ContainsAny(path, " \r\n\t#?") {
			t.Skip()
		}
		method := http.MethodGet
		if post {
			method = http.MethodPost
		}
		req, err := http.NewRequest(method, base+path, strings.NewReader(string(body)))
		if err != nil {
			t.Skip()
		}
		req.Header.Set("Authorization", "Bearer "+carolToken)
		if ctype != "" {
			req.Header.Set("Content-Type", ctype)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil && strings.Contains(err.Error(), "invalid header") {
			t.Skip() // the client refuses to send it
		}
		if err != nil {
			t.Fatalf("%s %s: no answer: %v", method, path, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode >= 500 {
			t.Fatalf("%s %s (%s) %q: %d %s", method, path, ctype, body, resp.StatusCode, b)
		}
		if strings.HasPrefix(path, "/api/") && resp.StatusCode >= 400 && resp.StatusCode != 404 && resp.StatusCode != 405 && !strings.HasPrefix(string(b), "{") {
			t.Fatalf("%s %s: %d error is not JSON: %q", method, path, resp.StatusCode, b)
		}
		if r := api(t, "GET", base+"/api/executions/"+execID, aliceToken, ""); r.status != 200 {
			t.Fatalf("after %s %s (%s) %q: alice's pause is gone: %d %v", method, path, ctype, body, r.status, r.body)
		}
	})
}

// childrenCPU returns the CPU time of this process's reaped children
// (sandbox workers among them).
func childrenCPU(t testing.TB) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru); err != nil {
		t.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
