package systemtest

import (
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/exchange/requeststate"
	"github.com/mcpgrain/mcpgrain/internal/mcpclient"
)

// Issue 23, finding 7: one-shot clients (the Inspector CLI, scripts) open a
// new session per call, so the `resume` of an execution that already
// completed comes from a session that never saw it. It must answer the
// execution's outcome to the principal that ran it — never advise running
// the code again, which would repeat a write that already happened — and
// must answer another principal exactly what an unknown id gets.

// resumeFromElsewhere checks what every caller gets for execution id,
// which ran createCode to completion (result "ship it") for alice: alice's
// new session and her 2026-07-28 client, with and without a decision, get
// the outcome; bob (alice's organization) and carol (another) get no
// outcome, carol exactly what an unknown id gets; and the write ran once.
func resumeFromElsewhere(t *testing.T, addr, id string) {
	t.Helper()
	callers := map[string]*mcp.ClientSession{
		"alice, a new session":     connectMode(t, addr, aliceToken, ""),
		"alice, browser mode":      connectMode(t, addr, aliceToken, "browser"),
		"alice, 2026-07-28 client": mrtrClient(t, addr, aliceToken),
	}
	for name, cs := range callers {
		for _, action := range []string{"accept", "decline", ""} {
			args := map[string]any{"executionId": id}
			if action != "" {
				args["action"] = action
			}
			res, sc := callTool(t, cs, "resume", args)
			if res.IsError || sc["status"] != "completed" || !strings.Contains(mcpclient.Text(res), "ship it") {
				t.Errorf("%s: resume %v: %s / %v, want the completed outcome", name, args, mcpclient.Text(res), sc)
			}
			if sc["recovery"] != nil || strings.Contains(mcpclient.Text(res), "run the execute tool again") {
				t.Errorf("%s: resume %v advises running the code again: %s / %v", name, args, mcpclient.Text(res), sc)
			}
		}
	}

	unknown := "exec_" + strings.Repeat("0", 32)
	intruders := map[string]*mcp.ClientSession{
		"bob (alice's organization)":               connectMode(t, addr, bobToken, ""),
		"carol (another organization)":             connectMode(t, addr, carolToken, ""),
		"carol (another organization, 2026-07-28)": mrtrClient(t, addr, carolToken),
	}
	for name, cs := range intruders {
		for _, action := range []string{"accept", ""} {
			args := map[string]any{"executionId": id}
			if action != "" {
				args["action"] = action
			}
			res, sc := callTool(t, cs, "resume", args)
			txt := mcpclient.Text(res)
			if !res.IsError || sc["status"] == "completed" || strings.Contains(txt, "ship it") || sc["result"] != nil {
				t.Errorf("%s: resume %v leaked the outcome: %s / %v", name, args, txt, sc)
			}
			if !strings.HasPrefix(name, "carol") {
				continue
			}
			args["executionId"] = unknown
			ures, usc := callTool(t, cs, "resume", args)
			if sc["status"] != "execution_not_found" || sc["status"] != usc["status"] ||
				strings.ReplaceAll(mcpclient.Text(ures), unknown, id) != txt {
				t.Errorf("%s: resume %v: %s / %v; an unknown id gets %s / %v", name, args, txt, sc, mcpclient.Text(ures), usc)
			}
		}
	}
	if n := len(todos(t, addr, aliceToken)); n != 1 {
		t.Fatalf("%d to-dos, want exactly 1: a resume ran the write again", n)
	}
}

// A session executes a write, it is approved and completes; the one-shot
// client closes its session. Resuming the id from anywhere else answers
// the outcome (or nothing, for another principal).
func TestResumeOfACompletedExecutionFromANewSessionAnswersItsOutcome(t *testing.T) {
	for _, closeOwner := range []bool{true, false} {
		name := "owner session open"
		if closeOwner {
			name = "owner session closed"
		}
		t.Run(name, func(t *testing.T) {
			info := startCodeNode(t, nil)
			owner := connectMode(t, info.HTTPAddr, aliceToken, "")
			id := pause(t, owner, "waiting_for_interaction")
			res, sc := callTool(t, owner, "resume", map[string]any{"executionId": id, "action": "accept"})
			if res.IsError || sc["status"] != "completed" {
				t.Fatalf("approve: %s / %v", mcpclient.Text(res), sc)
			}
			if closeOwner {
				if err := owner.Close(); err != nil {
					t.Fatalf("close the owner session: %v", err)
				}
			}
			resumeFromElsewhere(t, info.HTTPAddr, id)
		})
	}
}

// The same for an execution a 2026-07-28 client ran: its retry completed
// it, a repeated retry replays the outcome, and a resume of its id from a
// session or another sessionless request answers the outcome too.
func TestResumeOfACompletedSessionlessExecutionAnswersItsOutcome(t *testing.T) {
	info := startCodeNode(t, nil)
	alice := mrtrClient(t, info.HTTPAddr, aliceToken)
	args := map[string]any{"code": createCode}
	first, err := alice.CallTool(t.Context(), &mcp.CallToolParams{Name: "execute", Arguments: args})
	if err != nil || !first.NeedsInput() {
		t.Fatalf("execute did not pause: %+v %v", first, err)
	}
	claims, err := requeststate.Verify(testStateKey, first.RequestState, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	retry := &mcp.CallToolParams{Name: "execute", Arguments: args, RequestState: first.RequestState,
		InputResponses: mcp.InputResponseMap{"approval": &mcp.ElicitResult{Action: "accept", Content: map[string]any{}}}}
	for i := range 2 {
		done, err := alice.CallTool(t.Context(), retry)
		if err != nil || done.IsError || !strings.Contains(mcpclient.Text(done), "ship it") {
			t.Fatalf("retry %d: %+v %v", i+1, done, err)
		}
	}
	resumeFromElsewhere(t, info.HTTPAddr, claims.Inner)
}
