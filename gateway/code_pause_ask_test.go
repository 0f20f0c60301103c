package gateway_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	sdkapp "github.com/mcpgrain/mcpgrain/actors/app"
	"github.com/mcpgrain/mcpgrain/actors/toolpacks"
	"github.com/mcpgrain/mcpgrain/internal/app"
	"github.com/mcpgrain/mcpgrain/internal/mcpclient"
	"github.com/mcpgrain/mcpgrain/internal/testcluster"
)

// Code-mode pauses read and decided by a user's tools (docs/sdk.md §6,
// "One pause path", steps 2–3): the SDK's AskStatus, AwaitAsk and
// DecideAsk take a code-mode execution id.

// codeAskPack is a user's pack whose tools read and decide a pause by id:
// ask_status (AskStatus), ask_await (AwaitAsk) and ask_decide (DecideAsk,
// accept or decline, with input if told). Each answers "state accepted
// by reason", or the error's text (a tool error).
func codeAskPack() toolpacks.Pack {
	type idArgs struct {
		ID string `json:"id"`
	}
	type decideArgs struct {
		ID     string         `json:"id"`
		Accept bool           `json:"accept"`
		Input  map[string]any `json:"input,omitempty"`
	}
	answer := func(st sdkapp.PendingStatus, err error) (*mcp.CallToolResult, any, error) {
		if err != nil {
			return nil, nil, err
		}
		text := fmt.Sprintf("%s %v %s %s", st.State, st.Decision.Accepted, st.Decision.By, st.Decision.Reason)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.TrimSpace(text)}}}, nil, nil
	}
	return toolpacks.NewPack("codeask", func(s *mcp.Server) {
		mcp.AddTool(s, &mcp.Tool{Name: "ask_status"}, func(ctx context.Context, _ *mcp.CallToolRequest, a idArgs) (*mcp.CallToolResult, any, error) {
			l, err := sdkapp.LaterOf(ctx)
			if err != nil {
				return nil, nil, err
			}
			return answer(l.AskStatus(ctx, a.ID))
		})
		mcp.AddTool(s, &mcp.Tool{Name: "ask_await"}, func(ctx context.Context, _ *mcp.CallToolRequest, a idArgs) (*mcp.CallToolResult, any, error) {
			l, err := sdkapp.LaterOf(ctx)
			if err != nil {
				return nil, nil, err
			}
			return answer(l.AwaitAsk(ctx, a.ID))
		})
		mcp.AddTool(s, &mcp.Tool{Name: "ask_decide"}, func(ctx context.Context, _ *mcp.CallToolRequest, a decideArgs) (*mcp.CallToolResult, any, error) {
			d, err := sdkapp.DeciderOf(ctx)
			if err != nil {
				return nil, nil, err
			}
			return answer(d.DecideAsk(ctx, a.ID, sdkapp.Answer{Accept: a.Accept, Input: a.Input}))
		})
	})
}

// startCodeAskNode is a code-mode node serving codeAskPack too, with vera
// (a viewer of acme) and alice's viewer key; tweak applies after.
func startCodeAskNode(t *testing.T, tweak func(*app.Config)) app.Info {
	t.Helper()
	return startCodeNode(t, func(c *app.Config) {
		c.MCP.ExtraPacks = append(c.MCP.ExtraPacks, codeAskPack())
		c.MCP.Packs = append(c.MCP.Packs, "codeask")
		k, err := c.MCP.Keys.Merge(mustKeys(t, veraToken, "vera", "acme", "viewer"))
		if err == nil {
			k, err = k.Merge(mustKeys(t, aliceViewerToken, "alice", "acme", "viewer"))
		}
		if err != nil {
			t.Fatal(err)
		}
		c.MCP.Keys = k
		if tweak != nil {
			tweak(c)
		}
	})
}

// askTool calls tool on id (with extra arguments) and returns its text
// and whether it was a tool error.
func askTool(t *testing.T, cs *mcp.ClientSession, tool, id string, extra map[string]any) (string, bool) {
	t.Helper()
	args := map[string]any{"id": id}
	for k, v := range extra {
		args[k] = v
	}
	res, _ := callTool(t, cs, tool, args)
	return mcpclient.Text(res), res.IsError
}

// wantAsk asserts tool's answer on id: a success with text want, or, with
// wantErr set, a tool error containing wantErr's text.
func wantAsk(t *testing.T, what string, cs *mcp.ClientSession, tool, id string, extra map[string]any, want string, wantErr error) {
	t.Helper()
	text, isErr := askTool(t, cs, tool, id, extra)
	switch {
	case wantErr != nil && (!isErr || !strings.Contains(text, wantErr.Error())):
		t.Fatalf("%s: %s (error %v), want the error %q", what, text, isErr, wantErr)
	case wantErr == nil && (isErr || text != want):
		t.Fatalf("%s: %s (error %v), want %q", what, text, isErr, want)
	}
}

// AskStatus of a code-mode execution id, from a second session of the
// owner's user: pending while it waits (AwaitAsk: ErrAwaitElsewhere, the
// engine holds it), then approved, or declined, by alice on the HTTP
// approval API (with who decided) — a read from the inbox's row and the
// engine's journal; another user of acme is refused as for a foreign
// question, globex does not find it, and the reads decide nothing (the
// pause still waits, no write ran); a 2026-07-28 request's code pause (no
// session holds it) stays unknown. Before, a code-mode id was
// ErrUnknownAsk to every SDK call.
func TestAskStatusReadsACodePause(t *testing.T) {
	info := startCodeAskNode(t, nil)
	base := "http://" + info.HTTPAddr
	owner := connectMode(t, info.HTTPAddr, aliceToken, "")
	other := connectMode(t, info.HTTPAddr, aliceToken, "")
	id := pause(t, owner, "waiting_for_interaction")

	wantAsk(t, "status of a pending code pause", other, "ask_status", id, nil, "pending false", nil)
	wantAsk(t, "status in the owning session", owner, "ask_status", id, nil, "pending false", nil)
	wantAsk(t, "await of a pending code pause", other, "ask_await", id, nil, "", sdkapp.ErrAwaitElsewhere)
	for _, h := range []struct {
		who, token string
		err        error
	}{
		{"bob (a member of acme)", bobToken, sdkapp.ErrForeignAsk},
		{"vera (a viewer of acme)", veraToken, sdkapp.ErrForeignAsk},
		{"carol (globex)", carolToken, sdkapp.ErrUnknownAsk},
	} {
		wantAsk(t, h.who, connectMode(t, info.HTTPAddr, h.token, ""), "ask_status", id, nil, "", h.err)
	}
	if r := api(t, "GET", base+"/api/executions/"+id, aliceToken, ""); r.status != 200 {
		t.Fatalf("the pause after the reads: %d %v, want it still listed", r.status, r.body)
	}
	if n := len(todos(t, info.HTTPAddr, aliceToken)); n != 0 {
		t.Fatalf("a read ran the write: %d todos", n)
	}

	if r := api(t, "POST", base+"/api/executions/"+id+"/resume", aliceToken, `{"action":"accept"}`); r.status != 200 {
		t.Fatalf("approve on the HTTP API: %d %v", r.status, r.body)
	}
	wantAsk(t, "status after the approval", other, "ask_status", id, nil, "decided true alice", nil)
	res, sc := callTool(t, owner, "resume", map[string]any{"executionId": id})
	if res.IsError || sc["status"] != "completed" {
		t.Fatalf("the model's resume after the approval: %s / %v", mcpclient.Text(res), sc)
	}
	wantAsk(t, "status once the execution ended", other, "ask_status", id, nil, "decided true alice", nil)
	wantAsk(t, "await of a decided code pause", other, "ask_await", id, nil, "decided true alice", nil)

	declined := pause(t, owner, "waiting_for_interaction")
	if r := api(t, "POST", base+"/api/executions/"+declined+"/resume", aliceToken, `{"action":"decline"}`); r.status != 200 {
		t.Fatalf("decline on the HTTP API: %d %v", r.status, r.body)
	}
	wantAsk(t, "status after the decline", other, "ask_status", declined, nil, "decided false alice", nil)
	if n := len(todos(t, info.HTTPAddr, aliceToken)); n != 1 {
		t.Fatalf("todos %d, want the approved write only", n)
	}

	// A pause no session holds (a 2026-07-28 request's, on its
	// continuation grain) stays unknown to the SDK's calls from a
	// session, as to code mode's resume from one.
	modern := mrtrClient(t, info.HTTPAddr, aliceToken)
	if res, err := modern.CallTool(t.Context(), &mcp.CallToolParams{Name: "execute", Arguments: map[string]any{"code": testcluster.CreateCode}}); err != nil || !res.NeedsInput() {
		t.Fatalf("a 2026-07-28 execute: %+v %v, want input_required", res, err)
	}
	r := api(t, "GET", base+"/api/executions", aliceToken, "")
	listed, _ := r.body["executions"].([]any)
	if r.status != 200 || len(listed) != 1 {
		t.Fatalf("the inbox: %d %v, want the 2026-07-28 pause only", r.status, r.body)
	}
	sessionless, _ := listed[0].(map[string]any)["executionId"].(string)
	wantAsk(t, "status of a 2026-07-28 pause", other, "ask_status", sessionless, nil, "", sdkapp.ErrUnknownAsk)
	wantAsk(t, "a decision of a 2026-07-28 pause", other, "ask_decide", sessionless, map[string]any{"accept": true}, "", sdkapp.ErrUnknownAsk)
	if n := len(todos(t, info.HTTPAddr, aliceToken)); n != 1 {
		t.Fatalf("todos %d after the refused decision of the 2026-07-28 pause, want 1", n)
	}
}

// AskStatus of a code pause nobody decided: once the approval window's
// reminder declined it (the engine journaled approval_timeout), expired —
// from another session, read from the journal.
func TestAskStatusReadsAnExpiredCodePause(t *testing.T) {
	info := startCodeAskNode(t, func(c *app.Config) {
		c.NodeID = "ce1"
		c.MCP.Code.Window = 1500 * time.Millisecond
		c.ReminderPoll = 50 * time.Millisecond
	})
	p := metricsProbe{t, info.HTTPAddr}
	owner := connectMode(t, info.HTTPAddr, aliceToken, "")
	other := connectMode(t, info.HTTPAddr, aliceToken, "")
	id := pause(t, owner, "waiting_for_interaction")
	p.waitFor("approval timeout", "mcpgrain_approvals_total", map[string]string{"node": "ce1", "outcome": "timeout"}, exactly(1))
	p.waitFor("approval timeout", "mcpgrain_paused_executions", map[string]string{"node": "ce1"}, exactly(0))
	wantAsk(t, "status of an expired code pause", other, "ask_status", id, nil, "expired false  approval_timeout", nil)
	wantAsk(t, "a decision of an expired code pause", other, "ask_decide", id, map[string]any{"accept": true}, "", sdkapp.ErrAlreadyDecided)
	if n := len(todos(t, info.HTTPAddr, aliceToken)); n != 0 {
		t.Fatalf("an expired pause ran the write: %d todos", n)
	}
}

// DecideAsk of a code-mode pause from another session of alice, its owner
// passivated by the cap: bob (another user) and vera (another user, a
// viewer) are refused as for a foreign question, globex's carol does not
// find it, alice's own viewer key may not decide (--approvers), an accept
// with input is refused (a code pause is a confirmation) — none of them
// decided or ran the write. Alice's member key then decides it: the owning
// session grain (restored) takes it as an in-band decision, records it as
// a surface's and its engine runs the write once; the model's later
// resume gets the settled outcome, and a second decision is refused. A
// decline from the owning session itself is taken the same way (no
// write). Before, DecideAsk of a code-mode id was ErrUnknownAsk.
func TestDecideAskDecidesACodePause(t *testing.T) {
	info := startCodeAskNode(t, func(c *app.Config) {
		c.NodeID = "cd1"
		c.MCP.SoftCap = 1
	})
	p := metricsProbe{t, info.HTTPAddr}
	owner := connectMode(t, info.HTTPAddr, aliceToken, "")
	id := pause(t, owner, "waiting_for_interaction")
	other := connectMode(t, info.HTTPAddr, aliceToken, "") // over the cap: the owner passivates
	p.waitFor("owner passivated", "mcpgrain_runtime_disposals_total", map[string]string{"node": "cd1", "reason": "cap"}, atLeast(1))

	accept := map[string]any{"accept": true}
	for _, h := range []struct {
		who, token string
		extra      map[string]any
		err        error
	}{
		{"bob (a member of acme)", bobToken, accept, sdkapp.ErrForeignAsk},
		{"vera (a viewer of acme)", veraToken, accept, sdkapp.ErrForeignAsk},
		{"carol (globex)", carolToken, accept, sdkapp.ErrUnknownAsk},
		{"alice's viewer key", aliceViewerToken, accept, sdkapp.ErrMayNotDecide},
		{"an accept with input", aliceToken, map[string]any{"accept": true, "input": map[string]any{"title": "other"}}, sdkapp.ErrNoInput},
	} {
		wantAsk(t, h.who, connectMode(t, info.HTTPAddr, h.token, ""), "ask_decide", id, h.extra, "", h.err)
		wantAsk(t, "status after "+h.who, other, "ask_status", id, nil, "pending false", nil)
	}
	if n := len(todos(t, info.HTTPAddr, aliceToken)); n != 0 {
		t.Fatalf("a refused decision ran the write: %d todos", n)
	}

	wantAsk(t, "alice's decision from another session", other, "ask_decide", id, accept, "decided true alice", nil)
	res, sc := callTool(t, other, "resume", map[string]any{"executionId": id, "action": "accept"})
	if res.IsError || sc["status"] != "completed" || !strings.Contains(fmt.Sprint(sc["result"]), "ship it") {
		t.Fatalf("the model's resume after the decision: %s / %v", mcpclient.Text(res), sc)
	}
	if got := todos(t, info.HTTPAddr, aliceToken); len(got) != 1 {
		t.Fatalf("todos %v, want the one write", got)
	}
	wantAsk(t, "status after the decision", other, "ask_status", id, nil, "decided true alice", nil)
	wantAsk(t, "a second decision", other, "ask_decide", id, map[string]any{"accept": false}, "", sdkapp.ErrAlreadyDecided)
	declined := pause(t, other, "waiting_for_interaction")
	wantAsk(t, "alice's decline in the owning session", other, "ask_decide", declined, map[string]any{"accept": false}, "decided false alice", nil)
	if res, sc := callTool(t, other, "resume", map[string]any{"executionId": declined}); sc["status"] == "completed" {
		t.Fatalf("the model's resume after the decline: %s / %v", mcpclient.Text(res), sc)
	}
	wantAsk(t, "status after the decline", owner, "ask_status", declined, nil, "decided false alice", nil)
	if got := todos(t, info.HTTPAddr, aliceToken); len(got) != 1 {
		t.Fatalf("todos %v after the decline, want the one accepted write", got)
	}
	if r := api(t, "GET", "http://"+info.HTTPAddr+"/api/executions/"+id, aliceToken, ""); r.status != 409 || r.body["error"] != "execution_already_decided" {
		t.Fatalf("the decided pause on the HTTP API: %d %v, want execution_already_decided", r.status, r.body)
	}
}
