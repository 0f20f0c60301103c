package systemtest

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/internal/app"
	"github.com/mcpgrain/mcpgrain/internal/mcpclient"
)

// Code mode runs code that only reads: the execution completes at once,
// with its result, logs and emitted values, and nothing asks for approval.
func TestExecuteReadCompletesWithoutApproval(t *testing.T) {
	info := startCodeNode(t, nil)
	cs := connectMode(t, info.HTTPAddr, aliceToken, "")
	res, sc := callTool(t, cs, "execute", map[string]any{"code": `
		const all = await tools.demo.listTodos({});
		console.log("listed", all.length);
		emit({seen: all.length});
		return {count: all.length};`})
	if res.IsError || sc["status"] != "completed" {
		t.Fatalf("execute: %s / %v", mcpclient.Text(res), sc)
	}
	if r, _ := sc["result"].(map[string]any); r["count"] != float64(0) {
		t.Fatalf("result %v", sc["result"])
	}
	if logs, _ := sc["logs"].([]any); len(logs) != 1 || logs[0] != "listed 0" {
		t.Fatalf("logs %v", sc["logs"])
	}

	// Discovery and errors come back as results, not protocol errors.
	res, sc = callTool(t, cs, "execute", map[string]any{"code": `return (await tools.search({query: "create todo"}))[0].path`})
	if res.IsError || sc["result"] != "demo.createTodo" {
		t.Fatalf("search: %s", mcpclient.Text(res))
	}
	res, _ = callTool(t, cs, "execute", map[string]any{"code": `let x = ;`})
	if !res.IsError || !strings.Contains(mcpclient.Text(res), "1:") {
		t.Fatalf("syntax error: %s", mcpclient.Text(res))
	}
	res, _ = callTool(t, cs, "execute", map[string]any{"code": `await tools.demo.getTodo({id: "nope"})`})
	if !res.IsError || !strings.Contains(mcpclient.Text(res), "404") {
		t.Fatalf("404 from the API: %s", mcpclient.Text(res))
	}
	if n := len(todos(t, info.HTTPAddr, aliceToken)); n != 0 {
		t.Fatalf("reads changed the API: %d todos", n)
	}
}

// Code that writes pauses before the write; the owner's organization sees
// the pause over the HTTP API (other organizations do not), approves it
// there, and the write runs once.
func TestWritePausesAndHTTPRouteApprovalCompletesIt(t *testing.T) {
	info := startCodeNode(t, nil)
	base := "http://" + info.HTTPAddr
	cs := connectMode(t, info.HTTPAddr, aliceToken, "")
	id := pause(t, cs, "waiting_for_interaction")
	sid := cs.ID()
	if n := len(todos(t, info.HTTPAddr, aliceToken)); n != 0 {
		t.Fatalf("paused call ran: %d todos", n)
	}

	// Anyone of the owner's org sees it; other orgs and strangers do not.
	url := fmt.Sprintf("%s/api/mcp-sessions/%s/executions/%s", base, sid, id)
	got := api(t, "GET", url, bobToken, "")
	ex, _ := got.body["execution"].(map[string]any)
	if got.status != 200 || ex["tool"] != "demo.createTodo" || ex["sessionId"] != sid {
		t.Fatalf("GET: %d %v", got.status, got.body)
	}
	if args, _ := ex["arguments"].(map[string]any); args["title"] != "ship it" {
		t.Fatalf("arguments %v", ex["arguments"])
	}
	if r := api(t, "GET", url, carolToken, ""); r.status != 404 || r.body["error"] != "execution_not_found" {
		t.Fatalf("other org: %d %v", r.status, r.body)
	}
	if r := api(t, "GET", url, "", ""); r.status != 401 {
		t.Fatalf("no token: %d", r.status)
	}
	if r := api(t, "GET", fmt.Sprintf("%s/api/mcp-sessions/%s/executions/%s", base, "other-session", id), aliceToken, ""); r.status != 404 {
		t.Fatalf("wrong session: %d", r.status)
	}
	if r := api(t, "GET", base+"/api/executions", aliceToken, ""); r.status != 200 || len(r.body["executions"].([]any)) != 1 {
		t.Fatalf("list: %d %v", r.status, r.body)
	}

	// Bad decisions are refused and lose nothing.
	for _, body := range []string{`{"action":"maybe"}`, `not json`, `{"action":"accept","content":"x"}`} {
		if r := api(t, "POST", url+"/resume", bobToken, body); r.status != 400 {
			t.Fatalf("POST %s: %d %v", body, r.status, r.body)
		}
	}
	if r := api(t, "POST", url+"/resume", carolToken, `{"action":"accept"}`); r.status != 404 {
		t.Fatalf("other org decided: %d", r.status)
	}

	r := api(t, "POST", url+"/resume", bobToken, `{"action":"accept"}`)
	if r.status != 200 || r.body["status"] != "accepted" || r.body["text"] != "I've accepted it" {
		t.Fatalf("accept: %d %v", r.status, r.body)
	}
	if r := api(t, "POST", url+"/resume", aliceToken, `{"action":"decline"}`); r.status != 409 || r.body["error"] != "execution_already_decided" {
		t.Fatalf("second decision: %d %v", r.status, r.body)
	}

	// The model's resume returns the completed execution; the side effect
	// happened once.
	res, sc := callTool(t, cs, "resume", map[string]any{"executionId": id, "action": "accept"})
	if res.IsError || sc["status"] != "completed" {
		t.Fatalf("resume: %s", mcpclient.Text(res))
	}
	if r, _ := sc["result"].(map[string]any); r["title"] != "ship it" {
		t.Fatalf("result %v", sc["result"])
	}
	if got := todos(t, info.HTTPAddr, aliceToken); len(got) != 1 || got[0]["title"] != "ship it" {
		t.Fatalf("todos %v", got)
	}
	// Resuming again replays the same result.
	res2, sc2 := callTool(t, cs, "resume", map[string]any{"executionId": id, "action": "accept"})
	if res2.IsError || fmt.Sprint(sc2["result"]) != fmt.Sprint(sc["result"]) {
		t.Fatalf("replay: %s", mcpclient.Text(res2))
	}
	if n := len(todos(t, info.HTTPAddr, aliceToken)); n != 1 {
		t.Fatalf("replay ran the call again: %d todos", n)
	}
	// Settled executions leave the listing; looking one up says so.
	if r := api(t, "GET", url, aliceToken, ""); r.status != 409 {
		t.Fatalf("settled execution: %d", r.status)
	}
	if r := api(t, "GET", base+"/api/executions", aliceToken, ""); len(r.body["executions"].([]any)) != 0 {
		t.Fatalf("settled execution still listed: %v", r.body)
	}
}

// The model declines a paused write through the resume tool: the execution
// fails with the decline, the write never runs, and a later resume answers
// the same outcome.
func TestModelDeclineFailsWithoutSideEffect(t *testing.T) {
	info := startCodeNode(t, nil)
	cs := connectMode(t, info.HTTPAddr, aliceToken, "")
	id := pause(t, cs, "waiting_for_interaction")
	res, sc := callTool(t, cs, "resume", map[string]any{"executionId": id, "action": "decline", "content": `{"reason":"not now"}`})
	if !res.IsError || sc["status"] != "error" || !strings.Contains(mcpclient.Text(res), "decline") {
		t.Fatalf("decline: %s / %v", mcpclient.Text(res), sc)
	}
	if n := len(todos(t, info.HTTPAddr, aliceToken)); n != 0 {
		t.Fatalf("declined call ran: %d todos", n)
	}
	// A later resume of the settled execution replays the declined result.
	res, _ = callTool(t, cs, "resume", map[string]any{"executionId": id, "action": "accept"})
	if !res.IsError {
		t.Fatalf("resume after decline: %s", mcpclient.Text(res))
	}
	if n := len(todos(t, info.HTTPAddr, aliceToken)); n != 0 {
		t.Fatalf("accept after decline ran the call: %d todos", n)
	}
}

// Code that catches a declined write goes on: the resume answers the code's
// own result for the decline.
func TestCodeCatchesDeclineAndGoesOn(t *testing.T) {
	info := startCodeNode(t, nil)
	cs := connectMode(t, info.HTTPAddr, aliceToken, "")
	res, sc := callTool(t, cs, "execute", map[string]any{"code": `
		try { await tools.demo.createTodo({title: "x"}); return "created"; }
		catch (e) { return "declined: " + e.message; }`})
	id, _ := sc["executionId"].(string)
	if sc["status"] != "waiting_for_interaction" {
		t.Fatalf("execute: %s", mcpclient.Text(res))
	}
	res, sc = callTool(t, cs, "resume", map[string]any{"executionId": id, "action": "decline"})
	if res.IsError || !strings.HasPrefix(fmt.Sprint(sc["result"]), "declined: ") {
		t.Fatalf("resume: %s / %v", mcpclient.Text(res), sc)
	}
}

// A browser-mode client gets an approval URL for a paused write; its resume
// waits until someone decides over HTTP, then answers the outcome.
func TestBrowserModeResumeWaitsForTheHTTPDecision(t *testing.T) {
	info := startCodeNode(t, nil)
	cs := connectMode(t, info.HTTPAddr, aliceToken, "browser")
	res, sc := callTool(t, cs, "execute", map[string]any{"code": createCode})
	if sc["status"] != "user_approval_required" {
		t.Fatalf("execute: %s", mcpclient.Text(res))
	}
	id := sc["executionId"].(string)
	wantURL := "http://" + info.HTTPAddr + "/approve/" + id
	if sc["approvalUrl"] != wantURL || !strings.Contains(mcpclient.Text(res), wantURL) {
		t.Fatalf("approvalUrl %v, want %s", sc["approvalUrl"], wantURL)
	}
	done := make(chan map[string]any, 1)
	go func() {
		_, sc := callTool(t, cs, "resume", map[string]any{"executionId": id})
		done <- sc
	}()
	// No waiting: the pause is in the directory before execute answers.
	if r := api(t, "POST", "http://"+info.HTTPAddr+"/api/executions/"+id+"/resume", aliceToken, `{"action":"accept"}`); r.status != 200 {
		t.Fatalf("accept: %d %v", r.status, r.body)
	}
	select {
	case sc := <-done:
		if sc["status"] != "completed" {
			t.Fatalf("resume: %v", sc)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the waiting resume did not wake")
	}
	if n := len(todos(t, info.HTTPAddr, aliceToken)); n != 1 {
		t.Fatalf("todos %d", n)
	}
}

// Nobody decides a paused write: when its approval window ends, the
// approval reminder declines it, the execution settles and the write never
// runs.
func TestApprovalWindowEndsInAutoDecline(t *testing.T) {
	info := startCodeNode(t, func(c *app.Config) {
		c.MCP.Code.Window = 1500 * time.Millisecond
		c.ReminderPoll = 50 * time.Millisecond
	})
	cs := connectMode(t, info.HTTPAddr, aliceToken, "")
	id := pause(t, cs, "waiting_for_interaction")
	url := "http://" + info.HTTPAddr + "/api/executions/" + id
	if r := api(t, "GET", url, aliceToken, ""); r.status != 200 {
		t.Fatalf("GET: %d", r.status)
	}
	// Nobody decides: at the deadline the approval reminder declines it
	// and the execution settles.
	deadline := time.Now().Add(20 * time.Second)
	for api(t, "GET", url, aliceToken, "").status != 409 {
		if time.Now().After(deadline) {
			t.Fatal("the pause outlived its window")
		}
		time.Sleep(50 * time.Millisecond)
	}
	res, sc := callTool(t, cs, "resume", map[string]any{"executionId": id, "action": "accept"})
	if !res.IsError || !strings.Contains(mcpclient.Text(res), "approval_timeout") && sc["status"] != "execution_already_settled" {
		t.Fatalf("resume after the window: %s / %v", mcpclient.Text(res), sc)
	}
	if n := len(todos(t, info.HTTPAddr, aliceToken)); n != 0 {
		t.Fatalf("timed-out call ran: %d todos", n)
	}
}

// A 2026-07-28 client gets the pause as an MRTR input request; the SDK
// asks its elicitation handler and retries with the sealed requestState,
// which resumes the execution in the continuation grain.
func TestSessionlessPauseIsAnInputRequestAndTheRetryResumesIt(t *testing.T) {
	info := startCodeNode(t, nil)
	for _, tc := range []struct {
		action string
		todos  int
	}{{"decline", 0}, {"accept", 1}} {
		var asked string
		cs := connect(t, info.HTTPAddr, aliceToken, "", &mcp.ClientOptions{
			ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				asked = req.Params.Message
				return &mcp.ElicitResult{Action: tc.action, Content: map[string]any{}}, nil
			},
		})
		if cs.ID() != "" {
			t.Fatalf("sessionless client got a session %q", cs.ID())
		}
		res, sc := callTool(t, cs, "execute", map[string]any{"code": createCode})
		if !strings.Contains(asked, "demo.createTodo") {
			t.Fatalf("%s: the client was asked %q", tc.action, asked)
		}
		if tc.action == "accept" && (res.IsError || sc["status"] != "completed") {
			t.Fatalf("accepted: %s", mcpclient.Text(res))
		}
		if tc.action == "decline" && (!res.IsError || !strings.Contains(mcpclient.Text(res), "decline")) {
			t.Fatalf("declined: %s", mcpclient.Text(res))
		}
		if n := len(todos(t, info.HTTPAddr, aliceToken)); n != tc.todos {
			t.Fatalf("%s: %d todos, want %d", tc.action, n, tc.todos)
		}
	}
	// A retry whose requestState was tampered with is refused.
	raw := mrtrClient(t, info.HTTPAddr, aliceToken)
	first, err := raw.CallTool(t.Context(), &mcp.CallToolParams{Name: "execute", Arguments: map[string]any{"code": createCode}})
	if err != nil || !first.NeedsInput() {
		t.Fatalf("first call: %+v %v", first, err)
	}
	_, err = raw.CallTool(t.Context(), &mcp.CallToolParams{Name: "execute", Arguments: map[string]any{"code": createCode},
		InputResponses: mcp.InputResponseMap{"approval": &mcp.ElicitResult{Action: "accept"}}, RequestState: first.RequestState + "x"})
	if err == nil || !strings.Contains(err.Error(), "invalid requestState") {
		t.Fatalf("tampered retry: %v", err)
	}
	if n := len(todos(t, info.HTTPAddr, aliceToken)); n != 1 {
		t.Fatalf("tampered retry ran the call: %d todos", n)
	}
}

// A client sends the approval API malformed, oversized and mistyped
// decisions: each is refused with a defined status and the pause is still
// there to decide.
func TestApprovalAPIRejectsBadInputAndLosesNothing(t *testing.T) {
	info := startCodeNode(t, nil)
	cs := connectMode(t, info.HTTPAddr, aliceToken, "")
	id := pause(t, cs, "waiting_for_interaction")
	url := "http://" + info.HTTPAddr + "/api/executions/" + id + "/resume"
	do := func(contentType, body string) int {
		req, _ := http.NewRequest("POST", url, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+aliceToken)
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, tc := range []struct {
		name, contentType, body string
		want                    int
	}{
		{"form body", "application/x-www-form-urlencoded", "action=accept", 415},
		{"no content type", "", `{"action":"accept"}`, 415},
		{"oversized", "application/json", `{"action":"accept","content":{"x":"` + strings.Repeat("a", 80<<10) + `"}}`, 413},
		{"array", "application/json", `[1,2]`, 400},
		{"unknown action", "application/json", `{"action":"approve"}`, 400},
	} {
		if got := do(tc.contentType, tc.body); got != tc.want {
			t.Fatalf("%s: %d, want %d", tc.name, got, tc.want)
		}
	}
	for _, bad := range []string{"exec_%00", strings.Repeat("x", 200), "nope"} {
		if r := api(t, "GET", "http://"+info.HTTPAddr+"/api/executions/"+bad, aliceToken, ""); r.status != 404 {
			t.Fatalf("GET %q: %d", bad, r.status)
		}
	}
	if r := api(t, "GET", "http://"+info.HTTPAddr+"/api/executions", "mcpg_not_a_known_token_000", ""); r.status != 401 || r.body["error"] != "invalid_token" {
		t.Fatalf("unknown token: %d %v", r.status, r.body)
	}
	// Nothing was decided: the pause is still there and a valid decision works.
	if got := do("application/json; charset=utf-8", `{"action":"accept"}`); got != 200 {
		t.Fatalf("valid decision after bad ones: %d", got)
	}
}

// A session whose client left while a browser-mode resume waited for the
// decision (mcpgrain try, stopped with Ctrl-C) ends at once when it is
// deleted: closing go-sdk's session waits for its handlers, and the
// waiting resume used to be woken only by a decision, so the DELETE — and a
// node's graceful stop, which disposes the same way — hung until the
// approval window ended.
func TestDeletingASessionWithAWaitingResumeEndsAtOnce(t *testing.T) {
	info := startCodeNode(t, nil)
	cs := connectMode(t, info.HTTPAddr, aliceToken, "browser")
	_, sc := callTool(t, cs, "execute", map[string]any{"code": createCode})
	id, _ := sc["executionId"].(string)
	if sc["status"] != "user_approval_required" {
		t.Fatalf("execute: %v", sc)
	}
	headers := map[string]string{"Authorization": "Bearer " + aliceToken, "Mcp-Session-Id": cs.ID(),
		"Mcp-Protocol-Version": cs.InitializeResult().ProtocolVersion, "Accept": "application/json, text/event-stream",
		"Content-Type": "application/json"}
	ctx, leave := context.WithCancel(t.Context())
	req, _ := http.NewRequestWithContext(ctx, "POST", "http://"+info.HTTPAddr+"/mcp",
		strings.NewReader(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"resume","arguments":{"executionId":"`+id+`"}}}`))
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	waiting, err := http.DefaultClient.Do(req) // answers its headers once the handler runs; the body waits
	if err != nil {
		t.Fatal(err)
	}
	leave() // the client goes away; the resume goes on waiting in the session
	_ = waiting.Body.Close()
	del := make(chan rawResponse, 1)
	go func() {
		delete(headers, "Content-Type")
		del <- raw(t, "DELETE", info.HTTPAddr, headers, "")
	}()
	select {
	case r := <-del:
		if r.status != http.StatusNoContent && r.status != http.StatusOK {
			t.Fatalf("DELETE while a resume waits: %d %s", r.status, r.body)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("DELETE of a session with a waiting resume did not end within 20 s")
	}
}
